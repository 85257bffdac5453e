#include "models/kv_store.h"

#include <cstring>

namespace radixlm::models {

std::vector<int> KvStore::HeldLayers(const ModelConfig& model, bool window_rings) {
  std::vector<int> held;
  for (int l = 0; l < model.n_attention_layers(); ++l)
    if (!window_rings || model.layer_window.empty() || model.layer_window[l] == 0) held.push_back(l);
  return held;
}

size_t KvStore::BytesPerBlock(const ModelConfig& model, int block_tokens, core::DType dtype, bool window_rings) {
  return size_t{2} * HeldLayers(model, window_rings).size() * block_tokens * model.n_kv_heads * model.head_dim *
         core::DTypeSize(dtype);
}

KvStore::KvStore(const ModelConfig& model, KvStoreConfig config)
    : config_(config), n_kv_heads_(model.n_kv_heads), head_dim_(model.head_dim),
      slot_of_(model.n_attention_layers(), -1) {
  RADIXLM_CHECK(config.dtype == core::DType::kF32 || config.dtype == core::DType::kBF16 || config.dtype == core::DType::kF16);
  const std::vector<int> held = HeldLayers(model, config.window_rings);
  n_layers_ = static_cast<int>(held.size());
  for (int i = 0; i < n_layers_; ++i) slot_of_[held[i]] = i;
  buffer_.Resize(BytesPerBlock(model, config.block_tokens, config.dtype, config.window_rings) * config.n_blocks);
}

bool KvStore::Holds(int layer) const {
  return layer >= 0 && layer < static_cast<int>(slot_of_.size()) && slot_of_[layer] >= 0;
}

kernels::KvLayerView KvStore::Layer(int layer) const {
  RADIXLM_CHECK(Holds(layer));
  const size_t per_tensor = size_t{1} * config_.n_blocks * config_.block_tokens * n_kv_heads_ * head_dim_ *
                            core::DTypeSize(config_.dtype);
  uint8_t* base = const_cast<uint8_t*>(buffer_.data()) + 2 * per_tensor * slot_of_[layer];
  return {base, base + per_tensor, config_.block_tokens, n_kv_heads_, head_dim_, config_.dtype};
}

std::vector<KvStore::Segment> KvStore::BlockSegments(int32_t block) const {
  RADIXLM_CHECK(block >= 0 && block < config_.n_blocks);
  const size_t seg = size_t{1} * config_.block_tokens * n_kv_heads_ * head_dim_ * core::DTypeSize(config_.dtype);
  std::vector<Segment> out;
  for (int l = 0; l < static_cast<int>(slot_of_.size()); ++l) {
    if (!Holds(l)) continue;
    const kernels::KvLayerView v = Layer(l);
    out.push_back({static_cast<uint8_t*>(v.k) + seg * block, seg});
    out.push_back({static_cast<uint8_t*>(v.v) + seg * block, seg});
  }
  return out;
}

void KvStore::CopyBlockPrefix(int32_t src, int32_t dst, int tokens) {
  RADIXLM_CHECK(src >= 0 && src < config_.n_blocks && dst >= 0 && dst < config_.n_blocks && tokens <= config_.block_tokens);
  const size_t elem = core::DTypeSize(config_.dtype);
  const size_t bytes = size_t{1} * tokens * head_dim_ * elem;  // one head's value rows
  for (int l = 0; l < static_cast<int>(slot_of_.size()); ++l) {
    if (!Holds(l)) continue;
    const kernels::KvLayerView v = Layer(l);
    // Keys are [head, head_dim, block_tokens] per block: copy the first `tokens` of each row.
    uint8_t* k = static_cast<uint8_t*>(v.k);
    uint8_t* val = static_cast<uint8_t*>(v.v);
    for (int h = 0; h < n_kv_heads_; ++h)
      for (int i = 0; i < head_dim_; ++i)
        std::memcpy(k + v.KeyIndex(dst, 0, h, i) * elem, k + v.KeyIndex(src, 0, h, i) * elem, tokens * elem);
    for (int h = 0; h < n_kv_heads_; ++h)
      std::memcpy(val + v.ValueIndex(dst, 0, h) * elem, val + v.ValueIndex(src, 0, h) * elem, bytes);
  }
}

}  // namespace radixlm::models
