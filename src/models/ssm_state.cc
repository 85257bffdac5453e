#include "models/ssm_state.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"

namespace radixlm::models {

std::vector<std::pair<int64_t, int64_t>> SsmStateStore::LayerFloats(const ModelConfig& model) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (LayerKind k : model.layers) {
    if (k == LayerKind::kMamba2) out.push_back({model.ssm_dims().ssm_state_floats(), model.ssm_dims().conv_state_floats()});
    if (k == LayerKind::kDeltaNet) out.push_back({model.gdn_dims().ssm_state_floats(), model.gdn_dims().conv_state_floats()});
    if (k == LayerKind::kShortConv) out.push_back({0, model.short_conv_dims().conv_state_floats()});
  }
  return out;
}

namespace {

size_t RingBytes(const ModelConfig& model, const WindowRings& rings) {
  if (rings.ring_tokens == 0) return 0;
  return static_cast<size_t>(model.KvValuesPerToken(true, false)) * rings.ring_tokens * core::DTypeSize(rings.dtype);
}

// The sliding layers that keep their own KV, which all have one head shape (a ring block's
// bytes are the same in every ring, so block ids address any of them); -1 per other layer.
std::vector<int> RingOf(const ModelConfig& model, int* n_rings, int* n_kv_heads, int* head_dim) {
  std::vector<int> ring_of;
  *n_rings = 0;
  for (int a = 0; a < static_cast<int>(model.layer_window.size()); ++a) {
    const bool ring = model.layer_window[a] > 0 && model.OwnsKv(a);
    ring_of.push_back(ring ? (*n_rings)++ : -1);
    if (!ring) continue;
    RADIXLM_CHECK_MSG(*n_rings == 1 || (model.AttnKvHeads(a) == *n_kv_heads && model.AttnHeadDim(a) == *head_dim),
                      "window rings need one head shape across the sliding layers");
    *n_kv_heads = model.AttnKvHeads(a);
    *head_dim = model.AttnHeadDim(a);
  }
  return ring_of;
}

}  // namespace

int SsmStateStore::RingTokens(const ModelConfig& model, int block_tokens, int max_step_rows) {
  const int w = model.sliding_window();
  if (w == 0) return 0;
  const int blocks = (w - 1 + max_step_rows + block_tokens - 1) / block_tokens + 1;
  return blocks * block_tokens;
}

SsmStateStore::SsmStateStore(const ModelConfig& model, int n_slots, WindowRings rings)
    : n_slots_(n_slots), rings_(rings), window_(model.sliding_window()) {
  int64_t at = 0;
  for (const auto& [ssm, conv] : LayerFloats(model)) {
    offset_.push_back(at);
    ssm_floats_.push_back(ssm);
    at += ssm + conv;
  }
  offset_.push_back(at);
  if (rings.ring_tokens > 0) {
    RADIXLM_CHECK_MSG(at == 0, "window rings on a model with recurrent layers");
    RADIXLM_CHECK_MSG(window_ > 0, "window rings on a model without sliding layers");
    RADIXLM_CHECK(rings.block_tokens > 0 && rings.ring_tokens % rings.block_tokens == 0);
    RADIXLM_CHECK_MSG(max_step_rows() > 0, "window rings too short for the window");
    ring_of_ = RingOf(model, &n_ring_layers_, &n_kv_heads_, &head_dim_);
    RADIXLM_CHECK_MSG(int64_t{n_slots} * 2 * n_ring_layers_ * ring_blocks() <= INT32_MAX, "too many window ring blocks");
  }
  slot_bytes_ = BytesPerSlot(model, rings);
  buffer_.Resize(static_cast<size_t>(n_slots) * slot_bytes_);
  for (int s = 0; s < n_slots; ++s) Reset(s);
}

size_t SsmStateStore::BytesPerSlot(const ModelConfig& model, const WindowRings& rings) {
  size_t floats = 0;
  for (const auto& [ssm, conv] : LayerFloats(model)) floats += static_cast<size_t>(ssm + conv);
  return floats * sizeof(float) + RingBytes(model, rings);
}

