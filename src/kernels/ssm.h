// Mamba2 (SSD) kernels for one sequence: the causal depthwise conv1d with its rolling state, and
// the selective state-space scan, in a chunked form for prefill and the plain recurrence as the
// oracle (and for decode). Both can hand out the exact state after any requested token — the
// checkpoints a hybrid prefix cache asks for (cache/hybrid_radix_cache.h).
//
// Recurrence (Mamba2, Dao & Gu 2024), per head h with scalar decay, on x [T, H, P],
// B and C [T, G, N] (head h reads group h / (H / G)), dt [T, H]:
//   dt_t  = softplus(dt_raw_t + dt_bias)                  (threshold 20, as PyTorch)
//   S_t   = exp(dt_t * A) * S_{t-1} + dt_t * B_t (x) x_t   (S: [N, P] per head)
//   y_t   = C_t . S_t + D * x_t
// Chunked form (state-space duality): within a chunk of L tokens with cumulative log-decay
// c_t = sum_{k<=t} dt_k A,   y_t = sum_{j<=t} exp(c_t - c_j) dt_j (C_t . B_j) x_j
//                                 + exp(c_t) C_t . S_in + D x_t,
//   S_out = exp(c_L) S_in + sum_j exp(c_L - c_j) dt_j B_j (x) x_j.
// Chunks are aligned to absolute positions (multiples of `chunk`, counted from position 0 of
// the sequence) and additionally split at every requested checkpoint, so a checkpoint is the
// state at a chunk end — exact — and a prefill resumed from it runs the same chunks as the
// uninterrupted prefill did after that point.
//
// State layout (ours, chosen so every inner loop runs along head_dim): ssm state
// [n_heads, d_state, head_dim]; conv state [d_conv - 1, conv_dim], oldest input first.
#pragma once

#include <cstdint>
#include <span>

namespace radixlm::kernels {

struct Mamba2Dims {
  int n_heads = 0, head_dim = 0, d_state = 0, n_groups = 1, d_conv = 4;
  int64_t d_inner() const { return int64_t{n_heads} * head_dim; }
  int64_t conv_dim() const { return d_inner() + 2 * int64_t{n_groups} * d_state; }
  int64_t ssm_state_floats() const { return d_inner() * d_state; }
  int64_t conv_state_floats() const { return int64_t{d_conv - 1} * conv_dim(); }
};

// A place to copy the state to after `after_tokens` tokens of this call (1..n_tokens).
struct StateCapture {
  int32_t after_tokens = 0;
  float* ssm = nullptr;   // [n_heads, d_state, head_dim] or null
  float* conv = nullptr;  // [d_conv - 1, conv_dim] or null
};

// out[t, c] = silu(bias[c] + sum_k w[c, k] * in[t - (d_conv - 1) + k, c]), reading inputs before
// in[0] from conv_state, which is advanced to the last d_conv - 1 inputs. in/out: [n_tokens,
// conv_dim] with row stride `ld_in` / conv_dim; w: [conv_dim, d_conv]; bias may be null.
void CausalConv1dSilu(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in,
                      const float* w, const float* bias, float* conv_state, float* out,
                      std::span<const StateCapture> captures);
// CausalConv1dSilu in two parts, so one call's rows can be spread over threads: rows
// [t_begin, t_end) of `out` (row 0 = in[0]) from the inputs and the untouched conv_state; then,
// once every row is done, AdvanceConvState copies the captures' windows and advances the state.
void CausalConv1dSiluRows(const Mamba2Dims& d, int64_t t_begin, int64_t t_end, const float* in, int64_t ld_in,
                          const float* w, const float* bias, const float* conv_state, float* out);
void AdvanceConvState(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in, float* conv_state,
                      std::span<const StateCapture> captures);
// The same conv without the SiLU (LFM2's short convolution: out = bias + sum_k w_k in_{t-k1+k}).
// Every ISA runs the same multiply-add chain per channel, so the builds agree bitwise and the
// result does not depend on how a sequence's rows are split into calls.
void CausalConv1dRows(const Mamba2Dims& d, int64_t t_begin, int64_t t_end, const float* in, int64_t ld_in,
                      const float* w, const float* bias, const float* conv_state, float* out);
// A depthwise conv over `channels` channels of kernel `d_conv` in Mamba2Dims' terms
// (conv_dim() = channels), for the conv functions above.
inline Mamba2Dims DepthwiseConvDims(int channels, int d_conv) { return {channels, 1, 0, 1, d_conv}; }

struct ScanInputs {
  const float* x;   // [n_tokens, n_heads * head_dim], row stride ld
  const float* B;   // [n_tokens, n_groups * d_state], row stride ld
  const float* C;   // same
  int64_t ld = 0;
  const float* dt;  // [n_tokens, n_heads], row stride ld_dt (raw: before bias and softplus)
  int64_t ld_dt = 0;
  const float* dt_bias;  // [n_heads]
  const float* A;        // [n_heads], negative (= -exp(A_log))
  const float* D;        // [n_heads]
};

// Runs heads [head_begin, head_end) of the scan over n_tokens tokens starting at absolute
// position start_position; y: [n_tokens, n_heads * head_dim] (row stride ld_y); state in/out.
// The chunked form; chunk <= 0 means the exact recurrence (Mamba2ScanRecurrent).
void Mamba2Scan(const Mamba2Dims& d, int64_t n_tokens, int64_t start_position, int chunk,
                const ScanInputs& in, float* state, float* y, int64_t ld_y,
                std::span<const StateCapture> captures, int head_begin, int head_end);
// The recurrence, vectorised, with one fixed chain of roundings per state element and output
// (ssm.cc says which): its results do not depend on how a sequence's tokens are split into
// calls (a prefill in chunks, decode steps, a capture, a restore), bitwise, on every ISA. The
// chunked form is faster on wide machines but its bits depend on where chunks start.
void Mamba2ScanRecurrent(const Mamba2Dims& d, int64_t n_tokens, const ScanInputs& in, float* state, float* y,
                         int64_t ld_y, std::span<const StateCapture> captures, int head_begin, int head_end);
// The oracle: the token-by-token recurrence, scalar.
void Mamba2ScanReference(const Mamba2Dims& d, int64_t n_tokens, const ScanInputs& in, float* state,
                         float* y, int64_t ld_y, std::span<const StateCapture> captures);

// y[t, :] = rmsnorm_groups(y[t, :] * silu(z[t, :])) * w, the norm taken over groups of
// group_size channels. y, z: [n_tokens, d_inner] with row strides ld_y, ld_z.
void GatedRmsNorm(float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w, int64_t n_tokens,
                  int64_t d_inner, int64_t group_size, float eps);

float Softplus(float x);

}  // namespace radixlm::kernels
