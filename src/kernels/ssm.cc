#include "kernels/ssm.h"

#include <algorithm>
#include <bit>
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

#include "core/cpu_features.h"
#include "core/fast_exp.h"
#include "core/status.h"

namespace radixlm::kernels {

float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

namespace {

// SiLU with the vectorisable exp: the conv and the gated norm apply it to every channel.
inline float Silu(float v) { return v / (1.0f + core::ExpVec(-v)); }

// core::ExpVec on 8 lanes: its operations in its order (this file is built without FMA
// contraction), so each lane is bitwise the scalar result, the clamps included. Under AVX2 GCC
// does not vectorise the scalar form, and the SiLU loops ran one element and one divide at a
// time (under AVX-512 it does, on zmm).
#if RADIXLM_X86
__attribute__((target("avx2,fma"))) inline __m256 ExpVec8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365478515625f), hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_blendv_ps(x, lo, underflow);
  x = _mm256_blendv_ps(x, hi, _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  const __m256 big = _mm256_set1_ps(12582912.0f);
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), big), big);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

__attribute__((target("avx2,fma"))) inline __m256 Silu8(__m256 v) {
  const __m256 neg = _mm256_xor_ps(v, _mm256_set1_ps(-0.0f));
  return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), ExpVec8(neg)));
}
#endif

// The SiLU loops of the conv (o = silu(o)) and the gated norm (y *= silu(z)), per ISA.
struct SiluScalar {
  static void Row(float* o, int64_t n) {
    for (int64_t c = 0; c < n; ++c) o[c] = Silu(o[c]);
  }
  static void MulRow(float* y, const float* z, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= Silu(z[i]);
  }
};
#if RADIXLM_X86
struct SiluAvx2 {
  __attribute__((target("avx2,fma"))) static void Row(float* o, int64_t n) {
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) _mm256_storeu_ps(o + c, Silu8(_mm256_loadu_ps(o + c)));
    SiluScalar::Row(o + c, n - c);
  }
  __attribute__((target("avx2,fma"))) static void MulRow(float* y, const float* z, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), Silu8(_mm256_loadu_ps(z + i))));
    SiluScalar::MulRow(y + i, z + i, n - i);
  }
};
#endif

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
template <class SiluRows>
inline void ConvBody(const Mamba2Dims& d, int64_t t_begin, int64_t t_end, const float* in, int64_t ld_in,
                     const float* w, const float* bias, const float* conv_state, float* out) {
  const int64_t cd = d.conv_dim();
  const int k1 = d.d_conv - 1;
  for (int64_t t = t_begin; t < t_end; ++t) {
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
    SiluRows::Row(o, cd);
  }
}

struct NoActivation {
  static void Row(float*, int64_t) {}
};

#if RADIXLM_X86
__attribute__((target("avx2,fma"), flatten)) void ConvLinearAvx2(const Mamba2Dims& d, int64_t t0, int64_t t1,
                                                                 const float* in, int64_t ld, const float* w,
                                                                 const float* b, const float* s, float* o) {
  ConvBody<NoActivation>(d, t0, t1, in, ld, w, b, s, o);
}
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"), flatten)) void ConvLinearAvx512(
    const Mamba2Dims& d, int64_t t0, int64_t t1, const float* in, int64_t ld, const float* w, const float* b,
    const float* s, float* o) {
  ConvBody<NoActivation>(d, t0, t1, in, ld, w, b, s, o);
}

__attribute__((target("avx2,fma"), flatten)) void ConvAvx2(const Mamba2Dims& d, int64_t t0, int64_t t1,
                                                           const float* in, int64_t ld, const float* w,
                                                           const float* b, const float* s, float* o) {
  ConvBody<SiluAvx2>(d, t0, t1, in, ld, w, b, s, o);
}
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"), flatten)) void ConvAvx512(
    const Mamba2Dims& d, int64_t t0, int64_t t1, const float* in, int64_t ld, const float* w, const float* b,
    const float* s, float* o) {
  ConvBody<SiluScalar>(d, t0, t1, in, ld, w, b, s, o);  // GCC vectorises it on AVX-512 (zmm)
}
#endif
void ConvScalar(const Mamba2Dims& d, int64_t t0, int64_t t1, const float* in, int64_t ld, const float* w,
                const float* b, const float* s, float* o) {
  ConvBody<SiluScalar>(d, t0, t1, in, ld, w, b, s, o);
}

