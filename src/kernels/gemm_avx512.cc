// AVX-512 micro-kernels: f32 and bf16 weights (zmm FMA; vdpbf16ps for bf16 activations) and
// the quantised formats (VNNI vpdpbusd on the repacked panels). One zmm holds a panel's 16
// outputs; each lane runs exactly the scalar oracle's operation sequence (gemm_scalar.cc).
// Compiled per function for the AVX-512 subsets used, so one binary runs anywhere; called
// only after dispatch (gemm::TierOf).
#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_internal.h"
#include "kernels/vec_avx512.h"

// The AVX-512 level (core::Isa::kAvx512: F, BW, VL, DQ); the VNNI and BF16 kernels add theirs,
// and run only where the CPU has them (gemm::TierOf).
#define RADIXLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define RADIXLM_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16")))
#define RADIXLM_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))

namespace radixlm::kernels::gemm {
namespace {

using core::DType;
using core::QuantScales;

// ---- f32 and bf16 weights ------------------------------------------------------------------

// Decode streams every weight once from DRAM: the few-row quantised kernels fetch this far ahead
// of the bytes they compute on, a few lines at a time (a burst of prefetches overflows the miss
// buffers and is dropped). The float kernels' single long stream per panel needs no help.
constexpr int kPrefetchAhead = 2048;

enum class FloatKind { kF32, kBf16Exact };

template <FloatKind KIND, int MR, int NP>
RADIXLM_AVX512 void FloatMicro(const MicroArgs& a) {
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* pan[NP];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) pan[p] = a.seg->panel(a.p0 + p);
  if constexpr (KIND == FloatKind::kF32) {
    for (int64_t k = 0; k < a.K; ++k) {
      __m512 w[NP];
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) w[p] = _mm512_loadu_ps(reinterpret_cast<const float*>(pan[p]) + k * kPanelCols);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512 x = _mm512_set1_ps(a.xf[r * a.ldx + k]);
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_fmadd_ps(x, w[p], acc[r * NP + p]);
      }
    }
  } else if constexpr (KIND == FloatKind::kBf16Exact) {
    // A pair vector holds (k even, k odd) per lane: even = low half shifted up, odd = high half.
    const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const int64_t full_pairs = a.K / 2;
    for (int64_t kk = 0; kk < full_pairs; ++kk) {
      __m512 we[NP], wo[NP];
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        const __m512i v = _mm512_loadu_si512(pan[p] + kk * 64);
        we[p] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        wo[p] = _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask));
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512 x0 = _mm512_set1_ps(a.xf[r * a.ldx + 2 * kk]);
        const __m512 x1 = _mm512_set1_ps(a.xf[r * a.ldx + 2 * kk + 1]);
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p) {
          acc[r * NP + p] = _mm512_fmadd_ps(x0, we[p], acc[r * NP + p]);
          acc[r * NP + p] = _mm512_fmadd_ps(x1, wo[p], acc[r * NP + p]);
        }
      }
    }
    if (a.K % 2) {  // the last k has no odd partner
      const int64_t kk = full_pairs;
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(pan[p] + kk * 64), 16));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
          acc[r * NP + p] = _mm512_fmadd_ps(_mm512_set1_ps(a.xf[r * a.ldx + 2 * kk]), we, acc[r * NP + p]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(a.y + r * a.ldy + p * kPanelCols, acc[r * NP + p]);
}

// bf16 weights x bf16 activations: vdpbf16ps per pair of k (AVX512_BF16).
template <int MR, int NP>
RADIXLM_AVX512_BF16 void Bf16DotMicro(const MicroArgs& a) {
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* pan[NP];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) pan[p] = a.seg->panel(a.p0 + p);
  const int64_t pairs = (a.K + 1) / 2;
  for (int64_t kk = 0; kk < pairs; ++kk) {
    __m512bh w[NP];
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) w[p] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(pan[p] + kk * 64));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a.xb + r * a.ldxb + 2 * kk, 4);
      const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) acc[r * NP + p] = _mm512_dpbf16_ps(acc[r * NP + p], w[p], x);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(a.y + r * a.ldy + p * kPanelCols, acc[r * NP + p]);
}

// ---- quantised weights -----------------------------------------------------------------------

