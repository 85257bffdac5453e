#include "kernels/ssm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/status.h"

namespace radixlm::kernels {

float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

namespace {

inline float Silu(float v) { return v / (1.0f + std::exp(-v)); }

// The state after `after` tokens of this call: the last d_conv - 1 inputs before that point.
void ConvStateAt(const Mamba2Dims& d, int64_t after, const float* in, int64_t ld_in,
                 const float* old_state, float* dst) {
  const int64_t cd = d.conv_dim();
  const int k1 = d.d_conv - 1;
  for (int r = 0; r < k1; ++r) {
    const int64_t t = after - k1 + r;  // input index, negative = from the old state
    const float* src = t >= 0 ? in + t * ld_in : old_state + (k1 + t) * cd;
    std::memcpy(dst + r * cd, src, cd * sizeof(float));
  }
}

// Inner loops run along the contiguous channel / head_dim axis with no reductions across it,
// so the compiler vectorises them without reordering any sum: the AVX2 build and the baseline
// build compute bitwise-identical results.
template <bool kUnused>
inline void ConvBody(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in,
                     const float* w, const float* bias, const float* conv_state, float* out) {
  const int64_t cd = d.conv_dim();
  const int k1 = d.d_conv - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * cd;
    if (bias) {
      for (int64_t c = 0; c < cd; ++c) o[c] = bias[c];
    } else {
      for (int64_t c = 0; c < cd; ++c) o[c] = 0.0f;
    }
    for (int k = 0; k <= k1; ++k) {
      const int64_t src_t = t - k1 + k;
      const float* src = src_t >= 0 ? in + src_t * ld_in : conv_state + (k1 + src_t) * cd;
      const float* wk = w + k * cd;
      for (int64_t c = 0; c < cd; ++c) o[c] += wk[c] * src[c];
    }
    for (int64_t c = 0; c < cd; ++c) o[c] = Silu(o[c]);
  }
}

__attribute__((target("avx2,fma"), flatten)) void ConvAvx2(const Mamba2Dims& d, int64_t n, const float* in,
                                                           int64_t ld, const float* w, const float* b,
                                                           const float* s, float* o) {
  ConvBody<true>(d, n, in, ld, w, b, s, o);
}
void ConvScalar(const Mamba2Dims& d, int64_t n, const float* in, int64_t ld, const float* w, const float* b,
                const float* s, float* o) {
  ConvBody<false>(d, n, in, ld, w, b, s, o);
}

struct ChunkScratch {
  std::vector<float> dt, cs, G, Bt;
};

// One chunk [s, s + L) for heads [h0, h1) of one group.
template <bool kUnused>
inline void ScanChunkBody(const Mamba2Dims& d, int64_t s, int64_t L, const ScanInputs& in, int g, int h0, int h1,
                          float* state, float* y, int64_t ld_y, ChunkScratch& sc) {
  const int N = d.d_state, P = d.head_dim;
  const int64_t bc_off = int64_t{g} * N;
  // G[t, j] = C_t . B_j for j <= t, through B transposed so the inner loop runs along j.
  sc.Bt.assign(size_t(N) * L, 0.0f);
  for (int64_t j = 0; j < L; ++j) {
    const float* b = in.B + (s + j) * in.ld + bc_off;
    for (int n = 0; n < N; ++n) sc.Bt[size_t(n) * L + j] = b[n];
  }
  sc.G.assign(size_t(L) * L, 0.0f);
  for (int64_t t = 0; t < L; ++t) {
    const float* c = in.C + (s + t) * in.ld + bc_off;
    float* gt = sc.G.data() + t * L;
    for (int n = 0; n < N; ++n) {
      const float cn = c[n];
      const float* bt = sc.Bt.data() + size_t(n) * L;
      for (int64_t j = 0; j <= t; ++j) gt[j] += cn * bt[j];
    }
  }
  sc.dt.resize(L);
  sc.cs.resize(L);
  for (int h = h0; h < h1; ++h) {
    const float A = in.A[h], Dh = in.D[h];
    float acc = 0.0f;
    for (int64_t j = 0; j < L; ++j) {
      sc.dt[j] = Softplus(in.dt[(s + j) * in.ld_dt + h] + in.dt_bias[h]);
      acc += sc.dt[j] * A;
      sc.cs[j] = acc;
    }
    float* S = state + int64_t{h} * N * P;  // [N, P]
    for (int64_t t = 0; t < L; ++t) {
      float* yt = y + (s + t) * ld_y + int64_t{h} * P;
      const float* xt = in.x + (s + t) * in.ld + int64_t{h} * P;
      const float* c = in.C + (s + t) * in.ld + bc_off;
      const float decay_t = std::exp(sc.cs[t]);
      for (int p = 0; p < P; ++p) yt[p] = Dh * xt[p];
      for (int n = 0; n < N; ++n) {  // the state carried into the chunk
        const float coef = c[n] * decay_t;
        const float* Sn = S + int64_t{n} * P;
        for (int p = 0; p < P; ++p) yt[p] += coef * Sn[p];
      }
      const float* gt = sc.G.data() + t * L;
      for (int64_t j = 0; j <= t; ++j) {  // the chunk's own tokens
        const float m = gt[j] * std::exp(sc.cs[t] - sc.cs[j]) * sc.dt[j];
        const float* xj = in.x + (s + j) * in.ld + int64_t{h} * P;
        for (int p = 0; p < P; ++p) yt[p] += m * xj[p];
      }
    }
    const float decay_end = std::exp(sc.cs[L - 1]);
    for (int64_t i = 0; i < int64_t{N} * P; ++i) S[i] *= decay_end;
    for (int64_t j = 0; j < L; ++j) {
      const float wj = std::exp(sc.cs[L - 1] - sc.cs[j]) * sc.dt[j];
      const float* b = in.B + (s + j) * in.ld + bc_off;
      const float* xj = in.x + (s + j) * in.ld + int64_t{h} * P;
      for (int n = 0; n < N; ++n) {
        const float coef = wj * b[n];
        float* Sn = S + int64_t{n} * P;
        for (int p = 0; p < P; ++p) Sn[p] += coef * xj[p];
      }
    }
  }
}

__attribute__((target("avx2,fma"), flatten)) void ScanChunkAvx2(const Mamba2Dims& d, int64_t s, int64_t L,
                                                                const ScanInputs& in, int g, int h0, int h1,
                                                                float* state, float* y, int64_t ld_y,
                                                                ChunkScratch& sc) {
  ScanChunkBody<true>(d, s, L, in, g, h0, h1, state, y, ld_y, sc);
}
void ScanChunkScalar(const Mamba2Dims& d, int64_t s, int64_t L, const ScanInputs& in, int g, int h0, int h1,
                     float* state, float* y, int64_t ld_y, ChunkScratch& sc) {
  ScanChunkBody<false>(d, s, L, in, g, h0, h1, state, y, ld_y, sc);
}

void CaptureHeads(const Mamba2Dims& d, const float* state, float* dst, int h0, int h1) {
  const int64_t per_head = int64_t{d.d_state} * d.head_dim;
  std::memcpy(dst + h0 * per_head, state + h0 * per_head, (h1 - h0) * per_head * sizeof(float));
}

}  // namespace

