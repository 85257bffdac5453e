// The memory behind the paged KV cache: for each attention layer that keeps its own KV, K and V
// of n_blocks blocks in that layer's head shape
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
  // The attention layers this store holds: those that keep their own KV (not Gemma 4's shared
  // layers), all of them or, with window_rings, the full-attention ones.
  static std::vector<int> HeldLayers(const ModelConfig& model, bool window_rings);
  struct LayerShape {
    bool held = false;
    int n_kv_heads = 0, head_dim = 0;  // per layer (Gemma 4's differ by kind)
    size_t offset = 0;                 // where its K starts in buffer_; V follows
  };
  size_t TensorBytes(const LayerShape& s) const;  // one layer's K (or V) over all blocks
  KvStoreConfig config_;
  std::vector<LayerShape> shape_;  // per attention layer
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