// The eight code vectors (k-groups 0..7, bytes 4r + i) of one 32-element chunk.
template <DType T>
RADIXLM_AVX512 inline void UnpackChunk(const uint8_t* chunk, __m512i* codes) {
  constexpr QuantLayout L = LayoutOf(T);
  if constexpr (L.f.bits == 8) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) codes[g] = _mm512_loadu_si512(chunk + 64 * g);
  } else if constexpr (L.low_bytes == 256) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i raw = _mm512_loadu_si512(chunk + 64 * v);
      codes[v] = _mm512_and_si512(raw, m4);
      codes[v + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    }
  } else {
    const __m512i m2 = _mm512_set1_epi8(0x03);
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const __m512i raw = _mm512_loadu_si512(chunk + 64 * v);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) codes[v + 2 * j] = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * j), m2);
    }
  }
  if constexpr (L.high_bits > 0) {
    // Group g's high bits: a word shift moves them to bit low_bits of their own byte (the
    // mask drops whatever the shift carried in from the neighbouring byte).
    constexpr int E = L.high_bits, kPerVector = 8 / E;
    const __m512i mask = _mm512_set1_epi8(static_cast<char>(((1 << E) - 1) << L.low_bits));
    __m512i hv[E];
#pragma GCC unroll 2
    for (int v = 0; v < E; ++v) hv[v] = _mm512_loadu_si512(chunk + L.low_bytes + 64 * v);
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      constexpr int kLow = L.low_bits;
      const int shift = kLow - (g % kPerVector) * E;
      const __m512i h = shift >= 0 ? _mm512_slli_epi16(hv[g / kPerVector], shift)
                                   : _mm512_srli_epi16(hv[g / kPerVector], -shift);
      codes[g] = _mm512_ternarylogic_epi32(codes[g], h, mask, 0xF8);  // codes | (h & mask)
    }
  }
}

RADIXLM_AVX512 inline __m512 F16Vec(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <DType T, int MR, int NP>
RADIXLM_AVX512_VNNI void QuantMicro(const MicroArgs& a) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr core::QuantFormat F = L.f;
  constexpr int kNs = F.n_subs();
  constexpr int kSubsPerChunk = 32 / F.sub;      // 1 or 2
  constexpr int kGroupsPerSub = F.sub / 4;       // 8 or 4
  const int64_t n_blocks = a.K / F.block;
  const int64_t ldd = a.ldq / 32;
  __m512 acc[MR * NP];
#pragma GCC unroll 32
  for (int i = 0; i < MR * NP; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* pan[NP];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) pan[p] = a.seg->panel(a.p0 + p);
  for (int64_t bi = 0; bi < n_blocks; ++bi) {
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const uint8_t* blk = pan[p] + bi * L.block_bytes;
      // Decode streams every weight once from DRAM: fetch ahead of the data being computed, a
      // few lines per chunk (a burst of prefetches overflows the miss buffers and is dropped).
      if constexpr (MR <= 3)
        for (int off = 0; off < L.header_bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchAhead + off, _MM_HINT_T0);
      const __m512 dv = F16Vec(blk);
      __m512 dmv = _mm512_setzero_ps();
      if constexpr (F.scales == QuantScales::kBlockMin || F.scales == QuantScales::kSuperMin) dmv = F16Vec(blk + 32);
      for (int c = 0; c < F.block / 32; ++c) {
        __m512i codes[8];
        const uint8_t* chunk = blk + L.header_bytes + c * L.chunk_bytes;
        if constexpr (MR <= 3)
          for (int off = 0; off < L.chunk_bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(chunk) + kPrefetchAhead + off, _MM_HINT_T0);
        UnpackChunk<T>(chunk, codes);
#pragma GCC unroll 2
        for (int s = 0; s < kSubsPerChunk; ++s) {
          const int si = c * kSubsPerChunk + s;  // sub-block within the block
          __m512 ws = dv, mv = dmv;
          if constexpr (F.scales == QuantScales::kSuperMin) {
            ws = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + si * 16)))));
            mv = _mm512_mul_ps(dmv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + (kNs + si) * 16)))));
          } else if constexpr (F.scales == QuantScales::kSuperSigned) {
            ws = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + si * 16)))));
          }
          const int64_t e0 = bi * F.block + c * 32 + s * F.sub;  // first element of the sub-block
          const int64_t sub_index = e0 / F.sub;
#pragma GCC unroll 16
          for (int r = 0; r < MR; ++r) {
            const int8_t* xq = a.xq + r * a.ldq + e0;
            // Two partial sums (exact integers) halve the dependency chain.
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < kGroupsPerSub; g += 2) {
              int32_t x0, x1;
              std::memcpy(&x0, xq + 4 * g, 4);
              std::memcpy(&x1, xq + 4 * g + 4, 4);
              s0 = _mm512_dpbusd_epi32(s0, codes[s * kGroupsPerSub + g], _mm512_set1_epi32(x0));
              s1 = _mm512_dpbusd_epi32(s1, codes[s * kGroupsPerSub + g + 1], _mm512_set1_epi32(x1));
            }
            __m512i isum = _mm512_add_epi32(s0, s1);
            if constexpr (F.offset != 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(a.corr[r * a.ld_terms + sub_index]));
            const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a.xd[r * ldd + e0 / 32]));
            __m512& out = acc[r * NP + p];
            out = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, out);
            if constexpr (F.scales == QuantScales::kBlockMin)
              out = _mm512_fmadd_ps(mv, _mm512_set1_ps(a.dsum[r * a.ld_terms + sub_index]), out);
            if constexpr (F.scales == QuantScales::kSuperMin)
              out = _mm512_fnmadd_ps(mv, _mm512_set1_ps(a.dsum[r * a.ld_terms + sub_index]), out);
          }
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(a.y + r * a.ldy + p * kPanelCols, acc[r * NP + p]);
}