void CausalConv1dSilu(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in, const float* w,
                      const float* bias, float* conv_state, float* out, std::span<const StateCapture> captures) {
  if (n_tokens <= 0) return;
  for (const StateCapture& c : captures)
    if (c.conv) ConvStateAt(d, c.after_tokens, in, ld_in, conv_state, c.conv);
  if (core::ActiveIsa() >= core::Isa::kAvx2) {
    ConvAvx2(d, n_tokens, in, ld_in, w, bias, conv_state, out);
  } else {
    ConvScalar(d, n_tokens, in, ld_in, w, bias, conv_state, out);
  }
  std::vector<float> next(d.conv_state_floats());
  ConvStateAt(d, n_tokens, in, ld_in, conv_state, next.data());
  std::memcpy(conv_state, next.data(), next.size() * sizeof(float));
}

void Mamba2Scan(const Mamba2Dims& d, int64_t n_tokens, int64_t start_position, int chunk, const ScanInputs& in,
                float* state, float* y, int64_t ld_y, std::span<const StateCapture> captures, int head_begin,
                int head_end) {
  if (n_tokens <= 0 || head_begin >= head_end) return;
  RADIXLM_CHECK(d.n_heads % d.n_groups == 0);
  const int heads_per_group = d.n_heads / d.n_groups;
  const bool avx2 = core::ActiveIsa() >= core::Isa::kAvx2;
  thread_local ChunkScratch scratch;
  int64_t s = 0;
  while (s < n_tokens) {
    // Next boundary: the absolute chunk grid or the nearest requested checkpoint.
    int64_t e = n_tokens;
    if (chunk > 0) {
      const int64_t abs = start_position + s;
      e = std::min(e, (abs / chunk + 1) * chunk - start_position);
    } else {
      e = s + 1;
    }
    for (const StateCapture& c : captures)
      if (c.after_tokens > s && c.after_tokens < e) e = c.after_tokens;
    for (int g = head_begin / heads_per_group; g * heads_per_group < head_end; ++g) {
      const int h0 = std::max(head_begin, g * heads_per_group);
      const int h1 = std::min(head_end, (g + 1) * heads_per_group);
      if (avx2) {
        ScanChunkAvx2(d, s, e - s, in, g, h0, h1, state, y, ld_y, scratch);
      } else {
        ScanChunkScalar(d, s, e - s, in, g, h0, h1, state, y, ld_y, scratch);
      }
    }
    for (const StateCapture& c : captures)
      if (c.after_tokens == e && c.ssm) CaptureHeads(d, state, c.ssm, head_begin, head_end);
    s = e;
  }
}

