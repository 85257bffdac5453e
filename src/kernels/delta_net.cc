#include "kernels/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#if RADIXLM_X86
#include <immintrin.h>
#endif
#if RADIXLM_ARM
#include <arm_neon.h>
#endif
#include "core/status.h"

namespace radixlm::kernels {
namespace {

// A token's inputs for one value head, prepared once per call: l2-normalised q (scaled) and k,
// v, beta and the decay.
// From this many tokens on, a state block is worked on as a contiguous tile (see GatedDeltaRule).
constexpr int64_t kTileMinTokens = 2;

struct HeadToken {
  const float* qn;
  const float* kn;
  const float* v;
  float beta, decay;
};

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// x / sqrt(sum x^2 + eps) (times `scale`), summed in order: the same bits on every ISA.
inline void L2Normalise(const float* x, int n, float eps, float scale, float* out) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss = std::fma(x[i], x[i], ss);
  const float inv = 1.0f / std::sqrt(ss + eps);
  for (int i = 0; i < n; ++i) out[i] = (x[i] * inv) * scale;
}

// Every token of value head j: normalised q and k into qn, kn [n_tokens, S].
void PrepareHead(const DeltaNetDims& d, const DeltaNetInputs& in, int64_t n_tokens, int j, std::vector<float>& qn,
                 std::vector<float>& kn, std::vector<HeadToken>& tokens) {
  const int S = d.head_dim, kj = d.KeyHead(j);
  qn.resize(n_tokens * S);
  kn.resize(n_tokens * S);
  tokens.resize(n_tokens);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = in.qkv + t * in.ld;
    L2Normalise(row + int64_t{kj} * S, S, in.eps, scale, &qn[t * S]);
    L2Normalise(row + d.key_dim() + int64_t{kj} * S, S, in.eps, 1.0f, &kn[t * S]);
    const float b = in.b[t * in.ld_ba + j], a = in.a[t * in.ld_ba + j];
    const float g = Softplus(a + in.dt_bias[j]) * in.A[j];
    tokens[t] = {&qn[t * S], &kn[t * S], row + 2 * d.key_dim() + int64_t{j} * S, Sigmoid(b), std::exp(g)};
  }
}

// Columns [c0, c1) of one token's update of head state St [S, S] (scalar; the oracle of the
// vector paths and their tail):
//   pass 1: St[i][c] *= decay, kS[c] += kn[i] St[i][c]        (i = 0 .. S-1)
//           u[c] = beta (v[c] - kS[c])
//   pass 2: St[i][c] += kn[i] u[c],  o[c] += qn[i] St[i][c]
// Each column is one chain of roundings, whatever columns are computed with it.
inline void ColumnsScalar(int S, int64_t ld, const HeadToken& h, int c0, int c1, float* St, float* o) {
  for (int c = c0; c < c1; ++c) {
    float ks = 0.0f;
    for (int i = 0; i < S; ++i) {
      float& s = St[int64_t{i} * ld + c];
      s = s * h.decay;
      ks = std::fma(h.kn[i], s, ks);
    }
    const float u = h.beta * (h.v[c] - ks);
    float acc = 0.0f;
    for (int i = 0; i < S; ++i) {
      float& s = St[int64_t{i} * ld + c];
      s = std::fma(h.kn[i], u, s);
      acc = std::fma(h.qn[i], s, acc);
    }
    o[c] = acc;
  }
}

