// The memory behind the paged KV cache: for each attention layer, K and V of n_blocks blocks
// (layouts in kernels::KvLayerView) in f32, bf16 or f16 (bf16 halves the bytes
// decode attention reads and doubles the tokens a pool holds; K/V are rounded once, when written). Blocks are addressed by id; which id
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
  core::DType dtype = core::DType::kF32;  // f32, bf16 or f16
  // The sliding-window layers' KV lives in per-sequence rings (SsmStateStore's WindowRings),
  // not here: their views are empty and a block holds only the full-attention layers.
  bool window_rings = false;
};

class KvStore {
 public:
  KvStore(const ModelConfig& model, KvStoreConfig config);
  // REQUIRES: Holds(attention_layer).
  kernels::KvLayerView Layer(int attention_layer) const;
  bool Holds(int attention_layer) const;
  // Copies KV slots [0, tokens) of block src into block dst, in every layer (copy-on-write of
  // a partially matched cached block).
  void CopyBlockPrefix(int32_t src, int32_t dst, int tokens);
  // Where block `block`'s bytes live: 2 contiguous runs per attention layer (its keys, then its
  // values), BytesPerBlock in all, in this order (a disk tier's file holds them so).
  struct Segment {
    uint8_t* data;
    size_t bytes;
  };
  std::vector<Segment> BlockSegments(int32_t block) const;
  int n_blocks() const { return config_.n_blocks; }
  int block_tokens() const { return config_.block_tokens; }
  size_t nbytes() const { return buffer_.size(); }
  core::DType dtype() const { return config_.dtype; }
  static size_t BytesPerBlock(const ModelConfig& model, int block_tokens, core::DType dtype, bool window_rings = false);

 private:
  // The attention layers this store holds (all, or the full-attention ones with window_rings).
  static std::vector<int> HeldLayers(const ModelConfig& model, bool window_rings);
  KvStoreConfig config_;
  int n_kv_heads_, head_dim_, n_layers_;
  std::vector<int> slot_of_;  // per attention layer: its place in the buffer, or -1
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