void Mamba2ScanReference(const Mamba2Dims& d, int64_t n_tokens, const ScanInputs& in, float* state, float* y,
                         int64_t ld_y, std::span<const StateCapture> captures) {
  const int N = d.d_state, P = d.head_dim, hpg = d.n_heads / d.n_groups;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < d.n_heads; ++h) {
      const int64_t g = h / hpg;
      const float dt = Softplus(in.dt[t * in.ld_dt + h] + in.dt_bias[h]);
      const float decay = std::exp(dt * in.A[h]);
      const float* x = in.x + t * in.ld + int64_t{h} * P;
      const float* b = in.B + t * in.ld + g * N;
      const float* c = in.C + t * in.ld + g * N;
      float* S = state + int64_t{h} * N * P;
      float* yt = y + t * ld_y + int64_t{h} * P;
      for (int p = 0; p < P; ++p) {
        float acc = 0.0f;
        for (int n = 0; n < N; ++n) {
          float& s = S[int64_t{n} * P + p];
          s = decay * s + dt * b[n] * x[p];
          acc += c[n] * s;
        }
        yt[p] = acc + in.D[h] * x[p];
      }
    }
    for (const StateCapture& c : captures)
      if (c.after_tokens == t + 1 && c.ssm) std::memcpy(c.ssm, state, d.ssm_state_floats() * sizeof(float));
  }
}

void GatedRmsNorm(float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w, int64_t n_tokens,
                  int64_t d_inner, int64_t group_size, float eps) {
  RADIXLM_CHECK(group_size > 0 && d_inner % group_size == 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* yt = y + t * ld_y;
    const float* zt = z + t * ld_z;
    for (int64_t i = 0; i < d_inner; ++i) yt[i] *= Silu(zt[i]);
    for (int64_t g0 = 0; g0 < d_inner; g0 += group_size) {
      double ss = 0;
      for (int64_t i = g0; i < g0 + group_size; ++i) ss += double(yt[i]) * yt[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / group_size) + eps);
      for (int64_t i = g0; i < g0 + group_size; ++i) yt[i] = yt[i] * inv * w[i];
    }
  }
}

}  // namespace radixlm::kernels
