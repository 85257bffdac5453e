// NEON paged attention for a tile (attention_internal.h): attention_avx2.cc's kernel on ARM64,
// each of its 8-lane ymm vectors a pair of 128-bit q registers (F8 below). Per chunk of >= 64
// keys, the tile's query vectors (rows x group heads), 12 at a time, meet the chunk as two
// register-blocked matrix products: scores S = Q K^T (6 query vectors x 16 keys, each K load
// shared by 6 vectors), an online-softmax update per vector and chunk, then O = O * corr + P V.
// AArch64's 32 q registers hold what AVX2's 16 ymm do, so the blocking is the same.
//
// The order of f32 operations of one output element is fixed by its row's position and the
// sequence's KV alone, never by the tile (batch-invariant, as on x86): a score is one FMA chain
// over head_dim times the scale; a chunk's max and sum are 8-lane folds over its keys in order;
// an output element is acc * corr, then one FMA chain over the chunk's valid keys in order.
// NEON is in every ARMv8-A CPU: no target attribute.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_internal.h"
#include "kernels/attention_tile8.h"

namespace radixlm::kernels::attn {
namespace {

using core::DType;

template <DType D>
using Elem = KvElem8<D>;

// Eight f32 lanes as two q registers; a mask is all-ones lanes in the same type.
struct F8 {
  float32x4_t lo, hi;
};
inline F8 F8Zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
inline F8 F8Set1(float x) { return {vdupq_n_f32(x), vdupq_n_f32(x)}; }
inline F8 F8Load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline void F8Store(float* p, F8 v) {
  vst1q_f32(p, v.lo);
  vst1q_f32(p + 4, v.hi);
}
inline F8 F8Fma(F8 a, F8 b, F8 c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }  // a * b + c
inline F8 F8Mul(F8 a, F8 b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
inline F8 F8Add(F8 a, F8 b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
inline F8 F8Sub(F8 a, F8 b) { return {vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
inline F8 F8Max(F8 a, F8 b) { return {vmaxq_f32(a.lo, b.lo), vmaxq_f32(a.hi, b.hi)}; }
inline uint32x4_t U(float32x4_t v) { return vreinterpretq_u32_f32(v); }
inline F8 F8And(F8 m, F8 x) {
  return {vreinterpretq_f32_u32(vandq_u32(U(m.lo), U(x.lo))), vreinterpretq_f32_u32(vandq_u32(U(m.hi), U(x.hi)))};
}
inline F8 F8Blendv(F8 a, F8 b, F8 m) { return {vbslq_f32(U(m.lo), b.lo, a.lo), vbslq_f32(U(m.hi), b.hi, a.hi)}; }  // b where m
inline float F8HMax(F8 v) { return vmaxvq_f32(vmaxq_f32(v.lo, v.hi)); }
inline float F8HSum(F8 v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }

// exp(x) as kernels/vec_avx2.h's Exp (Cephes-style 2^n * p(r), |r| <= ln2/2), on 4 lanes.
inline float32x4_t Exp4(float32x4_t x) {
  const uint32x4_t underflow = vcltq_f32(x, vdupq_n_f32(-87.3365478515625f));
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3365478515625f)), vdupq_n_f32(88.3762626647949f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t result = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vbicq_u32(U(result), underflow));
}
inline F8 F8Exp(F8 x) { return {Exp4(x.lo), Exp4(x.hi)}; }

template <DType D>
inline F8 Load8(const Elem<D>* p) {
  if constexpr (D == DType::kF32) {
    return F8Load(p);
  } else if constexpr (D == DType::kBF16) {
    const uint16x8_t h = vld1q_u16(p);
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
  } else {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
  }
}

template <DType D>
inline float Load1(const Elem<D>* p) {
  if constexpr (D == DType::kF32) return *p;
  else if constexpr (D == DType::kBF16) return core::Bf16ToF32(*p);
  else return core::F16ToF32(*p);
}

// All ones in lanes [0, n).
inline F8 FirstN(int n) {
  const int32x4_t nv = vdupq_n_s32(n);
  const int32x4_t lo = {0, 1, 2, 3}, hi = {4, 5, 6, 7};
  return {vreinterpretq_f32_u32(vcgtq_s32(nv, lo)), vreinterpretq_f32_u32(vcgtq_s32(nv, hi))};
}

constexpr int LanesFor(int nq) { return LanesFor8(nq); }

// scores[v][8 g + j] = (q_v . k_j) * scale for NQ query vectors and NK groups of 8 keys.
// qp: the NQ vectors packed dim-major [d][NQ] (one pointer, constant offsets: the loop keeps no
// per-vector pointers in registers); k[g]: dim 0 of key group g (8 consecutive keys of one
// block), every group's dims `stride` elements apart.
template <DType D, int NQ, int NK>
void ScoreBlock(const float* qp, const Elem<D>* const* k, int64_t stride, int d, float scale,
                             float* scores, int64_t ld_scores, Prefetcher* pf) {
  F8 acc[NQ * NK];
#pragma GCC unroll 16
  for (int x = 0; x < NQ * NK; ++x) acc[x] = F8Zero();
  const Elem<D>* kp[NK];
#pragma GCC unroll 8
  for (int g = 0; g < NK; ++g) kp[g] = k[g];
  for (int i = 0; i < d; ++i, qp += NQ) {
    if ((i & 7) == 0) pf->Issue(pf->per8);
    F8 kv[NK];
#pragma GCC unroll 8
    for (int g = 0; g < NK; ++g) {
      kv[g] = Load8<D>(kp[g]);
      kp[g] += stride;
    }
#pragma GCC unroll 6
    for (int v = 0; v < NQ; ++v) {
      const F8 b = F8Set1(*(qp + v));
#pragma GCC unroll 8
      for (int g = 0; g < NK; ++g) acc[v * NK + g] = F8Fma(b, kv[g], acc[v * NK + g]);
    }
  }
  const F8 s = F8Set1(scale);
#pragma GCC unroll 6
  for (int v = 0; v < NQ; ++v)
#pragma GCC unroll 8
    for (int g = 0; g < NK; ++g) F8Store(scores + v * ld_scores + 8 * g, F8Mul(acc[v * NK + g], s));
}

// The last n (< NK) key groups of a row of blocks.
template <DType D, int NQ, int NK>
void ScoreTail(int n, const float* qp, const Elem<D>* const* k, int64_t stride, int d, float scale, float* scores,
               int64_t ld_scores, Prefetcher* pf) {
  if (n == NK) return ScoreBlock<D, NQ, NK>(qp, k, stride, d, scale, scores, ld_scores, pf);
  if constexpr (NK > 1) ScoreTail<D, NQ, NK - 1>(n, qp, k, stride, d, scale, scores, ld_scores, pf);
}

template <DType D, int NQ>
void ScoreGroupsNq(const float* qp, const Elem<D>* const* k, int64_t stride, int n_groups, int d, float scale,
                   float* scores, int64_t ld_scores, Prefetcher* pf) {
  constexpr int kNk = LanesFor(NQ);
  for (int g = 0; g < n_groups; g += kNk)
    ScoreTail<D, NQ, kNk>(std::min(kNk, n_groups - g), qp, k + g, stride, d, scale, scores + 8 * g, ld_scores, pf);
}

// Scores of n_q query vectors, packed by PackQueries, against n_groups key groups.
template <DType D>
void ScoreGroups(const float* qpack, int n_q, const Elem<D>* const* k, int64_t stride, int n_groups, int d,
                 float scale, float* scores, int64_t ld_scores, Prefetcher* pf) {
  for (int v = 0; v < n_q; v += 6) {
    const float* qp = qpack + static_cast<int64_t>(v) * d;
    float* out = scores + v * ld_scores;
    WithBlockVectors(n_q - v, [&](auto nq) {
      ScoreGroupsNq<D, decltype(nq)::value>(qp, k, stride, n_groups, d, scale, out, ld_scores, pf);
    });
  }
}

// acc_q[i] = acc_q[i] * corr_q + sum_{j0 <= j < j1} p_q[j] * v_j[i] for QV query vectors over
// dims [i0, i0 + 8 DV): one FMA chain per element, keys in order.
template <DType D, int QV, int DV>
void ValueBlock(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v,
                             int j0, int j1, int i0, Prefetcher* pf) {
  F8 a[QV * DV];
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c)
      a[q * DV + c] = F8Mul(F8Load(acc[q] + i0 + 8 * c), F8Set1(corr[q]));
  for (int j = j0; j < j1; ++j) {
    if (((j - j0) & 7) == 0) pf->Issue(pf->per8);
    F8 x[DV];
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) x[c] = Load8<D>(v[j] + i0 + 8 * c);
#pragma GCC unroll 6
    for (int q = 0; q < QV; ++q) {
      const F8 pj = F8Set1(*(p[q] + j));
#pragma GCC unroll 8
      for (int c = 0; c < DV; ++c) a[q * DV + c] = F8Fma(pj, x[c], a[q * DV + c]);
    }
  }
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) F8Store(acc[q] + i0 + 8 * c, a[q * DV + c]);
}

template <DType D, int QV, int DV>
void ValueTail(int n, float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v, int j0,
               int j1, int i0, Prefetcher* pf) {
  if (n == DV) return ValueBlock<D, QV, DV>(acc, corr, p, v, j0, j1, i0, pf);
  if constexpr (DV > 1) ValueTail<D, QV, DV - 1>(n, acc, corr, p, v, j0, j1, i0, pf);
}

// The same over all d dims (the last d % 8 one scalar chain each, in the same order).
template <DType D, int QV>
void ValueRows(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v,
                            int j0, int j1, int d, Prefetcher* pf) {
  constexpr int kDv = LanesFor(QV);
  const int d8 = d / 8;
  for (int c = 0; c < d8; c += kDv) ValueTail<D, QV, kDv>(std::min(kDv, d8 - c), acc, corr, p, v, j0, j1, 8 * c, pf);
  for (int q = 0; q < QV; ++q)
    for (int i = 8 * d8; i < d; ++i) {
      float a = acc[q][i] * corr[q];
      for (int j = j0; j < j1; ++j) a = std::fma(p[q][j], Load1<D>(v[j] + i), a);
      acc[q][i] = a;
    }
}

template <DType D>
void WeightedValues(int n_q, float* const* acc, const float* corr, const float* const* p, const int* first,
                    const int* valid, const Elem<D>* const* v, int d, Prefetcher* pf) {
  BlockedValues(n_q, acc, corr, p, first, valid,
                [&](auto qv, float* const* a, const float* c, const float* const* pv, int j0, int j1) {
                  ValueRows<D, decltype(qv)::value>(a, c, pv, v, j0, j1, d, pf);
                });
}

// Softmax update of one query vector over a chunk's scores s[0, n) (n valid keys): returns the
// correction for its accumulator and leaves exp(s_j - m_new) in s. Whole groups of 8 go unmasked
// (a mask of all ones changes no bit); only a last partial group is masked.
float SoftmaxChunk(float* s, int n, float* m, float* l) {
  const F8 ninf = F8Set1(-std::numeric_limits<float>::infinity());
  const int n8 = n / 8 * 8;
  F8 mx = ninf;
  for (int j = 0; j < n8; j += 8) mx = F8Max(mx, F8Load(s + j));
  if (n8 < n) mx = F8Max(mx, F8Blendv(ninf, F8Load(s + n8), FirstN(n - n8)));
  const float m_new = std::max(*m, F8HMax(mx));
  const float corr = Correction(*m, m_new);
  const F8 mn = F8Set1(m_new);
  F8 sum = F8Zero();
  for (int j = 0; j < n8; j += 8) {
    const F8 e = F8Exp(F8Sub(F8Load(s + j), mn));
    F8Store(s + j, e);
    sum = F8Add(sum, e);
  }
  if (n8 < n) {
    const F8 e = F8And(FirstN(n - n8), F8Exp(F8Sub(F8Load(s + n8), mn)));
    F8Store(s + n8, e);
    sum = F8Add(sum, e);
  }
  *l = *l * corr + F8HSum(sum);
  *m = m_new;
  return corr;
}

// The kernels above for the shared tile driver (attention_tile8.h).
struct Ops {
  template <DType D>
  static void ScoreGroups(const float* qpack, int n_q, const Elem<D>* const* k, int64_t stride, int n_groups, int d,
                          float scale, float* scores, int64_t ld_scores, Prefetcher* pf) {
    attn::ScoreGroups<D>(qpack, n_q, k, stride, n_groups, d, scale, scores, ld_scores, pf);
  }
  static float SoftmaxChunk(float* s, int n, float* m, float* l) { return attn::SoftmaxChunk(s, n, m, l); }
  template <DType D>
  static void WeightedValues(int n_q, float* const* acc, const float* corr, const float* const* p, const int* first,
                             const int* valid, const Elem<D>* const* v, int d, Prefetcher* pf) {
    attn::WeightedValues<D>(n_q, acc, corr, p, first, valid, v, d, pf);
  }
};

}  // namespace

void AttendTileNeon(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                    const TileRow* rows, int n_rows) {
  AttendTile8ByDtype<Ops>(p, kv, seq, kv_head, rows, n_rows);
}

}  // namespace radixlm::kernels::attn
