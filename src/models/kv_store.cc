#include "models/kv_store.h"

#include <cstring>

namespace radixlm::models {

std::vector<int> KvStore::HeldLayers(const ModelConfig& model, bool window_rings) {
  std::vector<int> held;
  for (int l = 0; l < model.n_attention_layers(); ++l)
    if (model.OwnsKv(l) && (!window_rings || model.layer_window.empty() || model.layer_window[l] == 0)) held.push_back(l);
  return held;
}

size_t KvStore::BytesPerBlock(const ModelConfig& model, int block_tokens, core::DType dtype, bool window_rings) {
  size_t values = 0;
  for (int l : HeldLayers(model, window_rings)) values += size_t{2} * model.AttnKvHeads(l) * model.AttnHeadDim(l);
  return values * block_tokens * core::DTypeSize(dtype);
}

KvStore::KvStore(const ModelConfig& model, KvStoreConfig config)
    : config_(config), shape_(model.n_attention_layers()) {
  RADIXLM_CHECK(config.dtype == core::DType::kF32 || config.dtype == core::DType::kBF16 || config.dtype == core::DType::kF16);
  // Layer l's K then V, each [n_blocks] blocks of its own shape, one layer after another.
  size_t at = 0;
  for (int l : HeldLayers(model, config.window_rings)) {
    LayerShape& s = shape_[l];
    s = {true, model.AttnKvHeads(l), model.AttnHeadDim(l), at};
    at += 2 * TensorBytes(s);
  }
  buffer_.Resize(at);
}

size_t KvStore::TensorBytes(const LayerShape& s) const {
  return size_t{1} * config_.n_blocks * config_.block_tokens * s.n_kv_heads * s.head_dim * core::DTypeSize(config_.dtype);
}

bool KvStore::Holds(int layer) const {
  return layer >= 0 && layer < static_cast<int>(shape_.size()) && shape_[layer].held;
}

kernels::KvLayerView KvStore::Layer(int layer) const {
  RADIXLM_CHECK(Holds(layer));
  const LayerShape& s = shape_[layer];
  uint8_t* base = const_cast<uint8_t*>(buffer_.data()) + s.offset;
  return {base, base + TensorBytes(s), config_.block_tokens, s.n_kv_heads, s.head_dim, config_.dtype};
}

std::vector<KvStore::Segment> KvStore::BlockSegments(int32_t block) const {
  RADIXLM_CHECK(block >= 0 && block < config_.n_blocks);
  std::vector<Segment> out;
  for (int l = 0; l < static_cast<int>(shape_.size()); ++l) {
    if (!Holds(l)) continue;
    const kernels::KvLayerView v = Layer(l);
    const size_t seg = TensorBytes(shape_[l]) / config_.n_blocks;
    out.push_back({static_cast<uint8_t*>(v.k) + seg * block, seg});
    out.push_back({static_cast<uint8_t*>(v.v) + seg * block, seg});
  }
  return out;
}

void KvStore::CopyBlockPrefix(int32_t src, int32_t dst, int tokens) {
  RADIXLM_CHECK(src >= 0 && src < config_.n_blocks && dst >= 0 && dst < config_.n_blocks && tokens <= config_.block_tokens);
  const size_t elem = core::DTypeSize(config_.dtype);
  for (int l = 0; l < static_cast<int>(shape_.size()); ++l) {
    if (!Holds(l)) continue;
    const kernels::KvLayerView v = Layer(l);
    const int n_kv_heads = v.n_kv_heads, head_dim = v.head_dim;
    const size_t bytes = size_t{1} * tokens * head_dim * elem;  // one head's value rows
    // Keys are [head, head_dim, block_tokens] per block: copy the first `tokens` of each row.
    uint8_t* k = static_cast<uint8_t*>(v.k);
    uint8_t* val = static_cast<uint8_t*>(v.v);
    for (int h = 0; h < n_kv_heads; ++h)
      for (int i = 0; i < head_dim; ++i)
        std::memcpy(k + v.KeyIndex(dst, 0, h, i) * elem, k + v.KeyIndex(src, 0, h, i) * elem, tokens * elem);
    for (int h = 0; h < n_kv_heads; ++h)
      std::memcpy(val + v.ValueIndex(dst, 0, h) * elem, val + v.ValueIndex(src, 0, h) * elem, bytes);
  }
}

}  // namespace radixlm::models
