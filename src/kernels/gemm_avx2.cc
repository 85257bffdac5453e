// AVX2 micro-kernels: f32 and bf16 weights with f32 activations (ymm FMA), and the quantised
// formats with vpmaddubsw/vpmaddwd integer dot products (for CPUs without AVX-512 VNNI).
// A panel's 16 outputs are two ymm; each lane runs the scalar oracle's operation sequence.
#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_internal.h"

#define RADIXLM_AVX2_FMA __attribute__((target("avx2,fma,f16c")))

namespace radixlm::kernels::gemm {
namespace {

using core::DType;
using core::QuantScales;

// The accumulators are one flat array initialised on separate branches, with every loop
// marked for complete unrolling: with a 2-D array or a conditional initialiser gcc 12 keeps
// a stack copy of each accumulator and stores it every iteration (measured: 3x slower).
template <int MR, int NC>
RADIXLM_AVX2_FMA inline void FmaRows(const float* x, int64_t ldx, const __m256* b, __m256* acc) {
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const __m256 xr = _mm256_broadcast_ss(x + r * ldx);
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[r * NC + c] = _mm256_fmadd_ps(xr, b[c], acc[r * NC + c]);
  }
}

// bf16 weights: a panel's 16-byte pair vector (k even, k odd per lane) is read twice, the even
// k's halves shifted up, then the odd k's masked (no branch on k's parity); an odd K ends with
// a lone even step. The second read goes through a pointer the compiler cannot prove equal
// to the first: otherwise it keeps both raw vectors live, which at 6 x 16 (12 accumulators,
// 2 weight vectors, a broadcast and the mask) spills an accumulator to the stack every step
// (measured: 65% of the FMA peak instead of ~95%).
template <int MR, int NP>
RADIXLM_AVX2_FMA void Bf16PairStep(const uint8_t* const* pan, int64_t k0, bool odd_too, const float* x,
                                   int64_t ldx, __m256* acc) {
  constexpr int NC = NP * 2;
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 b[NC];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const __m256i* v = reinterpret_cast<const __m256i*>(pan[p] + (k0 / 2) * 64);
    b[2 * p] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(v), 16));
    b[2 * p + 1] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(v + 1), 16));
  }
  FmaRows<MR, NC>(x + k0, ldx, b, acc);
  if (!odd_too) return;
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const uint8_t* pv = pan[p] + (k0 / 2) * 64;
    asm("" : "+r"(pv));  // a fresh read, see above
    const __m256i* v = reinterpret_cast<const __m256i*>(pv);
    b[2 * p] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(v), hi_mask));
    b[2 * p + 1] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(v + 1), hi_mask));
  }
  FmaRows<MR, NC>(x + k0 + 1, ldx, b, acc);
}

template <bool BF16, int MR, int NP>
RADIXLM_AVX2_FMA void FloatMicro(const MicroArgs& a) {
  constexpr int NC = NP * 2;
  __m256 acc[MR * NC];
#pragma GCC unroll 24
  for (int i = 0; i < MR * NC; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* pan[NP];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) pan[p] = a.seg->panel(a.p0 + p);
  if constexpr (BF16) {
    for (int64_t k0 = 0; k0 < a.K; k0 += 2) Bf16PairStep<MR, NP>(pan, k0, k0 + 1 < a.K, a.xf, a.ldx, acc);
  } else {
    for (int64_t k = 0; k < a.K; ++k) {
      __m256 b[NC];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const float* w = reinterpret_cast<const float*>(pan[p]) + k * kPanelCols;
        b[2 * p] = _mm256_loadu_ps(w);
        b[2 * p + 1] = _mm256_loadu_ps(w + 8);
      }
      FmaRows<MR, NC>(a.xf + k, a.ldx, b, acc);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR * NC; ++i) _mm256_storeu_ps(a.y + (i / NC) * a.ldy + (i % NC) * 8, acc[i]);
}

