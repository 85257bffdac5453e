// AVX-512 paged attention for a tile (attention_internal.h): per chunk of >= 64 keys and per
// 12 query vectors of the tile (rows x group heads), their scores against the chunk's keys
// (zmm over 16 keys, one FMA chain over head_dim per score), an online-softmax update per
// chunk, and the weighted values (zmm over 16 dims, one FMA chain over keys per output element).
// K/V are read in the store's dtype (f32, bf16, f16) and widened in registers. Blocks whose
// size is not a multiple of 16 are first staged into a contiguous f32 chunk.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_internal.h"
#include "kernels/vec_avx512.h"

#define RADIXLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace radixlm::kernels::attn {
namespace {

using core::DType;

template <DType D>
using Elem = std::conditional_t<D == DType::kF32, float, uint16_t>;

// 16 elements (the first `n`, the rest zero) widened to f32.
template <DType D>
RADIXLM_AVX512 inline __m512 Load16(const Elem<D>* p, __mmask16 m) {
  if constexpr (D == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (D == DType::kBF16) {
      // bf16 i to the high half of lane i, zeros below: one vpermw (not a widen and a shift).
      const __m512i idx = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3,
                                           0, 2, 0, 1, 0, 0, 0);
      return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, _mm512_castsi256_si512(h)));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

RADIXLM_AVX512 inline __mmask16 FirstN(int n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// exp(x) as kernels/vec_avx2.h's Exp (Cephes-style 2^n * p(r)), on 16 lanes.
RADIXLM_AVX512 inline __m512 Exp512(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.3365478515625f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 q = _mm512_set1_ps(1.9875691500e-4f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.3981999507e-3f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.3334519073e-3f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.1665795894e-2f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.6666665459e-1f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(5.0000001201e-1f));
  q = _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // q * 2^n in one vscalefps: the same correctly rounded product as a multiply by 2^n built in
  // the exponent bits (checked bitwise over all 2^32 inputs), in one op instead of four.
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~underflow), q, n);
}

// The keys of a chunk: groups of up to 16 keys, each with its dim-0 pointer and valid count;
// every group's dims are one stride apart.
template <DType D>
struct KeyGroup {
  const Elem<D>* k;
  int n;
};

