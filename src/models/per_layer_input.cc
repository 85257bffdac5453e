// Gemma 4's per-layer inputs (PLE) and block ends, as llama.cpp's gemma4 graph computes them
// (src/models/gemma4.cpp: project_per_layer_inputs, the per-layer embedding after each block's
// MLP, layer_output_scale). Every row on its own: a row's result never depends on the batch.
#include <cmath>

#include "models/for_rows.h"
#include "models/transformer.h"

namespace radixlm::models {

// pl_ [n, L P] = (norm_P(model_proj x / sqrt(d)) * proj_norm + table[id] sqrt(P)) / sqrt(2), x
// the scaled embeddings (x_ right after Embed).
void Transformer::PerLayerInputs(core::ThreadPool& pool, std::span<const int32_t> ids, int64_t n) {
  const PerLayerInputWeights& w = weights_.per_layer;
  const int64_t d = config_.d_model, P = config_.per_layer_input, cols = int64_t{config_.n_blocks} * P;
  Grow(pl_, n * cols);
  Grow(pl_h_, n * cols);
  Gemm(pool, x_.data(), n, d, w.model_proj, pl_.data(), cols);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(d)), table_scale = std::sqrt(static_cast<float>(P));
  const float input_scale = 1.0f / std::sqrt(2.0f);
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = pl_.data() + r * cols;
      float* tok = pl_h_.data() + r * cols;  // scratch: the token's table row
      for (int64_t i = 0; i < cols; ++i) row[i] *= proj_scale;
      kernels::RmsNorm(row, w.proj_norm.data(), row, config_.n_blocks, P, config_.rms_eps);
      kernels::EmbeddingLookup(w.table.data(), w.table_dtype, cols, &ids[r], 1, tok, table_scale);
      for (int64_t i = 0; i < cols; ++i) row[i] = (row[i] + tok[i]) * input_scale;
    }
  });
}

// x += post_norm(proj(gelu_tanh(gate x) * pl_[:, block])); x *= output_scale.
void Transformer::BlockEnd(core::ThreadPool& pool, const BlockEndWeights& w, int block, int64_t n) {
  const int64_t d = config_.d_model, P = config_.per_layer_input, cols = int64_t{config_.n_blocks} * P;
  if (P > 0) {
    Grow(pl_h_, n * 2 * P);
    Grow(act_, n * P);
    Grow(xn_, n * P);
    // pl_h_ rows [gate | input] (GeluTanhMul's layout), the product into act_, proj into xn_.
    Gemm(pool, x_.data(), n, d, w.gate, xn_.data(), P);
    ForRows(pool, n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* h = pl_h_.data() + r * 2 * P;
        std::copy(xn_.data() + r * P, xn_.data() + (r + 1) * P, h);
        std::copy(pl_.data() + r * cols + block * P, pl_.data() + r * cols + (block + 1) * P, h + P);
      }
    });
    // xn_ is read above before any row of it is written below: rows are copied out first.
    ForRows(pool, n, [&](int64_t r0, int64_t r1) {
      kernels::GeluTanhMul(pl_h_.data() + r0 * 2 * P, act_.data() + r0 * P, r1 - r0, P);
    });
    Gemm(pool, act_.data(), n, P, w.proj, xn_.data(), d);
    AddResidual(pool, n, w.post_norm);
  }
  if (w.output_scale != 1.0f) {
    ForRows(pool, n, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * d; i < r1 * d; ++i) x_[i] *= w.output_scale;
    });
  }
}

}  // namespace radixlm::models