float* SsmStateStore::Ssm(int slot, int layer) {
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_ && layer >= 0 && layer + 1 < static_cast<int>(offset_.size()));
  return reinterpret_cast<float*>(buffer_.data() + slot * slot_bytes_) + offset_[layer];
}

float* SsmStateStore::Conv(int slot, int layer) { return Ssm(slot, layer) + ssm_floats_[layer]; }

void SsmStateStore::Reset(int slot) {
  // A ring needs no reset: a row reads only positions it or an earlier row of its sequence wrote.
  if (offset_.back() == 0) return;
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_);
  std::memset(buffer_.data() + slot * slot_bytes_, 0, offset_.back() * sizeof(float));
}

void* SsmStateStore::SlotData(int slot) {
  RADIXLM_CHECK(slot >= 0 && slot < n_slots_);
  return buffer_.data() + slot * slot_bytes_;
}

void SsmStateStore::Copy(int src, int dst) {
  if (slot_bytes_ == 0 || src == dst) return;
  RADIXLM_CHECK(src >= 0 && src < n_slots_ && dst >= 0 && dst < n_slots_);
  std::memcpy(buffer_.data() + dst * slot_bytes_, buffer_.data() + src * slot_bytes_, slot_bytes_);
}

size_t SsmStateStore::RingBlockBytes() const {
  return size_t{1} * rings_.block_tokens * n_kv_heads_ * head_dim_ * core::DTypeSize(rings_.dtype);
}

bool SsmStateStore::InRing(int kv_index) const {
  return kv_index >= 0 && kv_index < static_cast<int>(ring_of_.size()) && ring_of_[kv_index] >= 0;
}

kernels::KvLayerView SsmStateStore::RingLayer(int kv_index) const {
  RADIXLM_CHECK(InRing(kv_index));
  // Slot s's ring layer r: K at blocks [2r Rb, (2r + 1) Rb) of the slot, V right after; block
  // id s * (2 n_ring Rb) + j then addresses ring block j of slot s through either pointer.
  uint8_t* base = const_cast<uint8_t*>(buffer_.data()) + 2 * size_t(ring_of_[kv_index]) * ring_blocks() * RingBlockBytes();
  return {base, base + ring_blocks() * RingBlockBytes(), rings_.block_tokens, n_kv_heads_, head_dim_, rings_.dtype};
}

void SsmStateStore::RingTable(int slot, int64_t n_blocks, std::vector<int32_t>* out) const {
  RADIXLM_CHECK(has_rings() && slot >= 0 && slot < n_slots_);
  const int64_t first = int64_t{slot} * 2 * n_ring_layers_ * ring_blocks();
  out->resize(n_blocks);
  for (int64_t i = 0; i < n_blocks; ++i) (*out)[i] = static_cast<int32_t>(first + i % ring_blocks());
}

void SsmStateStore::CopyWindow(int src, int dst, int64_t end) {
  if (!has_rings() || src == dst || end <= 0) return;
  RADIXLM_CHECK(src >= 0 && src < n_slots_ && dst >= 0 && dst < n_slots_);
  const int64_t bt = rings_.block_tokens;
  const int64_t first = std::max<int64_t>(0, end - (window_ - 1)) / bt, last = (end - 1) / bt;
  const size_t block = RingBlockBytes();
  for (int r = 0; r < 2 * n_ring_layers_; ++r) {  // each ring layer's K, then V
    const size_t layer = size_t(r) * ring_blocks() * block;
    for (int64_t i = first; i <= last; ++i) {
      const size_t at = layer + size_t(i % ring_blocks()) * block;
      std::memcpy(buffer_.data() + dst * slot_bytes_ + at, buffer_.data() + src * slot_bytes_ + at, block);
    }
  }
}

}  // namespace radixlm::models