// ---- tables ------------------------------------------------------------------------------------
// Float types: rows 1..8 with 3 panels or 1, and 1 x 8, 2 x 4, 3 x 3 for decode.
#define RADIXLM_FLOAT_SHAPES(X)                    \
  X(1, 1) X(2, 1) X(3, 1) X(4, 1) X(5, 1) X(6, 1) X(7, 1) X(8, 1) \
  X(1, 3) X(2, 3) X(3, 3) X(4, 3) X(5, 3) X(6, 3) X(7, 3) X(8, 3) \
  X(1, 8) X(2, 4)

template <FloatKind KIND>
MicroFn FloatTable(int mr, int np) {
#define RADIXLM_CASE(R, P) \
  case R * 16 + P: return &FloatMicro<KIND, R, P>;
  switch (mr * 16 + np) { RADIXLM_FLOAT_SHAPES(RADIXLM_CASE) }
#undef RADIXLM_CASE
  return nullptr;
}

// The same shapes for bf16 x bf16.
MicroFn Bf16DotTable(int mr, int np) {
#define RADIXLM_CASE(R, P) \
  case R * 16 + P: return &Bf16DotMicro<R, P>;
  switch (mr * 16 + np) { RADIXLM_FLOAT_SHAPES(RADIXLM_CASE) }
#undef RADIXLM_CASE
  return nullptr;
}
#undef RADIXLM_FLOAT_SHAPES

// Quantised types: rows 1..8 with 1 panel, and 1 x 4, 2 x 2, 3 x 2 for decode.
template <DType T>
MicroFn QuantTable(int mr, int np) {
#define RADIXLM_CASE(R, P) \
  case R * 16 + P: return &QuantMicro<T, R, P>;
  switch (mr * 16 + np) {
    RADIXLM_CASE(1, 1) RADIXLM_CASE(2, 1) RADIXLM_CASE(3, 1) RADIXLM_CASE(4, 1)
    RADIXLM_CASE(5, 1) RADIXLM_CASE(6, 1) RADIXLM_CASE(7, 1) RADIXLM_CASE(8, 1)
    RADIXLM_CASE(1, 4) RADIXLM_CASE(2, 2) RADIXLM_CASE(3, 2)
  }
#undef RADIXLM_CASE
  return nullptr;
}

}  // namespace

MicroFn Avx512Micro(const WeightSegment& seg, int mr, int np) {
  switch (seg.storage) {
    case DType::kF32: return FloatTable<FloatKind::kF32>(mr, np);
    case DType::kBF16:
      return seg.bf16_mode == Bf16Mode::kBf16Activations ? Bf16DotTable(mr, np)
                                                        : FloatTable<FloatKind::kBf16Exact>(mr, np);
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

RADIXLM_AVX512 void QuantiseRowAvx512(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < K / 32; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32), x1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = avx512::ReduceMax(_mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1)));
    // The scalar quantiser's expressions, so both round identically.
    d[b] = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(InverseScale(amax));
    // Round to nearest even; a non-finite input (|x * id| not <= 127.5) quantises to 0.
    const __m512 lim = _mm512_set1_ps(127.5f);
    const __m512 s0 = _mm512_mul_ps(x0, id), s1 = _mm512_mul_ps(x1, id);
    const __m512i q0 = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(_mm512_andnot_ps(sign, s0), lim, _CMP_LE_OQ), s0);
    const __m512i q1 = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(_mm512_andnot_ps(sign, s1), lim, _CMP_LE_OQ), s1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtepi32_epi8(q1));
    sum16[2 * b] = avx512::ReduceAddI32(q0);
    sum16[2 * b + 1] = avx512::ReduceAddI32(q1);
  }
}

RADIXLM_AVX512_BF16 void Bf16RowAvx512(const float* x, int64_t K, uint16_t* xb) {
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k));
    _mm512_storeu_si512(xb + k, reinterpret_cast<__m512i>(v));
  }
  for (; k < K; ++k) xb[k] = ToBf16Activation(x[k]);
}

}  // namespace radixlm::kernels::gemm