struct ChunkScratch {
  std::vector<float> dt, cs, G, Bt, M, Cd, Bw;
};

// C[r, c] continues one fused multiply-add chain over k in order, from C's current value:
// C[r, c] = fma(A[r, k], B[k, c], C[r, c]) for k = 0 .. K-1. The SSD chunk is three such
// small products (L x N x P and L x L x P per head); every ISA runs the same chains, so the
// three builds agree bit for bit.
using SmallGemmFn = void (*)(int64_t M, int64_t Nc, int64_t K, const float* A, int64_t lda, const float* B,
                             int64_t ldb, float* C, int64_t ldc);

void SmallGemmScalar(int64_t M, int64_t Nc, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc) {
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < Nc; ++c) {
      float acc = C[r * ldc + c];
      for (int64_t k = 0; k < K; ++k) acc = std::fma(A[r * lda + k], B[k * ldb + c], acc);
      C[r * ldc + c] = acc;
    }
}

#if RADIXLM_X86
template <int MR, int NV>
__attribute__((target("avx2,fma"))) void SmallTileAvx2(int64_t K, const float* A, int64_t lda, const float* B,
                                                       int64_t ldb, float* C, int64_t ldc) {
  __m256 acc[MR * NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR * NV; ++i) acc[i] = _mm256_loadu_ps(C + (i / NV) * ldc + (i % NV) * 8);
  for (int64_t k = 0; k < K; ++k) {
    __m256 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(B + k * ldb + 8 * v);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_set1_ps(A[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r * NV + v] = _mm256_fmadd_ps(a, b[v], acc[r * NV + v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR * NV; ++i) _mm256_storeu_ps(C + (i / NV) * ldc + (i % NV) * 8, acc[i]);
}

void SmallGemmAvx2(int64_t M, int64_t Nc, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc) {
  const int64_t full = Nc / 32 * 32;
  int64_t r = 0;
  for (; r + 4 <= M; r += 4)
    for (int64_t c = 0; c < full; c += 32) SmallTileAvx2<4, 4>(K, A + r * lda, lda, B + c, ldb, C + r * ldc + c, ldc);
  for (; r < M; ++r)
    for (int64_t c = 0; c < full; c += 32) SmallTileAvx2<1, 4>(K, A + r * lda, lda, B + c, ldb, C + r * ldc + c, ldc);
  if (full < Nc) SmallGemmScalar(M, Nc - full, K, A, lda, B + full, ldb, C + full, ldc);
}

template <int MR, int NV>
__attribute__((target("avx512f,avx512vl,fma"))) void SmallTileAvx512(int64_t K, const float* A, int64_t lda,
                                                                      const float* B, int64_t ldb, float* C,
                                                                      int64_t ldc, __mmask16 last) {
  __m512 acc[MR * NV];
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) m[v] = v + 1 == NV ? last : __mmask16(0xffff);
#pragma GCC unroll 24
  for (int i = 0; i < MR * NV; ++i) acc[i] = _mm512_maskz_loadu_ps(m[i % NV], C + (i / NV) * ldc + (i % NV) * 16);
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm512_maskz_loadu_ps(m[v], B + k * ldb + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r * NV + v] = _mm512_fmadd_ps(a, b[v], acc[r * NV + v]);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR * NV; ++i) _mm512_mask_storeu_ps(C + (i / NV) * ldc + (i % NV) * 16, m[i % NV], acc[i]);
}

template <int NV>
void SmallColumnsAvx512(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                        int64_t ldc, __mmask16 last) {
  int64_t r = 0;
  for (; r + 6 <= M; r += 6) SmallTileAvx512<6, NV>(K, A + r * lda, lda, B, ldb, C + r * ldc, ldc, last);
  for (; r < M; ++r) SmallTileAvx512<1, NV>(K, A + r * lda, lda, B, ldb, C + r * ldc, ldc, last);
}

void SmallGemmAvx512(int64_t M, int64_t Nc, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc) {
  for (int64_t c = 0; c < Nc; c += 64) {
    const int64_t cols = std::min<int64_t>(64, Nc - c);
    const int nv = static_cast<int>((cols + 15) / 16);
    const __mmask16 last = static_cast<__mmask16>(cols % 16 ? (1u << (cols % 16)) - 1 : 0xffffu);
    switch (nv) {
      case 1: SmallColumnsAvx512<1>(M, K, A, lda, B + c, ldb, C + c, ldc, last); break;
      case 2: SmallColumnsAvx512<2>(M, K, A, lda, B + c, ldb, C + c, ldc, last); break;
      case 3: SmallColumnsAvx512<3>(M, K, A, lda, B + c, ldb, C + c, ldc, last); break;
      default: SmallColumnsAvx512<4>(M, K, A, lda, B + c, ldb, C + c, ldc, last); break;
    }
  }
}
#endif

// One chunk [s, s + L) for heads [h0, h1) of one group, as matrix products (SSD):
//   G = C B^T (shared by the group's heads); per head, with c the cumulative log-decay,
//   M[t, j] = G[t, j] exp(c_t - c_j) dt_j (j <= t), Cd[t, :] = C_t exp(c_t),
//   Y = D X + Cd S + M X,   S <- exp(c_L) S + (B . w)^T X with w_j = exp(c_L - c_j) dt_j.
// The element-wise loops are plain (vectorised by the compiler, no contraction); the products
// run on the ISA's small GEMM.
template <bool kUnused>
inline void ScanChunkBody(const Mamba2Dims& d, int64_t s, int64_t L, const ScanInputs& in, int g, int h0, int h1,
                          float* state, float* y, int64_t ld_y, ChunkScratch& sc, SmallGemmFn gemm) {
  const int N = d.d_state, P = d.head_dim;
  const int64_t bc_off = int64_t{g} * N;
  sc.Bt.resize(size_t(N) * L);
  for (int64_t j = 0; j < L; ++j) {
    const float* b = in.B + (s + j) * in.ld + bc_off;
    for (int n = 0; n < N; ++n) sc.Bt[size_t(n) * L + j] = b[n];
  }
  sc.G.assign(size_t(L) * L, 0.0f);
  gemm(L, L, N, in.C + s * in.ld + bc_off, in.ld, sc.Bt.data(), L, sc.G.data(), L);
  sc.dt.resize(L);
  sc.cs.resize(L);
  sc.M.resize(size_t(L) * L);
  sc.Cd.resize(size_t(L) * N);
  sc.Bw.resize(size_t(N) * L);
  for (int h = h0; h < h1; ++h) {
    const float A = in.A[h], Dh = in.D[h];
    float acc = 0.0f;
    for (int64_t j = 0; j < L; ++j) {
      sc.dt[j] = Softplus(in.dt[(s + j) * in.ld_dt + h] + in.dt_bias[h]);
      acc += sc.dt[j] * A;
      sc.cs[j] = acc;
    }
    for (int64_t t = 0; t < L; ++t) {
      float* mt = sc.M.data() + t * L;
      for (int64_t j = 0; j < L; ++j) mt[j] = j <= t ? sc.G[t * L + j] * core::ExpVec(sc.cs[t] - sc.cs[j]) * sc.dt[j] : 0.0f;
      const float decay_t = std::exp(sc.cs[t]);
      const float* c = in.C + (s + t) * in.ld + bc_off;
      for (int n = 0; n < N; ++n) sc.Cd[t * N + n] = c[n] * decay_t;
      float* yt = y + (s + t) * ld_y + int64_t{h} * P;
      const float* xt = in.x + (s + t) * in.ld + int64_t{h} * P;
      for (int p = 0; p < P; ++p) yt[p] = Dh * xt[p];
    }
    float* S = state + int64_t{h} * N * P;  // [N, P]
    const float* X = in.x + s * in.ld + int64_t{h} * P;
    float* Y = y + s * ld_y + int64_t{h} * P;
    gemm(L, P, N, sc.Cd.data(), N, S, P, Y, ld_y);        // the state carried into the chunk
    gemm(L, P, L, sc.M.data(), L, X, in.ld, Y, ld_y);     // the chunk's own tokens
    const float decay_end = std::exp(sc.cs[L - 1]);
    for (int64_t i = 0; i < int64_t{N} * P; ++i) S[i] *= decay_end;
    for (int64_t j = 0; j < L; ++j) sc.M[j] = core::ExpVec(sc.cs[L - 1] - sc.cs[j]) * sc.dt[j];  // w, in M's first row
    for (int n = 0; n < N; ++n)
      for (int64_t j = 0; j < L; ++j) sc.Bw[size_t(n) * L + j] = sc.Bt[size_t(n) * L + j] * sc.M[j];
    gemm(N, P, L, sc.Bw.data(), L, X, in.ld, S, P);
  }
}

#if RADIXLM_X86
__attribute__((target("avx2,fma"), flatten)) void ScanChunkAvx2(const Mamba2Dims& d, int64_t s, int64_t L,
                                                                const ScanInputs& in, int g, int h0, int h1,
                                                                float* state, float* y, int64_t ld_y,
                                                                ChunkScratch& sc) {
  ScanChunkBody<true>(d, s, L, in, g, h0, h1, state, y, ld_y, sc, &SmallGemmAvx2);
}
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"), flatten)) void ScanChunkAvx512(
    const Mamba2Dims& d, int64_t s, int64_t L, const ScanInputs& in, int g, int h0, int h1, float* state, float* y,
    int64_t ld_y, ChunkScratch& sc) {
  ScanChunkBody<true>(d, s, L, in, g, h0, h1, state, y, ld_y, sc, &SmallGemmAvx512);
}
#endif
void ScanChunkScalar(const Mamba2Dims& d, int64_t s, int64_t L, const ScanInputs& in, int g, int h0, int h1,
                     float* state, float* y, int64_t ld_y, ChunkScratch& sc) {
  ScanChunkBody<false>(d, s, L, in, g, h0, h1, state, y, ld_y, sc, &SmallGemmScalar);
}

