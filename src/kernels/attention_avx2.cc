// AVX2 paged attention for a tile (attention_internal.h). Per chunk of >= 64 keys, the tile's
// query vectors (rows x group heads), 12 at a time, meet the chunk as two register-blocked
// matrix products: scores S = Q K^T (6 query vectors x 16 keys of ymm accumulators, each K load
// shared by 6 vectors), an online-softmax update per vector and chunk, then O = O * corr + P V
// (6 vectors x 16 dims, each V load shared by 6 vectors). A cascade group's rows all sit at one
// position past a shared prefix, so its tile is exactly these products, compute-bound once the
// prefix is read once per tile (docs/cascade.md).
//
// The order of f32 operations of one output element is fixed by its row's position and the
// sequence's KV alone, never by the tile: a score is one FMA chain over head_dim (dims in order)
// times the scale; a chunk's max and sum are 8-lane vector folds over its keys in order, reduced
// by HMax / HSum; an output element is acc * corr, then one FMA chain over the chunk's valid keys
// in order. Which vectors share a register block changes none of these (a block's vectors with
// more valid keys than its shortest continue their chains alone), so a row alone, in a prefill
// tile or in a cascade group of 127 others gives the same bits (tests: attention_test.cc).
// K/V are read in the store's dtype and widened in registers; blocks whose size is not a
// multiple of 8 are first staged into a contiguous f32 chunk. The next chunk's K/V runs are
// prefetched from inside the loops (Prefetcher): decode streams them from DRAM.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_internal.h"
#include "kernels/attention_tile8.h"
#include "kernels/vec_avx2.h"

namespace radixlm::kernels::attn {
namespace {

using core::DType;

template <DType D>
using Elem = KvElem8<D>;

template <DType D>
RADIXLM_AVX2 inline __m256 Load8(const Elem<D>* p) {
  if constexpr (D == DType::kF32) {
    return _mm256_loadu_ps(p);
  } else if constexpr (D == DType::kBF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

template <DType D>
inline float Load1(const Elem<D>* p) {
  if constexpr (D == DType::kF32) return *p;
  else if constexpr (D == DType::kBF16) return core::Bf16ToF32(*p);
  else return core::F16ToF32(*p);
}

// All ones in lanes [0, n).
RADIXLM_AVX2 inline __m256 FirstN(int n) {
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

constexpr int LanesFor(int nq) { return LanesFor8(nq); }

// scores[v][8 g + j] = (q_v . k_j) * scale for NQ query vectors and NK groups of 8 keys.
// qp: the NQ vectors packed dim-major [d][NQ] (one pointer, constant offsets: the loop keeps no
// per-vector pointers in registers); k[g]: dim 0 of key group g (8 consecutive keys of one
// block), every group's dims `stride` elements apart.
template <DType D, int NQ, int NK>
RADIXLM_AVX2 void ScoreBlock(const float* qp, const Elem<D>* const* k, int64_t stride, int d, float scale,
                             float* scores, int64_t ld_scores, Prefetcher* pf) {
  __m256 acc[NQ * NK];
#pragma GCC unroll 16
  for (int x = 0; x < NQ * NK; ++x) acc[x] = _mm256_setzero_ps();
  const Elem<D>* kp[NK];
#pragma GCC unroll 8
  for (int g = 0; g < NK; ++g) kp[g] = k[g];
  for (int i = 0; i < d; ++i, qp += NQ) {
    if ((i & 7) == 0) pf->Issue(pf->per8);
    __m256 kv[NK];
#pragma GCC unroll 8
    for (int g = 0; g < NK; ++g) {
      kv[g] = Load8<D>(kp[g]);
      kp[g] += stride;
    }
#pragma GCC unroll 6
    for (int v = 0; v < NQ; ++v) {
      const __m256 b = _mm256_broadcast_ss(qp + v);
#pragma GCC unroll 8
      for (int g = 0; g < NK; ++g) acc[v * NK + g] = _mm256_fmadd_ps(b, kv[g], acc[v * NK + g]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
#pragma GCC unroll 6
  for (int v = 0; v < NQ; ++v)
#pragma GCC unroll 8
    for (int g = 0; g < NK; ++g) _mm256_storeu_ps(scores + v * ld_scores + 8 * g, _mm256_mul_ps(acc[v * NK + g], s));
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
RADIXLM_AVX2 void ValueBlock(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v,
                             int j0, int j1, int i0, Prefetcher* pf) {
  __m256 a[QV * DV];
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c)
      a[q * DV + c] = _mm256_mul_ps(_mm256_loadu_ps(acc[q] + i0 + 8 * c), _mm256_set1_ps(corr[q]));
  for (int j = j0; j < j1; ++j) {
    if (((j - j0) & 7) == 0) pf->Issue(pf->per8);
    __m256 x[DV];
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) x[c] = Load8<D>(v[j] + i0 + 8 * c);
#pragma GCC unroll 6
    for (int q = 0; q < QV; ++q) {
      const __m256 pj = _mm256_broadcast_ss(p[q] + j);
#pragma GCC unroll 8
      for (int c = 0; c < DV; ++c) a[q * DV + c] = _mm256_fmadd_ps(pj, x[c], a[q * DV + c]);
    }
  }
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) _mm256_storeu_ps(acc[q] + i0 + 8 * c, a[q * DV + c]);
}

template <DType D, int QV, int DV>
void ValueTail(int n, float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v, int j0,
               int j1, int i0, Prefetcher* pf) {
  if (n == DV) return ValueBlock<D, QV, DV>(acc, corr, p, v, j0, j1, i0, pf);
  if constexpr (DV > 1) ValueTail<D, QV, DV - 1>(n, acc, corr, p, v, j0, j1, i0, pf);
}

// The same over all d dims (the last d % 8 one scalar chain each, in the same order).
template <DType D, int QV>
RADIXLM_AVX2 void ValueRows(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v,
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
RADIXLM_AVX2 float SoftmaxChunk(float* s, int n, float* m, float* l) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const int n8 = n / 8 * 8;
  __m256 mx = ninf;
  for (int j = 0; j < n8; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
  if (n8 < n) mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + n8), FirstN(n - n8)));
  const float m_new = std::max(*m, avx2::HMax(mx));
  const float corr = Correction(*m, m_new);
  const __m256 mn = _mm256_set1_ps(m_new);
  __m256 sum = _mm256_setzero_ps();
  for (int j = 0; j < n8; j += 8) {
    const __m256 e = avx2::Exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), mn));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n8 < n) {
    const __m256 e = _mm256_and_ps(FirstN(n - n8), avx2::Exp(_mm256_sub_ps(_mm256_loadu_ps(s + n8), mn)));
    _mm256_storeu_ps(s + n8, e);
    sum = _mm256_add_ps(sum, e);
  }
  *l = *l * corr + avx2::HSum(sum);
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

void AttendTileAvx2(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                    const TileRow* rows, int n_rows) {
  AttendTile8ByDtype<Ops>(p, kv, seq, kv_head, rows, n_rows);
}

}  // namespace radixlm::kernels::attn