#if RADIXLM_X86
// K vectors of 8 columns: the same chains, 8K columns at a time. Pass 1 does not store the
// decayed state; pass 2 recomputes it (the same product) before adding k u^T: half the stores.
template <int K>
__attribute__((target("avx2,fma"), always_inline)) inline void ColumnsAvx2(int S, int64_t ld, const HeadToken& h, int c0, float* St,
                                                                          float* o) {
  const __m256 decay = _mm256_set1_ps(h.decay), beta = _mm256_set1_ps(h.beta);
  __m256 ks[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) ks[k] = _mm256_setzero_ps();
  for (int i = 0; i < S; ++i) {
    float* row = St + int64_t{i} * ld + c0;
    const __m256 kn = _mm256_set1_ps(h.kn[i]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + 8 * k), decay);
      ks[k] = _mm256_fmadd_ps(kn, s, ks[k]);
    }
  }
  __m256 u[K], acc[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    u[k] = _mm256_mul_ps(beta, _mm256_sub_ps(_mm256_loadu_ps(h.v + c0 + 8 * k), ks[k]));
    acc[k] = _mm256_setzero_ps();
  }
  for (int i = 0; i < S; ++i) {
    float* row = St + int64_t{i} * ld + c0;
    const __m256 kn = _mm256_set1_ps(h.kn[i]), qn = _mm256_set1_ps(h.qn[i]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m256 s = _mm256_fmadd_ps(kn, u[k], _mm256_mul_ps(_mm256_loadu_ps(row + 8 * k), decay));
      _mm256_storeu_ps(row + 8 * k, s);
      acc[k] = _mm256_fmadd_ps(qn, s, acc[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(o + c0 + 8 * k, acc[k]);
}

template <int K>
__attribute__((target("avx512f,fma"), always_inline)) inline void ColumnsAvx512(int S, int64_t ld, const HeadToken& h, int c0,
                                                                              float* St, float* o) {
  const __m512 decay = _mm512_set1_ps(h.decay), beta = _mm512_set1_ps(h.beta);
  __m512 ks[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) ks[k] = _mm512_setzero_ps();
  for (int i = 0; i < S; ++i) {
    float* row = St + int64_t{i} * ld + c0;
    const __m512 kn = _mm512_set1_ps(h.kn[i]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * k), decay);
      ks[k] = _mm512_fmadd_ps(kn, s, ks[k]);
    }
  }
  __m512 u[K], acc[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    u[k] = _mm512_mul_ps(beta, _mm512_sub_ps(_mm512_loadu_ps(h.v + c0 + 16 * k), ks[k]));
    acc[k] = _mm512_setzero_ps();
  }
  for (int i = 0; i < S; ++i) {
    float* row = St + int64_t{i} * ld + c0;
    const __m512 kn = _mm512_set1_ps(h.kn[i]), qn = _mm512_set1_ps(h.qn[i]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m512 s = _mm512_fmadd_ps(kn, u[k], _mm512_mul_ps(_mm512_loadu_ps(row + 16 * k), decay));
      _mm512_storeu_ps(row + 16 * k, s);
      acc[k] = _mm512_fmadd_ps(qn, s, acc[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(o + c0 + 16 * k, acc[k]);
}

// Columns [c0, c1) (at most one block: 32 on AVX2, 64 on AVX-512) of one token, on a state
// whose rows are ld floats apart.
__attribute__((target("avx2,fma"))) void BlockAvx2(int S, int64_t ld, const HeadToken& h, int c0, int c1, float* St,
                                                   float* o) {
  int c = c0;
  if (c1 - c == 32) {
    ColumnsAvx2<4>(S, ld, h, c, St, o);
    return;
  }
  for (; c + 8 <= c1; c += 8) ColumnsAvx2<1>(S, ld, h, c, St, o);
  ColumnsScalar(S, ld, h, c, c1, St, o);
}

__attribute__((target("avx512f,fma"))) void BlockAvx512(int S, int64_t ld, const HeadToken& h, int c0, int c1,
                                                        float* St, float* o) {
  int c = c0;
  if (c1 - c == 64) {
    ColumnsAvx512<4>(S, ld, h, c, St, o);
    return;
  }
  for (; c + 16 <= c1; c += 16) ColumnsAvx512<1>(S, ld, h, c, St, o);
  ColumnsScalar(S, ld, h, c, c1, St, o);
}
#endif

#if RADIXLM_ARM
// ColumnsAvx2's chains on K vectors of 4 columns (NEON, every ARMv8-A CPU).
template <int K>
[[gnu::always_inline]] inline void ColumnsNeon(int S, int64_t ld, const HeadToken& h, int c0, float* St, float* o) {
  const float32x4_t decay = vdupq_n_f32(h.decay), beta = vdupq_n_f32(h.beta);
  float32x4_t ks[K];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) ks[k] = vdupq_n_f32(0.0f);
  for (int i = 0; i < S; ++i) {
    const float* row = St + int64_t{i} * ld + c0;
    const float32x4_t kn = vdupq_n_f32(h.kn[i]);
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) ks[k] = vfmaq_f32(ks[k], kn, vmulq_f32(vld1q_f32(row + 4 * k), decay));
  }
  float32x4_t u[K], acc[K];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    u[k] = vmulq_f32(beta, vsubq_f32(vld1q_f32(h.v + c0 + 4 * k), ks[k]));
    acc[k] = vdupq_n_f32(0.0f);
  }
  for (int i = 0; i < S; ++i) {
    float* row = St + int64_t{i} * ld + c0;
    const float32x4_t kn = vdupq_n_f32(h.kn[i]), qn = vdupq_n_f32(h.qn[i]);
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const float32x4_t s = vfmaq_f32(vmulq_f32(vld1q_f32(row + 4 * k), decay), kn, u[k]);
      vst1q_f32(row + 4 * k, s);
      acc[k] = vfmaq_f32(acc[k], qn, s);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) vst1q_f32(o + c0 + 4 * k, acc[k]);
}

void BlockNeon(int S, int64_t ld, const HeadToken& h, int c0, int c1, float* St, float* o) {
  int c = c0;
  if (c1 - c == 32) {
    ColumnsNeon<8>(S, ld, h, c, St, o);
    return;
  }
  for (; c + 4 <= c1; c += 4) ColumnsNeon<1>(S, ld, h, c, St, o);
  ColumnsScalar(S, ld, h, c, c1, St, o);
}
#endif

void Block(core::Isa isa, int S, int64_t ld, const HeadToken& h, int c0, int c1, float* St, float* o) {
#if RADIXLM_X86
  if (core::AtLeast(isa, core::Isa::kAvx512)) return BlockAvx512(S, ld, h, c0, c1, St, o);
  if (core::AtLeast(isa, core::Isa::kAvx2)) return BlockAvx2(S, ld, h, c0, c1, St, o);
#endif
#if RADIXLM_ARM
  if (core::AtLeast(isa, core::Isa::kNeon)) return BlockNeon(S, ld, h, c0, c1, St, o);
#endif
  ColumnsScalar(S, ld, h, c0, c1, St, o);
}

// Rows [0, S) x columns [c0, c0 + w) between a [S, ld_a] and a [S, ld_b] matrix.
void CopyColumns(int S, int w, const float* a, int64_t ld_a, float* b, int64_t ld_b) {
  for (int i = 0; i < S; ++i) std::memcpy(b + int64_t{i} * ld_b, a + int64_t{i} * ld_a, w * sizeof(float));
}

}  // namespace

// Head by head, and within a head column block by column block (32 columns on AVX2 and NEON, 64
// on AVX-512), token by token. Over several tokens a block is copied out to a contiguous [S, w]
// tile first (16 KB at S = 128 on AVX2): in place its rows are 4S bytes apart and alias a few
// L1 sets, so it would not stay in L1 from one token to the next. Columns are independent
// chains: neither the order nor the copy changes a bit.
void GatedDeltaRule(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state, float* out,
                    int64_t ld_out, std::span<const StateCapture> captures, int head_begin, int head_end) {
  if (n_tokens <= 0 || head_begin >= head_end) return;
  RADIXLM_CHECK(d.k_heads > 0 && d.v_heads % d.k_heads == 0);
  const int S = d.head_dim;
  const core::Isa isa = core::ActiveIsa();
  const bool simd32 = core::AtLeast(isa, core::Isa::kAvx2) || core::AtLeast(isa, core::Isa::kNeon);
  const int width = core::AtLeast(isa, core::Isa::kAvx512) ? 64 : simd32 ? 32 : S;
  const bool tiled = n_tokens >= kTileMinTokens;
  thread_local std::vector<float> qn, kn, tile;
  thread_local std::vector<HeadToken> tokens;
  const int64_t per_head = int64_t{S} * S;
  for (int j = head_begin; j < head_end; ++j) {
    PrepareHead(d, in, n_tokens, j, qn, kn, tokens);
    float* St = state + j * per_head;
    for (int c0 = 0; c0 < S; c0 += width) {
      const int w = std::min(S - c0, width);
      // Where the block lives while the tokens run: the tile, or the state itself.
      float* blk = St + c0;
      int64_t ld = S;
      if (tiled) {
        tile.resize(int64_t{S} * w);
        CopyColumns(S, w, St + c0, S, tile.data(), w);
        blk = tile.data();
        ld = w;
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        HeadToken h = tokens[t];
        h.v += c0;
        Block(isa, S, ld, h, 0, w, blk, out + t * ld_out + int64_t{j} * S + c0);
        for (const StateCapture& c : captures)
          if (c.after_tokens == t + 1 && c.ssm) CopyColumns(S, w, blk, ld, c.ssm + j * per_head + c0, S);
      }
      if (tiled) CopyColumns(S, w, blk, ld, St + c0, S);
    }
  }
}

void GatedDeltaRuleReference(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state, float* out,
                             int64_t ld_out) {
  const int S = d.head_dim;
  std::vector<float> q(S), k(S), kS(S);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = in.qkv + t * in.ld;
    for (int j = 0; j < d.v_heads; ++j) {
      const int kj = d.KeyHead(j);
      double qq = 0, kk = 0;
      for (int i = 0; i < S; ++i) {
        qq += double(row[kj * S + i]) * row[kj * S + i];
        kk += double(row[d.key_dim() + kj * S + i]) * row[d.key_dim() + kj * S + i];
      }
      for (int i = 0; i < S; ++i) {
        q[i] = static_cast<float>(row[kj * S + i] / std::sqrt(qq + in.eps) / std::sqrt(double(S)));
        k[i] = static_cast<float>(row[d.key_dim() + kj * S + i] / std::sqrt(kk + in.eps));
      }
      const float* v = row + 2 * d.key_dim() + int64_t{j} * S;
      const float beta = 1.0f / (1.0f + std::exp(-in.b[t * in.ld_ba + j]));
      const float decay = std::exp(Softplus(in.a[t * in.ld_ba + j] + in.dt_bias[j]) * in.A[j]);
      float* St = state + int64_t{j} * S * S;
      for (int64_t e = 0; e < int64_t{S} * S; ++e) St[e] *= decay;
      for (int c = 0; c < S; ++c) {
        double acc = 0;
        for (int i = 0; i < S; ++i) acc += double(k[i]) * St[i * S + c];
        kS[c] = static_cast<float>(acc);
      }
      for (int i = 0; i < S; ++i)
        for (int c = 0; c < S; ++c) St[i * S + c] += k[i] * (beta * (v[c] - kS[c]));
      for (int c = 0; c < S; ++c) {
        double acc = 0;
        for (int i = 0; i < S; ++i) acc += double(q[i]) * St[i * S + c];
        out[t * ld_out + int64_t{j} * S + c] = static_cast<float>(acc);
      }
    }
  }
}