// ---- The exact recurrence ---------------------------------------------------------------------
// Per head, token by token, one fixed sequence of roundings per state element and output:
//   coef_t    = dt_t * B_t[n]
//   s_t[n, p] = fma(coef_t, x_t[p], exp(dt_t * A) * s_{t-1}[n, p])
//   acc_t[p]  = fma(C_t[n], s_t[n, p], acc_t[p])   for n = 0 .. N-1, from 0
//   y_t[p]    = fma(D, x_t[p], acc_t[p])
// Every element's chain is the same whether its tokens come in one call or in many, so a
// prefill split anywhere, a decode step, a capture or a restore give the same bits (the chunked
// form's results depend on where a chunk starts). Loop order keeps a state row in registers
// across a block of tokens (x and the accumulators stream from L1); every ISA computes the same
// chains (scalar with std::fma), so the builds agree bit for bit.
//
// A block's operands are packed before the loops: B and C transposed to [N, T] once per group,
// then per head x [T, P] and the accumulators [T, P] contiguous and coef [N, T]. In place, a token's x, B and C sit one
// activation row apart (conv_dim floats, 9 KB at hybrid-0.4b's widths), a stride that maps
// every fourth token to the same few L1 sets: the block did not stay in L1 and the scan ran
// at ~1/5 of its FMA rate (kernels_bench Mamba2Scan/exact, measured). Packing copies values,
// so the chains above are unchanged.
struct RecurScratch {
  std::vector<float> b, c;       // [N, T] of the block's group (B and C transposed)
  std::vector<float> dt, decay;  // [T] of the head
  std::vector<float> coef;       // [N, T] of the head: dt * B
  std::vector<float> x, acc;     // [T, P] of the head
};

