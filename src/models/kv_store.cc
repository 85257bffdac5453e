#include "models/kv_store.h"

#include <cstring>

namespace radixlm::models {

size_t KvStore::BytesPerBlock(const ModelConfig& model, int block_tokens) {
  return size_t{2} * model.n_attention_layers() * block_tokens * model.n_kv_heads * model.head_dim * sizeof(float);
}

KvStore::KvStore(const ModelConfig& model, KvStoreConfig config)
    : config_(config), n_kv_heads_(model.n_kv_heads), head_dim_(model.head_dim),
      n_layers_(model.n_attention_layers()) {
  buffer_.Resize(BytesPerBlock(model, config.block_tokens) * config.n_blocks);
}

kernels::KvLayerView KvStore::Layer(int layer) const {
  RADIXLM_CHECK(layer >= 0 && layer < n_layers_);
  const size_t per_tensor = size_t{1} * config_.n_blocks * config_.block_tokens * n_kv_heads_ * head_dim_;
  float* base = const_cast<float*>(buffer_.as<float>()) + 2 * per_tensor * layer;
  return {base, base + per_tensor, config_.block_tokens, n_kv_heads_, head_dim_};
}

void KvStore::CopyBlockPrefix(int32_t src, int32_t dst, int tokens) {
  RADIXLM_CHECK(src >= 0 && src < config_.n_blocks && dst >= 0 && dst < config_.n_blocks && tokens <= config_.block_tokens);
  const size_t bytes = size_t{1} * tokens * n_kv_heads_ * head_dim_ * sizeof(float);
  for (int l = 0; l < n_layers_; ++l) {
    const kernels::KvLayerView v = Layer(l);
    // Keys are [head, head_dim, block_tokens] per block: copy the first `tokens` of each row.
    for (int h = 0; h < n_kv_heads_; ++h)
      for (int i = 0; i < head_dim_; ++i)
        std::memcpy(&v.Key(dst, 0, h, i), &v.Key(src, 0, h, i), tokens * sizeof(float));
    std::memcpy(v.ValueAt(dst, 0, 0), v.ValueAt(src, 0, 0), bytes);
  }
}

}  // namespace radixlm::models
