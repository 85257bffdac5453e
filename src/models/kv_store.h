// The memory behind the paged KV cache: for each attention layer, K and V of shape
// [n_blocks, block_tokens, n_kv_heads, head_dim] in f32. Blocks are addressed by id; which id
// belongs to whom is decided elsewhere (cache::BlockPool), never here.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/attention.h"
#include "models/model_config.h"

namespace radixlm::models {

struct KvStoreConfig {
  int n_blocks = 0;
  int block_tokens = 16;
};

class KvStore {
 public:
  KvStore(const ModelConfig& model, KvStoreConfig config);
  kernels::KvLayerView Layer(int attention_layer) const;
  // Copies KV slots [0, tokens) of block src into block dst, in every layer (copy-on-write of
  // a partially matched cached block).
  void CopyBlockPrefix(int32_t src, int32_t dst, int tokens);
  int n_blocks() const { return config_.n_blocks; }
  int block_tokens() const { return config_.block_tokens; }
  size_t nbytes() const { return buffer_.size(); }
  static size_t BytesPerBlock(const ModelConfig& model, int block_tokens);

 private:
  KvStoreConfig config_;
  int n_kv_heads_, head_dim_, n_layers_;
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
