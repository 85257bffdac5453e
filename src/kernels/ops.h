// Position-wise kernels of the transformer forward: RMSNorm, RoPE, SiLU-gated MLP activation,
// embedding lookup, residual add, row gather/scatter. Each has a scalar path (the oracle, and
// the fallback on CPUs without AVX2) and an AVX2 path chosen by core::ActiveIsa().
// All operate on rows independently, so they are batch-invariant by construction.
// Shapes use dimension names: [n_tokens, d_model], [n_tokens, n_heads, head_dim].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"

namespace radixlm::kernels {

// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * w.   x, y: [n_rows, dim] (may alias).
void RmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim, float eps);

enum class RopeLayout { kNeox, kInterleaved };  // NeoX: pairs (i, i + d/2); interleaved: (2i, 2i+1)

// Precomputed rotary frequencies for one model (base theta, optional Llama-3 or YaRN scaling).
struct RopeTable {
  RopeLayout layout = RopeLayout::kNeox;
  int rot_dim = 0;                 // rotated dims per head (<= head_dim)
  std::vector<float> inv_freq;     // [rot_dim / 2]
  float mscale = 1.0f;             // cos and sin are multiplied by it (YaRN's attention factor)
};
struct Llama3RopeScaling {
  float factor = 0, low_freq_factor = 1, high_freq_factor = 4;
  int original_max_position = 8192;
};
// YaRN (gpt-oss), as llama.cpp's rope_yarn and Hugging Face's _compute_yarn_parameters compute
// it: pair i turns at extrap_i (1 - mix_i) / factor + extrap_i mix_i, mix_i = 1 - clamp((i -
// low) / (high - low), 0, 1) between the correction dims of beta_fast and beta_slow (rounded
// out to whole dims when `truncate`: llama.cpp always, Hugging Face unless truncate: false), and
// cos / sin are scaled by mscale = 0.1 ln(factor) + 1.
struct YarnRopeScaling {
  float factor = 0;  // 0 = none
  int original_max_position = 4096;
  float beta_fast = 32, beta_slow = 1;
  bool truncate = true;
};
RopeTable MakeRopeTable(RopeLayout layout, int rot_dim, double theta, const Llama3RopeScaling* llama3 = nullptr,
                        const YarnRopeScaling* yarn = nullptr);

// cos_sin [n_tokens, rot_dim] = interleaved (cos, sin) of positions[t] * inv_freq[i]; computed
// once per forward and shared by every layer and head.
void RopeCosSin(const RopeTable& table, const int32_t* positions, int64_t n_tokens, float* cos_sin);
// Rotates x [n_tokens, n_heads, head_dim] in place.
void ApplyRope(const RopeTable& table, const float* cos_sin, float* x, int64_t n_tokens,
               int n_heads, int head_dim);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, ffn + i]; gate_up: [n_tokens, 2 * ffn].
void SiluMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn);
// GeGLU with the tanh GELU (Gemma): out = gelu_tanh(gate) * up over the same layout, computed
// as gate * sigmoid(2 u), u = sqrt(2/pi) (gate + 0.044715 gate^3) (= 0.5 gate (1 + tanh u)).
void GeluTanhMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn);
// gpt-oss's clamped SwiGLU over the same layout: g = min(gate, 7), u = clamp(up, -7, 7),
// out = g / (1 + exp(-1.702 g)) * (u + 1) (llama.cpp's ggml_swiglu_oai; scalar on every ISA).
void SwigluOaiMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn);

// out[t, :] = table[ids[t], :] (table [vocab, dim] in its storage dtype), times `scale`.
void EmbeddingLookup(const void* table, core::DType dtype, int64_t dim, const int32_t* ids,
                     int64_t n_tokens, float* out, float scale = 1.0f);

// y += x, n elements.
void AddInPlace(float* y, const float* x, int64_t n);

// dst[i, :] = src[index[i], :] for i < n_rows.   (row gather; scatter is the inverse map)
void GatherRows(const float* src, const int32_t* index, int64_t n_rows, int64_t dim, float* dst);
// dst[index[i], :] = src[i, :].
void ScatterRows(const float* src, const int32_t* index, int64_t n_rows, int64_t dim, float* dst);

}  // namespace radixlm::kernels