// scores[v][16 g + j] = scale * q_v . k_j for NQ query vectors (packed by PackQueries: qp is
// [d][NQ]) and NK key groups; each score is one FMA chain over the head dim, in order. The
// next chunk's lines are prefetched every 8 dims (the prefetcher's state stays out of the loop).
template <DType D, int NQ, int NK>
RADIXLM_AVX512 void ScoreBlock(const float* qp, const KeyGroup<D>* groups, int64_t stride, int d, float scale,
                               float* scores, int64_t ld_scores, Prefetcher* pf) {
  __m512 acc[NQ * NK];
#pragma GCC unroll 24
  for (int i = 0; i < NQ * NK; ++i) acc[i] = _mm512_setzero_ps();
  __mmask16 masks[NK];
  const Elem<D>* kp[NK];
#pragma GCC unroll 4
  for (int g = 0; g < NK; ++g) {
    masks[g] = FirstN(groups[g].n);
    kp[g] = groups[g].k;
  }
  for (int i = 0; i < d; ++i, qp += NQ) {
    if ((i & 7) == 0) pf->Issue(pf->per8);
    __m512 k[NK];
#pragma GCC unroll 4
    for (int g = 0; g < NK; ++g) {
      k[g] = Load16<D>(kp[g], masks[g]);
      kp[g] += stride;
    }
#pragma GCC unroll 6
    for (int v = 0; v < NQ; ++v) {
      const __m512 b = _mm512_set1_ps(qp[v]);
#pragma GCC unroll 4
      for (int g = 0; g < NK; ++g) acc[v * NK + g] = _mm512_fmadd_ps(b, k[g], acc[v * NK + g]);
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
#pragma GCC unroll 6
  for (int v = 0; v < NQ; ++v)
#pragma GCC unroll 4
    for (int g = 0; g < NK; ++g) _mm512_storeu_ps(scores + v * ld_scores + 16 * g, _mm512_mul_ps(acc[v * NK + g], s));
}

template <DType D, int NQ>
void ScoreGroupsNq(const float* qp, const KeyGroup<D>* groups, int64_t stride, int n_groups, int d, float scale,
                   float* scores, int64_t ld_scores, Prefetcher* pf) {
  for (int g = 0; g < n_groups; g += 4) {
    float* out = scores + 16 * g;
    switch (std::min(4, n_groups - g)) {
      case 1: ScoreBlock<D, NQ, 1>(qp, groups + g, stride, d, scale, out, ld_scores, pf); break;
      case 2: ScoreBlock<D, NQ, 2>(qp, groups + g, stride, d, scale, out, ld_scores, pf); break;
      case 3: ScoreBlock<D, NQ, 3>(qp, groups + g, stride, d, scale, out, ld_scores, pf); break;
      default: ScoreBlock<D, NQ, 4>(qp, groups + g, stride, d, scale, out, ld_scores, pf); break;
    }
  }
}

// Scores of n_q query vectors, packed by PackQueries, against n_groups key groups.
template <DType D>
void ScoreGroups(const float* qpack, int n_q, const KeyGroup<D>* groups, int64_t stride, int n_groups, int d,
                 float scale, float* scores, int64_t ld_scores, Prefetcher* pf) {
  for (int v = 0; v < n_q; v += 6) {
    const float* qp = qpack + static_cast<int64_t>(v) * d;
    float* out = scores + v * ld_scores;
    WithBlockVectors(n_q - v, [&](auto nq) {
      ScoreGroupsNq<D, decltype(nq)::value>(qp, groups, stride, n_groups, d, scale, out, ld_scores, pf);
    });
  }
}

// acc_q[i] = acc_q[i] * corr_q + sum_{j0 <= j < j1} p_q[j] * v_j[i] for QV query vectors over
// dims [i0, i0 + 16 DV) (the last vector masked to `d`): one FMA chain per element, keys in
// order. Each widened V load feeds QV FMAs.
template <DType D, int QV, int DV>
RADIXLM_AVX512 void ValueBlock(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v,
                               int j0, int j1, int i0, int d, Prefetcher* pf) {
  __m512 a[QV * DV];
  __mmask16 m[DV];
#pragma GCC unroll 8
  for (int c = 0; c < DV; ++c) m[c] = FirstN(d - (i0 + 16 * c));
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c)
      a[q * DV + c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], acc[q] + i0 + 16 * c), _mm512_set1_ps(corr[q]));
  for (int j = j0; j < j1; ++j) {
    if (((j - j0) & 7) == 0) pf->Issue(pf->per8);
    __m512 x[DV];
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) x[c] = Load16<D>(v[j] + i0 + 16 * c, m[c]);
#pragma GCC unroll 6
    for (int q = 0; q < QV; ++q) {
      const __m512 pj = _mm512_set1_ps(p[q][j]);
#pragma GCC unroll 8
      for (int c = 0; c < DV; ++c) a[q * DV + c] = _mm512_fmadd_ps(pj, x[c], a[q * DV + c]);
    }
  }
#pragma GCC unroll 6
  for (int q = 0; q < QV; ++q)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) _mm512_mask_storeu_ps(acc[q] + i0 + 16 * c, m[c], a[q * DV + c]);
}

template <DType D, int QV, int DV>
void ValueTail(int n, float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v, int j0,
               int j1, int i0, int d, Prefetcher* pf) {
  if (n == DV) return ValueBlock<D, QV, DV>(acc, corr, p, v, j0, j1, i0, d, pf);
  if constexpr (DV > 1) ValueTail<D, QV, DV - 1>(n, acc, corr, p, v, j0, j1, i0, d, pf);
}

// The same over all d dims: up to 24 accumulators of the 32 zmm (1-2 vectors x 128 dims,
// 3-6 vectors x 64 dims).
template <DType D, int QV>
void ValueRows(float* const* acc, const float* corr, const float* const* p, const Elem<D>* const* v, int j0, int j1,
               int d, Prefetcher* pf) {
  constexpr int kDv = QV <= 2 ? 8 : 4;
  const int nz = (d + 15) / 16;
  for (int c = 0; c < nz; c += kDv)
    ValueTail<D, QV, kDv>(std::min(kDv, nz - c), acc, corr, p, v, j0, j1, 16 * c, d, pf);
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
// correction for its accumulator and leaves exp(s_j - m_new) in s.
RADIXLM_AVX512 float SoftmaxChunk(float* s, int n, float* m, float* l) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int j = 0; j < n; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, FirstN(n - j), s + j));
  const float m_new = std::max(*m, avx512::ReduceMax(mx));
  const float corr = Correction(*m, m_new);
  const __m512 mn = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    const __mmask16 mk = FirstN(n - j);
    const __m512 e = _mm512_maskz_mov_ps(mk, Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mn)));
    _mm512_mask_storeu_ps(s + j, mk, e);
    sum = _mm512_add_ps(sum, e);
  }
  *l = *l * corr + avx512::ReduceAdd(sum);
  *m = m_new;
  return corr;
}