// Codes of k-group g (0..7) of a chunk, rows 8 * half .. 8 * half + 7.
template <DType T>
RADIXLM_AVX2_FMA inline __m256i GroupCodes(const uint8_t* chunk, int g, int half) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr int low_bits = L.f.bits == 8 ? 8 : L.f.bits >= 4 ? 4 : 2;
  __m256i v;
  if constexpr (low_bits == 8) {
    v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * g + 32 * half));
  } else if constexpr (low_bits == 4) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * (g % 4) + 32 * half));
    v = _mm256_and_si256(_mm256_srli_epi16(raw, 4 * (g / 4)), _mm256_set1_epi8(0x0f));
  } else {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * (g % 2) + 32 * half));
    v = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * (g / 2)), _mm256_set1_epi8(0x03));
  }
  if constexpr (L.high_bits > 0) {  // see the layout: a word shift and a mask
    constexpr int E = L.high_bits, kPerVector = 8 / E;
    const __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + L.low_bytes + 64 * (g / kPerVector) + 32 * half));
    const int shift = low_bits - (g % kPerVector) * E;
    const __m256i h = shift >= 0 ? _mm256_slli_epi16(hv, shift) : _mm256_srli_epi16(hv, -shift);
    v = _mm256_or_si256(v, _mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(((1 << E) - 1) << low_bits))));
  }
  return v;
}

// Groups of 4 codes whose vpmaddubsw products can be summed in int16 before vpmaddwd widens
// them: each int16 lane holds two products of a code u <= 2^bits - 1 and an activation
// |q| <= 128, so kI16 groups stay below 2^15 (4-bit codes: 8 groups, a whole sub-block of 32;
// 5-bit: 4; 6-bit: 2). The sum is exact either way, so the sequence of f32 operations per
// sub-block is unchanged. 8-bit codes go through the sign trick (|w| up to 128): 1 group.
template <DType T>
constexpr int I16Groups() {
  constexpr core::QuantFormat F = core::FormatOf(T);
  if constexpr (F.bits == 8) return 1;
  constexpr int by_range = 32767 / (2 * ((1 << F.bits) - 1) * 128);
  return by_range < F.sub / 4 ? by_range : F.sub / 4;
}

// 8 bytes as 8 f32 lanes.
RADIXLM_AVX2_FMA inline __m256 U8Lanes(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// A sub-block's weight scale (and min scale, for the families with one) of the 8 lanes
// `half` of a block's header: d, d * sc or dmin * mn as the scalar oracle forms them.
template <DType T>
RADIXLM_AVX2_FMA inline void SubScales(const uint8_t* blk, int si, int half, __m256* ws, __m256* mv) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr core::QuantFormat F = L.f;
  constexpr int kNs = F.n_subs();
  const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * half)));
  __m256 dmv = _mm256_setzero_ps();  // m (block-min) or dmin (super-min)
  if constexpr (F.has_min()) dmv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * half)));
  *ws = dv;
  *mv = dmv;
  if constexpr (F.scales == QuantScales::kSuperMin) {
    *ws = _mm256_mul_ps(dv, U8Lanes(blk + 64 + si * 16 + 8 * half));
    *mv = _mm256_mul_ps(dmv, U8Lanes(blk + 64 + (kNs + si) * 16 + 8 * half));
  }
  if constexpr (F.scales == QuantScales::kSuperSigned)
    *ws = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 32 + si * 16 + 8 * half)))));
}

// Decode (one row) streams each panel from DRAM once, in runs of a few KB that the hardware
// prefetchers, which stop at 4 KB pages, ramp up on again and again: each panel's bytes a
// fixed distance ahead of chunk c of block bi are requested in software.
constexpr int kPrefetchAhead = 2048;
template <DType T, int U>
RADIXLM_AVX2_FMA inline void PrefetchChunks(const uint8_t* const* pan, int64_t bi, int c) {
  constexpr QuantLayout L = LayoutOf(T);
#pragma GCC unroll 4
  for (int u = 0; u < U; u += 2) {  // units 2j, 2j + 1 are the halves of one panel
    const char* next = reinterpret_cast<const char*>(pan[u] + bi * L.block_bytes + L.header_bytes + c * L.chunk_bytes + kPrefetchAhead);
    for (int i = 0; i < L.chunk_bytes; i += 64) _mm_prefetch(next + i, _MM_HINT_T0);
  }
}

