// The work model behind `radixlm bench`'s ceilings: what a prefill computes and what a decode
// token reads, from the model's config and weights. Counted: the linear layers for every
// prompt token (attention projections, MLPs, Mamba2 and Gated DeltaNet projections, a mixture
// of experts' router, its `used` experts and shared expert: only the active experts), the
// lm_head for the last token, and causal attention (scores and weighted values, 4 head_dim
// FLOPs per (query, key) pair per head). Not counted: norms, activations, RoPE and the
// recurrent scans, small next to the matmuls: the figures are lower bounds of the work done,
// so a measured rate over them is never flattered.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "models/model_config.h"
#include "models/transformer.h"

namespace radixlm::models {

struct PrefillFlops {
  double linear = 0, lm_head = 0, attention = 0;
  double total() const { return linear + lm_head + attention; }
};
PrefillFlops PrefillFlopsOf(const ModelConfig& c, int64_t tokens);

// What one decode token reads of the weights: all of them, but one row of an untied embedding
// table and the experts its router does not choose (each layer reads `used` of `experts`).
struct DecodeBytes {
  int64_t weights = 0, embedding = 0, unused_experts = 0;
  int64_t read() const { return weights - embedding - unused_experts; }
};
DecodeBytes DecodeBytesOf(const TransformerWeights& w, const ModelConfig& c);

// The weights whose GEMM rate is the measured GEMM ceiling of a prefill: the first MLP's (or
// mixture of experts', at the rows each expert gets: tokens x used / experts), else the first
// recurrent layer's projections, else the first attention layer's. rows: the GEMM's M.
struct CeilingShapes {
  const kernels::PackedWeight* in = nullptr;   // [n_out, d_model]
  const kernels::PackedWeight* out = nullptr;  // [d_model, n_in]
  int64_t rows = 0;
};
CeilingShapes CeilingShapesOf(const TransformerWeights& w, const ModelConfig& c, int64_t tokens);

}  // namespace radixlm::models