// Query vectors (two register blocks) whose scores, softmax and weighted values run back to
// back for a chunk: their scores (one 3 KB buffer) are still in L1 for the softmax and the
// values, and the chunk's K and V stay in L1 from block to block. (Before, all of a tile's
// scores came first and all its value products after, with up to 64 KB of scores and
// accumulators passing through L1 in between.)
constexpr int kInner = 12;

// Loop steps of a chunk's score and value loops for n_q vectors (the prefetcher spreads the
// next chunk's lines over them), per register block as ScoreGroupsNq and ValueRows run it: d
// steps per 4 key groups, and n_keys steps per 64 dims (128 for blocks of 1-2 vectors).
inline int ChunkSteps(int n_q, int n_keys, int d) {
  const int n_groups = (n_keys + 15) / 16, nz = (d + 15) / 16;
  int steps = 0;
  for (int v = 0; v < n_q; v += 6) {
    const int dv = std::min(6, n_q - v) <= 2 ? 8 : 4;
    steps += d * ((n_groups + 3) / 4) + n_keys * ((nz + dv - 1) / dv);
  }
  return std::max(1, steps);
}

struct Workspace {
  std::vector<float> scores, staged_k, staged_v, qpack;
  std::vector<const void*> vptr;
};

template <DType D>
void Attend(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head, const TileRow* rows,
            int n_rows) {
  static thread_local Workspace ws;
  const int group = p.n_heads / p.n_kv_heads, d = p.head_dim, bt = kv.block_tokens;
  // Chunks of whole blocks, at least 64 keys; blocks of a multiple of 16 keys are read in place.
  const int blocks_per_chunk = std::max(1, (64 + bt - 1) / bt);
  const int chunk = blocks_per_chunk * bt, chunk_pad = (chunk + 15) / 16 * 16;
  const int n_vec = n_rows * group;
  const bool direct = bt % 16 == 0;
  ws.scores.resize(static_cast<size_t>(std::min(n_vec, kInner)) * chunk_pad);
  ws.qpack.resize(static_cast<size_t>(n_vec) * d);
  ws.vptr.resize(chunk);
  if (!direct) {
    ws.staged_k.resize(static_cast<size_t>(d) * chunk_pad);
    ws.staged_v.resize(static_cast<size_t>(chunk) * d);
  }
  const Elem<D>* keys = static_cast<const Elem<D>*>(kv.k);
  const Elem<D>* values = static_cast<const Elem<D>*>(kv.v);

  float m[kTileVectors], l[kTileVectors];
  const float* qv[kTileVectors];
  float* acc[kTileVectors];
  float* sv[kTileVectors];
  float corr[kTileVectors];
  int valid_keys[kTileVectors], vec_of[kTileVectors];
  int32_t max_pos = -1;
  for (int r = 0; r < n_rows; ++r) {
    max_pos = std::max(max_pos, rows[r].position);
    for (int g = 0; g < group; ++g) {
      const int v = r * group + g;
      m[v] = -std::numeric_limits<float>::infinity();
      l[v] = 0;
      std::memset(rows[r].out + (kv_head * group + g) * d, 0, d * sizeof(float));
    }
  }
  KeyGroup<D> kg[64];
  PackedSet packed;
  int first_keys[kTileVectors];
  KeyGroup<DType::kF32> kgs[64];
  // Chunks are aligned to the first position attended (a split's suffix starts at kv_begin).
  for (int64_t c0 = FirstChunk(rows, n_rows, seq.kv_begin, chunk); c0 <= max_pos; c0 += chunk) {
    const int n_keys = static_cast<int>(std::min<int64_t>(chunk, max_pos + 1 - c0));
    const int n_groups = (n_keys + 15) / 16;
    // Query vectors of rows that attend keys of this chunk (a row's vectors are consecutive).
    int n_active = 0;
    for (int r = 0; r < n_rows; ++r) {
      int lo, hi;
      if (!RowKeys(rows[r], c0, n_keys, &lo, &hi)) continue;
      for (int g = 0; g < group; ++g, ++n_active) {
        qv[n_active] = rows[r].q + (kv_head * group + g) * d;
        vec_of[n_active] = r * group + g;
        sv[n_active] = ws.scores.data() + static_cast<int64_t>(n_active % kInner) * chunk_pad;  // a block's rows
        acc[n_active] = rows[r].out + (kv_head * group + g) * d;
        first_keys[n_active] = lo;
        valid_keys[n_active] = hi;
      }
    }
    if (!packed.Same(qv, n_active)) {
      PackQueries(qv, n_active, d, ws.qpack.data());
      packed.Set(qv, n_active);
    }
    Prefetcher pf;
    if (direct) {  // keys and value rows of the chunk in place
      pf.PlanNextChunk(kv, seq, kv_head, c0 + chunk, std::min<int64_t>(c0 + 2 * chunk, max_pos + 1),
                       ChunkSteps(n_active, n_keys, d));
      ValueRowPointers(kv, seq, kv_head, values, c0, n_keys, ws.vptr.data());
      for (int g = 0; g < n_groups; ++g) {
        const int64_t pos = c0 + 16 * g;
        kg[g] = {keys + kv.KeyIndex(seq.block_table[pos / bt], static_cast<int>(pos % bt), kv_head, 0),
                 std::min(16, n_keys - 16 * g)};
      }
    } else {
      for (int j = 0; j < n_keys; ++j) {
        const int64_t pos = c0 + j;
        const int32_t block = seq.block_table[pos / bt];
        for (int i = 0; i < d; ++i) ws.staged_k[i * chunk_pad + j] = kv.KeyAt(block, static_cast<int>(pos % bt), kv_head, i);
        for (int i = 0; i < d; ++i) ws.staged_v[j * d + i] = kv.ValueAt(block, static_cast<int>(pos % bt), kv_head, i);
      }
      for (int j = 0; j < n_keys; ++j) ws.vptr[j] = ws.staged_v.data() + j * d;
      for (int g = 0; g < n_groups; ++g) kgs[g] = {ws.staged_k.data() + 16 * g, std::min(16, n_keys - 16 * g)};
    }
    // Per few register blocks: scores, softmax over each vector's causal keys, weighted values,
    // while the chunk's K and V stay in L1.
    for (int b0 = 0; b0 < n_active; b0 += kInner) {
      const int nb = std::min(kInner, n_active - b0);
      const float* qp = ws.qpack.data() + static_cast<int64_t>(b0) * d;
      if (direct) ScoreGroups<D>(qp, nb, kg, bt, n_groups, d, p.scale, sv[b0], chunk_pad, &pf);
      else ScoreGroups<DType::kF32>(qp, nb, kgs, chunk_pad, n_groups, d, p.scale, sv[b0], chunk_pad, &pf);
      for (int a = b0; a < b0 + nb; ++a)
        corr[a] = SoftmaxChunk(sv[a] + first_keys[a], valid_keys[a] - first_keys[a], &m[vec_of[a]], &l[vec_of[a]]);
      if (direct) {
        WeightedValues<D>(nb, acc + b0, corr + b0, sv + b0, first_keys + b0, valid_keys + b0,
                          reinterpret_cast<const Elem<D>* const*>(ws.vptr.data()), d, &pf);
      } else {
        WeightedValues<DType::kF32>(nb, acc + b0, corr + b0, sv + b0, first_keys + b0, valid_keys + b0,
                                    reinterpret_cast<const float* const*>(ws.vptr.data()), d, &pf);
      }
    }
    pf.Rest();
  }
  FinishTile(rows, n_rows, group, kv_head, d, m, l);
}

}  // namespace

void AttendTileAvx512(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                      const TileRow* rows, int n_rows) {
  switch (kv.dtype) {
    case DType::kBF16: return Attend<DType::kBF16>(p, kv, seq, kv_head, rows, n_rows);
    case DType::kF16: return Attend<DType::kF16>(p, kv, seq, kv_head, rows, n_rows);
    default: return Attend<DType::kF32>(p, kv, seq, kv_head, rows, n_rows);
  }
}

}  // namespace radixlm::kernels::attn