// Rows [0, MR) x panels [p0, p0 + NP) in units of half a panel (8 outputs, one ymm per row):
// U units at a time over all of K, so the f32 accumulators, the int sums and the int16
// partial sums of MR x U fit the 16 ymm registers; each decoded group of codes is reused by
// all MR rows, each broadcast activation by all U units. Prefill takes 6 rows x 1 unit;
// decode 1 row x 4 units (two whole panels: one pass over their bytes, a quarter of the
// per-sub-block activation work).
template <DType T, int MR, int NP, int U>
RADIXLM_AVX2_FMA void QuantMicro(const MicroArgs& a) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr core::QuantFormat F = L.f;
  constexpr int kSubsPerChunk = 32 / F.sub;
  constexpr int kGroupsPerSub = F.sub / 4;
  constexpr int kI16 = I16Groups<T>();
  static_assert(kGroupsPerSub % kI16 == 0 && (2 * NP) % U == 0);
  const int64_t n_blocks = a.K / F.block;
  const int64_t ldd = a.ldq / 32;
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 1
  for (int u0 = 0; u0 < 2 * NP; u0 += U) {
    const uint8_t* pan[U];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) pan[u] = a.seg->panel(a.p0 + (u0 + u) / 2);
    __m256 acc[MR * U];
#pragma GCC unroll 8
    for (int i = 0; i < MR * U; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t bi = 0; bi < n_blocks; ++bi) {
      for (int c = 0; c < F.block / 32; ++c) {
        if constexpr (MR == 1) PrefetchChunks<T, U>(pan, bi, c);
#pragma GCC unroll 2
        for (int s = 0; s < kSubsPerChunk; ++s) {
          const int si = c * kSubsPerChunk + s;
          const int64_t e0 = bi * F.block + c * 32 + s * F.sub;
          const int64_t sub_index = e0 / F.sub;
          __m256i isum[MR * U];
#pragma GCC unroll 8
          for (int gc = 0; gc < kGroupsPerSub; gc += kI16) {
            __m256i part[MR * U];
#pragma GCC unroll 8
            for (int g = gc; g < gc + kI16; ++g) {
#pragma GCC unroll 4
              for (int u = 0; u < U; ++u) {
                const uint8_t* chunk = pan[u] + bi * L.block_bytes + L.header_bytes + c * L.chunk_bytes;
                __m256i w = GroupCodes<T>(chunk, s * kGroupsPerSub + g, (u0 + u) % 2);
                __m256i sign_src = w;
                if constexpr (F.bits == 8) {  // u8 = q + 128: back to signed, then |q| x sign(q) * x
                  sign_src = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
                  w = _mm256_abs_epi8(sign_src);
                }
#pragma GCC unroll 8
                for (int r = 0; r < MR; ++r) {
                  int32_t x4;
                  std::memcpy(&x4, a.xq + r * a.ldq + e0 + 4 * g, 4);
                  __m256i x = _mm256_set1_epi32(x4);
                  if constexpr (F.bits == 8) x = _mm256_sign_epi8(x, sign_src);
                  const __m256i prod = _mm256_maddubs_epi16(w, x);
                  part[r * U + u] = g == gc ? prod : _mm256_add_epi16(part[r * U + u], prod);
                }
              }
            }
#pragma GCC unroll 8
            for (int i = 0; i < MR * U; ++i) {
              const __m256i wide = _mm256_madd_epi16(part[i], ones);
              isum[i] = gc == 0 ? wide : _mm256_add_epi32(isum[i], wide);
            }
          }
#pragma GCC unroll 4
          for (int u = 0; u < U; ++u) {
            __m256 ws, mv;
            SubScales<T>(pan[u] + bi * L.block_bytes, si, (u0 + u) % 2, &ws, &mv);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
              __m256i is = isum[r * U + u];
              __m256& acc_ru = acc[r * U + u];
              // 8-bit codes were multiplied as signed values already: no offset to remove.
              if constexpr (F.offset != 0 && F.bits != 8)
                is = _mm256_sub_epi32(is, _mm256_set1_epi32(a.corr[r * a.ld_terms + sub_index]));
              const __m256 scale = _mm256_mul_ps(ws, _mm256_set1_ps(a.xd[r * ldd + e0 / 32]));
              acc_ru = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), scale, acc_ru);
              if constexpr (F.scales == QuantScales::kBlockMin)
                acc_ru = _mm256_fmadd_ps(mv, _mm256_set1_ps(a.dsum[r * a.ld_terms + sub_index]), acc_ru);
              if constexpr (F.scales == QuantScales::kSuperMin)
                acc_ru = _mm256_fnmadd_ps(mv, _mm256_set1_ps(a.dsum[r * a.ld_terms + sub_index]), acc_ru);
            }
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR * U; ++i) {
      const int r = i / U, u = u0 + i % U;
      _mm256_storeu_ps(a.y + r * a.ldy + (u / 2) * kPanelCols + 8 * (u % 2), acc[i]);
    }
  }
}