// B and C of group g for a block, transposed: once per group, shared by its heads.
void RecurPackGroup(const ScanInputs& in, int g, int N, int64_t T, RecurScratch& sc) {
  sc.b.resize(T * N);
  sc.c.resize(T * N);
  for (int64_t t = 0; t < T; ++t) {
    const float* b = in.B + t * in.ld + int64_t{g} * N;
    const float* c = in.C + t * in.ld + int64_t{g} * N;
    for (int n = 0; n < N; ++n) {
      sc.b[n * T + t] = b[n];
      sc.c[n * T + t] = c[n];
    }
  }
}

// Head h's operands for a block (after RecurPackGroup of its group).
void RecurPackHead(const ScanInputs& in, int h, int N, int P, int64_t T, RecurScratch& sc) {
  sc.dt.resize(T);
  sc.decay.resize(T);
  sc.coef.resize(T * N);
  sc.x.resize(T * P);
  sc.acc.assign(T * P, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    sc.dt[t] = Softplus(in.dt[t * in.ld_dt + h] + in.dt_bias[h]);
    sc.decay[t] = std::exp(sc.dt[t] * in.A[h]);
    std::memcpy(sc.x.data() + t * P, in.x + t * in.ld + int64_t{h} * P, P * sizeof(float));
  }
  for (int n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) sc.coef[n * T + t] = sc.dt[t] * sc.b[n * T + t];
}