// The chunked form (the WY representation of a chunk's product of Householder-like updates, with
// the UT transform's forward substitution), as flash-linear-attention's chunk_gated_delta_rule
// and Hugging Face's torch_chunk_gated_delta_rule compute it, per head and chunk of L tokens:
//   G_t = sum_{s <= t} g_s;  Dm[i][j] = e^{G_i - G_j} (j <= i)
//   A = -(diag(beta) K K^T o Dm) strictly below the diagonal; T = (I - A)^-1 by forward
//   substitution (row i: T[i][:i] = A[i][:i] + A[i][:i] T[:i][:i])
//   U = T diag(beta) V;  W = T diag(beta e^G) K
//   V' = U - W S;  O = (Q o e^G) S + (Q K^T o Dm, j <= i) V'
//   S <- e^{G_L} S + (K o e^{G_L - G})^T V'
void GatedDeltaRuleChunked(const DeltaNetDims& d, int64_t n_tokens, const DeltaNetInputs& in, float* state, float* out,
                           int64_t ld_out, int chunk, int head_begin, int head_end) {
  RADIXLM_CHECK(chunk > 0);
  const int S = d.head_dim;
  std::vector<float> Q, K, V, beta, G, A, U, W, Vn, Sv;
  for (int j = head_begin; j < head_end; ++j) {
    float* St = state + int64_t{j} * S * S;
    const int kj = d.KeyHead(j);
    for (int64_t c0 = 0; c0 < n_tokens; c0 += chunk) {
      const int L = static_cast<int>(std::min<int64_t>(chunk, n_tokens - c0));
      Q.assign(int64_t{L} * S, 0);
      K.assign(int64_t{L} * S, 0);
      V.assign(int64_t{L} * S, 0);
      beta.assign(L, 0);
      G.assign(L, 0);
      float cum = 0;
      for (int t = 0; t < L; ++t) {
        const float* row = in.qkv + (c0 + t) * in.ld;
        L2Normalise(row + int64_t{kj} * S, S, in.eps, 1.0f / std::sqrt(static_cast<float>(S)), &Q[int64_t{t} * S]);
        L2Normalise(row + d.key_dim() + int64_t{kj} * S, S, in.eps, 1.0f, &K[int64_t{t} * S]);
        std::memcpy(&V[int64_t{t} * S], row + 2 * d.key_dim() + int64_t{j} * S, S * sizeof(float));
        beta[t] = Sigmoid(in.b[(c0 + t) * in.ld_ba + j]);
        cum += Softplus(in.a[(c0 + t) * in.ld_ba + j] + in.dt_bias[j]) * in.A[j];
        G[t] = cum;
      }
      // A (strictly lower) then T by forward substitution, in place.
      A.assign(int64_t{L} * L, 0);
      for (int r = 0; r < L; ++r)
        for (int c = 0; c < r; ++c) {
          float dot = 0;
          for (int i = 0; i < S; ++i) dot += K[int64_t{r} * S + i] * K[int64_t{c} * S + i];
          A[int64_t{r} * L + c] = -beta[r] * dot * std::exp(G[r] - G[c]);
        }
      for (int r = 1; r < L; ++r)
        for (int c = 0; c < r; ++c) {
          float add = 0;
          for (int m = c + 1; m < r; ++m) add += A[int64_t{r} * L + m] * A[int64_t{m} * L + c];
          A[int64_t{r} * L + c] += add;
        }
      for (int r = 0; r < L; ++r) A[int64_t{r} * L + r] = 1.0f;  // T = A + I
      // U = T diag(beta) V, W = T diag(beta e^G) K.
      U.assign(int64_t{L} * S, 0);
      W.assign(int64_t{L} * S, 0);
      for (int r = 0; r < L; ++r)
        for (int m = 0; m <= r; ++m) {
          const float tu = A[int64_t{r} * L + m] * beta[m], tw = tu * std::exp(G[m]);
          for (int i = 0; i < S; ++i) {
            U[int64_t{r} * S + i] += tu * V[int64_t{m} * S + i];
            W[int64_t{r} * S + i] += tw * K[int64_t{m} * S + i];
          }
        }
      // V' = U - W S.
      Vn = U;
      for (int r = 0; r < L; ++r)
        for (int i = 0; i < S; ++i) {
          const float w = W[int64_t{r} * S + i];
          for (int c = 0; c < S; ++c) Vn[int64_t{r} * S + c] -= w * St[int64_t{i} * S + c];
        }
      // O = (Q o e^G) S + (Q K^T o Dm) V'.
      for (int r = 0; r < L; ++r) {
        float* o = out + (c0 + r) * ld_out + int64_t{j} * S;
        std::fill(o, o + S, 0.0f);
        const float eg = std::exp(G[r]);
        for (int i = 0; i < S; ++i) {
          const float qi = Q[int64_t{r} * S + i] * eg;
          for (int c = 0; c < S; ++c) o[c] += qi * St[int64_t{i} * S + c];
        }
        for (int m = 0; m <= r; ++m) {
          float dot = 0;
          for (int i = 0; i < S; ++i) dot += Q[int64_t{r} * S + i] * K[int64_t{m} * S + i];
          const float w = dot * std::exp(G[r] - G[m]);
          for (int c = 0; c < S; ++c) o[c] += w * Vn[int64_t{m} * S + c];
        }
      }
      // S <- e^{G_L} S + (K o e^{G_L - G})^T V'.
      const float gl = G[L - 1];
      for (int64_t e = 0; e < int64_t{S} * S; ++e) St[e] *= std::exp(gl);
      for (int m = 0; m < L; ++m) {
        const float dec = std::exp(gl - G[m]);
        for (int i = 0; i < S; ++i) {
          const float ki = K[int64_t{m} * S + i] * dec;
          for (int c = 0; c < S; ++c) St[int64_t{i} * S + c] += ki * Vn[int64_t{m} * S + c];
        }
      }
    }
  }
}

void DeltaNetOutputNorm(const DeltaNetDims& d, float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w,
                        int64_t n_tokens, float eps) {
  const int S = d.head_dim;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int j = 0; j < d.v_heads; ++j) {
      float* yh = y + t * ld_y + int64_t{j} * S;
      const float* zh = z + t * ld_z + int64_t{j} * S;
      float ss = 0.0f;
      for (int i = 0; i < S; ++i) ss = std::fma(yh[i], yh[i], ss);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(S) + eps);
      for (int i = 0; i < S; ++i) {
        const float silu = zh[i] / (1.0f + std::exp(-zh[i]));
        yh[i] = ((yh[i] * inv) * w[i]) * silu;
      }
    }
}

}  // namespace radixlm::kernels
