#include "models/ssm_state.h"

#include <cstring>

#include "core/status.h"

namespace radixlm::models {

std::vector<std::pair<int64_t, int64_t>> SsmStateStore::LayerFloats(const ModelConfig& model) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (LayerKind k : model.layers) {
    if (k == LayerKind::kMamba2) out.push_back({model.ssm_dims().ssm_state_floats(), model.ssm_dims().conv_state_floats()});
    if (k == LayerKind::kDeltaNet) out.push_back({model.gdn_dims().ssm_state_floats(), model.gdn_dims().conv_state_floats()});
  }
  return out;
}

SsmStateStore::SsmStateStore(const ModelConfig& model, int n_slots) : n_slots_(n_slots) {
  int64_t at = 0;
  for (const auto& [ssm, conv] : LayerFloats(model)) {
    offset_.push_back(at);
    ssm_floats_.push_back(ssm);
    at += ssm + conv;
  }
  offset_.push_back(at);
  buffer_.Resize(static_cast<size_t>(n_slots) * BytesPerSlot(model));
  for (int s = 0; s < n_slots; ++s) Reset(s);
}

size_t SsmStateStore::BytesPerSlot(const ModelConfig& model) {
  size_t floats = 0;
  for (const auto& [ssm, conv] : LayerFloats(model)) floats += static_cast<size_t>(ssm + conv);
  return floats * sizeof(float);
}

float* SsmStateStore::Ssm(int slot, int layer) {
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer + 1 < static_cast<int>(offset_.size()));
  return buffer_.as<float>() + int64_t{slot} * offset_.back() + offset_[layer];
}

float* SsmStateStore::Conv(int slot, int layer) { return Ssm(slot, layer) + ssm_floats_[layer]; }

void SsmStateStore::Reset(int slot) {
  if (offset_.back() == 0) return;
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_);
  std::memset(buffer_.as<float>() + int64_t{slot} * offset_.back(), 0, offset_.back() * sizeof(float));
}

void* SsmStateStore::SlotData(int slot) {
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_);
  return buffer_.as<float>() + int64_t{slot} * offset_.back();
}

void SsmStateStore::Copy(int src, int dst) {
  if (offset_.back() == 0 || src == dst) return;
  RADIXLM_CHECK(src >= 0 && src < n_slots_ && dst >= 0 && dst < n_slots_);
  std::memcpy(buffer_.as<float>() + int64_t{dst} * offset_.back(), buffer_.as<float>() + int64_t{src} * offset_.back(),
              offset_.back() * sizeof(float));
}

}  // namespace radixlm::models