inline void RecurFinish(const ScanInputs& in, int h, int64_t T, int P, const RecurScratch& sc, float* y, int64_t ld_y) {
  const float Dh = in.D[h];
  for (int64_t t = 0; t < T; ++t) {
    const float* x = sc.x.data() + t * P;
    const float* a = sc.acc.data() + t * P;
    float* yt = y + t * ld_y + int64_t{h} * P;
    for (int p = 0; p < P; ++p) yt[p] = std::fma(Dh, x[p], a[p]);
  }
}

// Columns [p0, p1) of one state row n over all T tokens, scalar (the oracle of the vector ones).
inline void RecurColumnsScalar(int P, int n, int p0, int p1, int64_t T, RecurScratch& sc, float* S) {
  const float* coef = sc.coef.data() + n * T;
  const float* cn = sc.c.data() + n * T;
  for (int p = p0; p < p1; ++p) {
    float sv = S[int64_t{n} * P + p];
    for (int64_t t = 0; t < T; ++t) {
      sv = std::fma(coef[t], sc.x[t * P + p], sc.decay[t] * sv);
      float& a = sc.acc[t * P + p];
      a = std::fma(cn[t], sv, a);
    }
    S[int64_t{n} * P + p] = sv;
  }
}

void RecurHeadScalar(const Mamba2Dims& d, int64_t T, const ScanInputs& in, int h, float* S, float* y,
                     int64_t ld_y, RecurScratch& sc) {
  const int N = d.d_state, P = d.head_dim;
  RecurPackHead(in, h, N, P, T, sc);
  for (int n = 0; n < N; ++n) RecurColumnsScalar(P, n, 0, P, T, sc, S);
  RecurFinish(in, h, T, P, sc, y, ld_y);
}

// The vector forms of the recurrence: ssm_recur_simd.inc's one body, compiled per ISA.
#if RADIXLM_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace recur_avx2 {
struct V {
  using T = __m256;
  static constexpr int kWidth = 8;
  static T Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T Set1(float x) { return _mm256_set1_ps(x); }
  static T Mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T Fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
};
#include "kernels/ssm_recur_simd.inc"
}  // namespace recur_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
namespace recur_avx512 {
struct V {
  using T = __m512;
  static constexpr int kWidth = 16;
  static T Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T Set1(float x) { return _mm512_set1_ps(x); }
  static T Mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T Fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};
#include "kernels/ssm_recur_simd.inc"
}  // namespace recur_avx512
#pragma GCC pop_options
#endif
#if RADIXLM_ARM
namespace recur_neon {  // NEON is in every ARMv8-A CPU: no target pragma
struct V {
  using T = float32x4_t;
  static constexpr int kWidth = 4;
  static T Load(const float* p) { return vld1q_f32(p); }
  static void Store(float* p, T v) { vst1q_f32(p, v); }
  static T Set1(float x) { return vdupq_n_f32(x); }
  static T Mul(T a, T b) { return vmulq_f32(a, b); }
  static T Fma(T a, T b, T c) { return vfmaq_f32(c, a, b); }
};
#include "kernels/ssm_recur_simd.inc"
}  // namespace recur_neon
#endif