// Float types: rows 1..6 with 1 panel, and 1 x 4, 2 x 3, 3 x 2 for decode.
template <bool BF16>
MicroFn FloatTable(int mr, int np) {
#define RADIXLM_CASE(R, P) \
  case R * 16 + P: return &FloatMicro<BF16, R, P>;
  switch (mr * 16 + np) {
    RADIXLM_CASE(1, 1) RADIXLM_CASE(2, 1) RADIXLM_CASE(3, 1) RADIXLM_CASE(4, 1)
    RADIXLM_CASE(5, 1) RADIXLM_CASE(6, 1) RADIXLM_CASE(1, 4) RADIXLM_CASE(2, 3) RADIXLM_CASE(3, 2)
  }
#undef RADIXLM_CASE
  return nullptr;
}

// Quantised types: rows 1..6 with 1 panel a half at a time, and 1 x 2 for decode, its four
// halves at once.
template <DType T>
MicroFn QuantTable(int mr, int np) {
#define RADIXLM_CASE(R, P) \
  case R * 16 + P: return &QuantMicro<T, R, P, R == 1 && P == 2 ? 4 : 1>;
  switch (mr * 16 + np) {
    RADIXLM_CASE(1, 1) RADIXLM_CASE(2, 1) RADIXLM_CASE(3, 1) RADIXLM_CASE(4, 1) RADIXLM_CASE(5, 1)
    RADIXLM_CASE(6, 1) RADIXLM_CASE(1, 2)
  }
#undef RADIXLM_CASE
  return nullptr;
}

}  // namespace

MicroFn Avx2Micro(const WeightSegment& seg, int mr, int np) {
  switch (seg.storage) {
    case DType::kF32: return FloatTable<false>(mr, np);
    case DType::kBF16: return seg.bf16_mode == Bf16Mode::kExact ? FloatTable<true>(mr, np) : nullptr;
    case DType::kQ4_0: return QuantTable<DType::kQ4_0>(mr, np);
    case DType::kQ4_1: return QuantTable<DType::kQ4_1>(mr, np);
    case DType::kQ5_0: return QuantTable<DType::kQ5_0>(mr, np);
    case DType::kQ5_1: return QuantTable<DType::kQ5_1>(mr, np);
    case DType::kQ8_0: return QuantTable<DType::kQ8_0>(mr, np);
    case DType::kQ2_K: return QuantTable<DType::kQ2_K>(mr, np);
    case DType::kQ3_K: return QuantTable<DType::kQ3_K>(mr, np);
    case DType::kQ4_K: return QuantTable<DType::kQ4_K>(mr, np);
    case DType::kQ5_K: return QuantTable<DType::kQ5_K>(mr, np);
    case DType::kQ6_K: return QuantTable<DType::kQ6_K>(mr, np);
    case DType::kMXFP4: return QuantTable<DType::kMXFP4>(mr, np);
    default: return nullptr;
  }
}

RADIXLM_AVX2_FMA void QuantiseRowAvx2(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < K / 32; ++b) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + 8 * i);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    d[b] = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(InverseScale(amax));
    int32_t qi[32];
    // Round to nearest even; a non-finite input (|x * id| not <= 127.5) quantises to 0.
    for (int i = 0; i < 4; ++i) {
      const __m256 s = _mm256_mul_ps(v[i], id);
      const __m256 ok = _mm256_cmp_ps(_mm256_andnot_ps(sign, s), _mm256_set1_ps(127.5f), _CMP_LE_OQ);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qi + 8 * i), _mm256_cvtps_epi32(_mm256_and_ps(s, ok)));
    }
    int32_t s0 = 0, s1 = 0;
    for (int i = 0; i < 16; ++i) s0 += qi[i];
    for (int i = 16; i < 32; ++i) s1 += qi[i];
    for (int i = 0; i < 32; ++i) q[b * 32 + i] = static_cast<int8_t>(qi[i]);
    sum16[2 * b] = s0;
    sum16[2 * b + 1] = s1;
  }
}

}  // namespace radixlm::kernels::gemm
