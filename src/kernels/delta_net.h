// Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks"; Qwen3-Next and
// Qwen3.5's linear-attention layers) for one sequence: the gated delta rule over q, k, v that
// the layer's causal conv1d produced, as an exact recurrence (decode and the default prefill)
// and in the chunked WY / UT form of the published kernels (flash-linear-attention's
// chunk_gated_delta_rule, chunks of 64 tokens), plus the layer's gated output norm.
//
// Per value head j (k head kj = j % Hk in llama.cpp's GGUF layout, j / (Hv/Hk) in the Hugging
// Face checkpoints' grouped one), on the conv's SiLU outputs q_t, k_t [S] and v_t [S]:
//   q = l2norm(q_t) / sqrt(S),  k = l2norm(k_t)           (l2norm(x) = x / sqrt(sum x^2 + eps))
//   beta = sigmoid(b_t),  g = softplus(a_t + dt_bias) * A  (A = -exp(A_log) < 0)
//   S  = e^g S                                           (S: [S_k, S_v], key rows)
//   u  = beta (v - S^T k)                                (the delta: what k should now recall)
//   S  = S + k u^T
//   o  = S^T q
// State layout: [v_heads, S_k, S_v] (a key row's S_v values contiguous), f32.
//
// The recurrence has one fixed chain of roundings per state element and output (ssm.cc's
// Mamba2 recurrence has the same property), so a sequence split anywhere into calls, a
// checkpoint and a restore give the same bits, on every ISA. The chunked form computes the same
// function in another order (its results differ in the last bits and depend on where chunks
// start); it is checked against the recurrence to 1e-5 relative.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/ssm.h"

namespace radixlm::kernels {

struct DeltaNetDims {
  int k_heads = 0, v_heads = 0, head_dim = 0, d_conv = 4;
  bool tiled = true;  // v head j reads k head j % k_heads (GGUF); false: j / (v_heads / k_heads) (HF)
  int64_t key_dim() const { return int64_t{k_heads} * head_dim; }
  int64_t value_dim() const { return int64_t{v_heads} * head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q | k | v channels
  int64_t ssm_state_floats() const { return value_dim() * head_dim; }
  int64_t conv_state_floats() const { return int64_t{d_conv - 1} * conv_dim(); }
  int KeyHead(int v_head) const { return tiled ? v_head % k_heads : v_head / (v_heads / k_heads); }
  // The conv1d (kernels/ssm.h) sees these channels as a Mamba2 mixer's xBC of the same width.
  Mamba2Dims ConvDims() const { return {v_heads, head_dim, head_dim, k_heads, d_conv}; }
};

struct DeltaNetInputs {
  const float* qkv;    // [n_tokens, conv_dim]: q | k | v after the conv and SiLU, row stride ld
  int64_t ld = 0;
  const float* b;      // [n_tokens, v_heads] raw beta projections, row stride ld_ba
  const float* a;      // [n_tokens, v_heads] raw decay projections, same stride
  int64_t ld_ba = 0;
  const float* dt_bias;  // [v_heads]
  const float* A;        // [v_heads], negative
  float eps = 1e-6f;     // of the l2 norms
};

// Value heads [head_begin, head_end) over n_tokens tokens: out [n_tokens, value_dim] (row
// stride ld_out), state in/out. The exact recurrence. Captures take the state after their token.
void GatedDeltaRule(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state, float* out,
                    int64_t ld_out, std::span<const StateCapture> captures, int head_begin, int head_end);
// The chunked WY / UT form (chunks of `chunk` tokens from the first token of the call).
void GatedDeltaRuleChunked(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state, float* out,
                           int64_t ld_out, int chunk, int head_begin, int head_end);
// The oracle: the recurrence written out plainly, scalar.
void GatedDeltaRuleReference(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state,
                             float* out, int64_t ld_out);

// The layer's output norm: y[t, head] = rmsnorm(y[t, head]) * w * silu(z[t, head]) per value
// head (w [head_dim] shared by the heads). y, z: [n_tokens, value_dim], row strides ld_y, ld_z.
void DeltaNetOutputNorm(const DeltaNetDims& d, float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w,
                        int64_t n_tokens, float eps);

}  // namespace radixlm::kernels