// Tokens per block: a block's packed x and accumulators (2 x kRecurBlock x head_dim floats,
// 16 KB at head_dim 64) stay in L1 beside the streamed coef and C rows.
constexpr int64_t kRecurBlock = 32;

void CaptureHeads(const Mamba2Dims& d, const float* state, float* dst, int h0, int h1) {
  const int64_t per_head = int64_t{d.d_state} * d.head_dim;
  std::memcpy(dst + h0 * per_head, state + h0 * per_head, (h1 - h0) * per_head * sizeof(float));
}

}  // namespace

void CausalConv1dSiluRows(const Mamba2Dims& d, int64_t t_begin, int64_t t_end, const float* in, int64_t ld_in,
                          const float* w, const float* bias, const float* conv_state, float* out) {
  if (t_begin >= t_end) return;
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512)) return ConvAvx512(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return ConvAvx2(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
#endif
  ConvScalar(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
}

void CausalConv1dRows(const Mamba2Dims& d, int64_t t_begin, int64_t t_end, const float* in, int64_t ld_in,
                      const float* w, const float* bias, const float* conv_state, float* out) {
  if (t_begin >= t_end) return;
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512)) return ConvLinearAvx512(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return ConvLinearAvx2(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
#endif
  ConvBody<NoActivation>(d, t_begin, t_end, in, ld_in, w, bias, conv_state, out);
}

void AdvanceConvState(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in, float* conv_state,
                      std::span<const StateCapture> captures) {
  if (n_tokens <= 0) return;
  for (const StateCapture& c : captures)
    if (c.conv) ConvStateAt(d, c.after_tokens, in, ld_in, conv_state, c.conv);
  thread_local std::vector<float> next;
  next.resize(d.conv_state_floats());
  ConvStateAt(d, n_tokens, in, ld_in, conv_state, next.data());
  std::memcpy(conv_state, next.data(), next.size() * sizeof(float));
}

void CausalConv1dSilu(const Mamba2Dims& d, int64_t n_tokens, const float* in, int64_t ld_in, const float* w,
                      const float* bias, float* conv_state, float* out, std::span<const StateCapture> captures) {
  CausalConv1dSiluRows(d, 0, n_tokens, in, ld_in, w, bias, conv_state, out);
  AdvanceConvState(d, n_tokens, in, ld_in, conv_state, captures);
}

void Mamba2Scan(const Mamba2Dims& d, int64_t n_tokens, int64_t start_position, int chunk, const ScanInputs& in,
                float* state, float* y, int64_t ld_y, std::span<const StateCapture> captures, int head_begin,
                int head_end) {
  if (n_tokens <= 0 || head_begin >= head_end) return;
  RADIXLM_CHECK(d.n_heads % d.n_groups == 0);
  const int heads_per_group = d.n_heads / d.n_groups;
  [[maybe_unused]] const core::Isa isa = core::ActiveIsa();
  if (chunk <= 0) return Mamba2ScanRecurrent(d, n_tokens, in, state, y, ld_y, captures, head_begin, head_end);
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
#if RADIXLM_X86
      if (core::AtLeast(isa, core::Isa::kAvx512)) {
        ScanChunkAvx512(d, s, e - s, in, g, h0, h1, state, y, ld_y, scratch);
        continue;
      }
      if (core::AtLeast(isa, core::Isa::kAvx2)) {
        ScanChunkAvx2(d, s, e - s, in, g, h0, h1, state, y, ld_y, scratch);
        continue;
      }
#endif
      ScanChunkScalar(d, s, e - s, in, g, h0, h1, state, y, ld_y, scratch);
    }
    for (const StateCapture& c : captures)
      if (c.after_tokens == e && c.ssm) CaptureHeads(d, state, c.ssm, head_begin, head_end);
    s = e;
  }
}

