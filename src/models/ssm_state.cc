#include "models/ssm_state.h"

#include <cstring>

#include "core/status.h"

namespace radixlm::models {

SsmStateStore::SsmStateStore(const ModelConfig& model, int n_slots)
    : n_slots_(n_slots),
      n_layers_(model.n_ssm_layers()),
      ssm_floats_(model.ssm_dims().ssm_state_floats()),
      conv_floats_(model.ssm_dims().conv_state_floats()) {
  buffer_.Resize(static_cast<size_t>(n_slots) * BytesPerSlot(model));
  for (int s = 0; s < n_slots; ++s) Reset(s);
}

size_t SsmStateStore::BytesPerSlot(const ModelConfig& model) {
  const kernels::Mamba2Dims d = model.ssm_dims();
  return static_cast<size_t>(model.n_ssm_layers()) * (d.ssm_state_floats() + d.conv_state_floats()) * sizeof(float);
}

float* SsmStateStore::Ssm(int slot, int layer) {
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer < n_layers_);
  return buffer_.as<float>() + (int64_t{slot} * n_layers_ + layer) * (ssm_floats_ + conv_floats_);
}

float* SsmStateStore::Conv(int slot, int layer) { return Ssm(slot, layer) + ssm_floats_; }

void SsmStateStore::Reset(int slot) {
  if (n_layers_ == 0) return;
  std::memset(Ssm(slot, 0), 0, n_layers_ * (ssm_floats_ + conv_floats_) * sizeof(float));
}

void SsmStateStore::Copy(int src, int dst) {
  if (n_layers_ == 0 || src == dst) return;
  std::memcpy(Ssm(dst, 0), Ssm(src, 0), n_layers_ * (ssm_floats_ + conv_floats_) * sizeof(float));
}

}  // namespace radixlm::models