void Mamba2ScanRecurrent(const Mamba2Dims& d, int64_t n_tokens, const ScanInputs& in, float* state, float* y,
                         int64_t ld_y, std::span<const StateCapture> captures, int head_begin, int head_end) {
  if (n_tokens <= 0 || head_begin >= head_end) return;
  const int heads_per_group = d.n_heads / d.n_groups;
  [[maybe_unused]] const core::Isa isa = core::ActiveIsa();
  thread_local RecurScratch scratch;
  const int64_t per_head = int64_t{d.d_state} * d.head_dim;
  int64_t s = 0;
  while (s < n_tokens) {
    // Blocks end at a requested capture (the recurrence gives the same bits however it is split).
    int64_t e = std::min(n_tokens, s + kRecurBlock);
    for (const StateCapture& c : captures)
      if (c.after_tokens > s && c.after_tokens < e) e = c.after_tokens;
    ScanInputs block = in;
    block.x = in.x + s * in.ld;
    block.B = in.B + s * in.ld;
    block.C = in.C + s * in.ld;
    block.dt = in.dt + s * in.ld_dt;
    float* yb = y + s * ld_y;
    for (int h = head_begin; h < head_end; ++h) {
      float* S = state + h * per_head;
      if (h == head_begin || h % heads_per_group == 0)
        RecurPackGroup(block, h / heads_per_group, d.d_state, e - s, scratch);
#if RADIXLM_X86
      if (core::AtLeast(isa, core::Isa::kAvx512)) {
        recur_avx512::RecurHead(d, e - s, block, h, S, yb, ld_y, scratch);
        continue;
      }
      if (core::AtLeast(isa, core::Isa::kAvx2)) {
        recur_avx2::RecurHead(d, e - s, block, h, S, yb, ld_y, scratch);
        continue;
      }
#endif
#if RADIXLM_ARM
      if (core::AtLeast(isa, core::Isa::kNeon)) {
        recur_neon::RecurHead(d, e - s, block, h, S, yb, ld_y, scratch);
        continue;
      }
#endif
      RecurHeadScalar(d, e - s, block, h, S, yb, ld_y, scratch);
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

namespace {

template <class SiluRows>
inline void GatedRmsNormBody(float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w, int64_t n_tokens,
                             int64_t d_inner, int64_t group_size, float eps) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* yt = y + t * ld_y;
    const float* zt = z + t * ld_z;
    SiluRows::MulRow(yt, zt, d_inner);
    for (int64_t g0 = 0; g0 < d_inner; g0 += group_size) {
      double ss = 0;
      for (int64_t i = g0; i < g0 + group_size; ++i) ss += double(yt[i]) * yt[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / group_size) + eps);
      for (int64_t i = g0; i < g0 + group_size; ++i) yt[i] = yt[i] * inv * w[i];
    }
  }
}

#if RADIXLM_X86
__attribute__((target("avx2,fma"), flatten)) void GatedRmsNormAvx2(float* y, int64_t ld_y, const float* z,
                                                                   int64_t ld_z, const float* w, int64_t n,
                                                                   int64_t di, int64_t gs, float eps) {
  GatedRmsNormBody<SiluAvx2>(y, ld_y, z, ld_z, w, n, di, gs, eps);
}
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"), flatten)) void GatedRmsNormAvx512(
    float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w, int64_t n, int64_t di, int64_t gs, float eps) {
  GatedRmsNormBody<SiluScalar>(y, ld_y, z, ld_z, w, n, di, gs, eps);  // vectorised by GCC on AVX-512
}
#endif

}  // namespace

void GatedRmsNorm(float* y, int64_t ld_y, const float* z, int64_t ld_z, const float* w, int64_t n_tokens,
                  int64_t d_inner, int64_t group_size, float eps) {
  RADIXLM_CHECK(group_size > 0 && d_inner % group_size == 0);
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512)) return GatedRmsNormAvx512(y, ld_y, z, ld_z, w, n_tokens, d_inner, group_size, eps);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return GatedRmsNormAvx2(y, ld_y, z, ld_z, w, n_tokens, d_inner, group_size, eps);
#endif
  GatedRmsNormBody<SiluScalar>(y, ld_y, z, ld_z, w, n_tokens, d_inner, group_size, eps);
}

}  // namespace radixlm::kernels
