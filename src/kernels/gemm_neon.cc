// ARM64 micro-kernels (compiled on aarch64 only): f32 and bf16 weights with f32 activations
// (NEON FMA, every ARMv8-A CPU), and the quantised formats with int8 dot products: sdot
// (FEAT_DotProd, core::Isa::kDotprod) and smmla (FEAT_I8MM, core::Isa::kI8mm). Each output
// lane runs the scalar oracle's operation sequence (gemm_scalar.cc): the integer sums of a
// sub-block are exact whichever instruction forms them, and the f32 steps are the oracle's
// fmas (fmla / fmls fuse as std::fma does).
//
// The panels are the x86 layout (gemm_internal.h): a k-group's 64-byte vector is four NEON
// registers of 4 columns x 4 consecutive codes, which is what sdot's by-element form takes
// against 4 activation bytes; smmla takes 2 columns x 8 codes, two k-groups zipped by words.
#include <arm_neon.h>

#include <cstring>

#include "kernels/gemm_internal.h"

#define RADIXLM_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#define RADIXLM_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))

namespace radixlm::kernels::gemm {
namespace {

using core::DType;
using core::QuantScales;

// ---- f32 and bf16 weights ----------------------------------------------------------------

// acc[r][c] = fma(x[r], b[c], acc[r][c]) for a step of k: one broadcast per row.
template <int MR, int NC>
inline void FmaRows(const float* x, int64_t ldx, const float32x4_t* b, float32x4_t* acc) {
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const float32x4_t xr = vdupq_n_f32(x[r * ldx]);
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) acc[r * NC + c] = vfmaq_f32(acc[r * NC + c], b[c], xr);
  }
}

// bf16 pairs (k even, k odd per column): the even k's halves shifted up, the odd k's masked;
// an odd K ends with a lone even step.
template <bool BF16, int MR, int NP>
void FloatMicro(const MicroArgs& a) {
  constexpr int NC = NP * 4;
  float32x4_t acc[MR * NC];
#pragma GCC unroll 24
  for (int i = 0; i < MR * NC; ++i) acc[i] = vdupq_n_f32(0.0f);
  const uint8_t* pan[NP];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) pan[p] = a.seg->panel(a.p0 + p);
  float32x4_t b[NC];
  if constexpr (BF16) {
    const uint32x4_t hi_mask = vdupq_n_u32(0xffff0000u);
    for (int64_t k0 = 0; k0 < a.K; k0 += 2) {
      uint32x4_t raw[NC];
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) raw[c] = vld1q_u32(reinterpret_cast<const uint32_t*>(pan[c / 4] + (k0 / 2) * 64) + 4 * (c % 4));
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) b[c] = vreinterpretq_f32_u32(vshlq_n_u32(raw[c], 16));
      FmaRows<MR, NC>(a.xf + k0, a.ldx, b, acc);
      if (k0 + 1 >= a.K) break;
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) b[c] = vreinterpretq_f32_u32(vandq_u32(raw[c], hi_mask));
      FmaRows<MR, NC>(a.xf + k0 + 1, a.ldx, b, acc);
    }
  } else {
    for (int64_t k = 0; k < a.K; ++k) {
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) b[c] = vld1q_f32(reinterpret_cast<const float*>(pan[c / 4]) + k * kPanelCols + 4 * (c % 4));
      FmaRows<MR, NC>(a.xf + k, a.ldx, b, acc);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR * NC; ++i) vst1q_f32(a.y + (i / NC) * a.ldy + (i % NC) * 4, acc[i]);
}

// ---- quantised weights ---------------------------------------------------------------------

// Codes of k-group g (0..7) of a chunk, columns 4q .. 4q + 3, as signed bytes: codes below 8
// bits are small non-negative values (the offset is removed from the sums, as the oracle
// does); 8-bit codes (u8 = q + 128) go back to q, so no offset term is needed.
template <DType T>
inline int8x16_t QuarterCodes(const uint8_t* chunk, int g, int q) {
  constexpr QuantLayout L = LayoutOf(T);
  uint8x16_t v;
  if constexpr (L.low_bits == 8) {
    v = vld1q_u8(chunk + 64 * g + 16 * q);
  } else if constexpr (L.low_bits == 4) {
    const uint8x16_t raw = vld1q_u8(chunk + 64 * (g % 4) + 16 * q);
    v = vandq_u8(vshlq_u8(raw, vdupq_n_s8(static_cast<int8_t>(-4 * (g / 4)))), vdupq_n_u8(0x0f));
  } else {
    const uint8x16_t raw = vld1q_u8(chunk + 64 * (g % 2) + 16 * q);
    v = vandq_u8(vshlq_u8(raw, vdupq_n_s8(static_cast<int8_t>(-2 * (g / 2)))), vdupq_n_u8(0x03));
  }
  if constexpr (L.high_bits > 0) {  // see the layout: a shift and a mask
    constexpr int E = L.high_bits, kPerVector = 8 / E;
    const uint8x16_t hv = vld1q_u8(chunk + L.low_bytes + 64 * (g / kPerVector) + 16 * q);
    const uint8x16_t h = vshlq_u8(hv, vdupq_n_s8(static_cast<int8_t>(L.low_bits - (g % kPerVector) * E)));
    v = vorrq_u8(v, vandq_u8(h, vdupq_n_u8(static_cast<uint8_t>(((1 << E) - 1) << L.low_bits))));
  }
  if constexpr (L.f.bits == 8) v = veorq_u8(v, vdupq_n_u8(0x80));
  return vreinterpretq_s8_u8(v);
}

// 4 bytes as 4 f32 lanes.
inline float32x4_t U8x4(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(w)))));
}
inline float32x4_t S8x4(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(vcreate_u8(w))))));
}
inline float32x4_t F16x4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)))); }

// A sub-block's weight scale and min scale for columns 4q .. 4q + 3 of a block's header, as
// the oracle forms them: ws = d or d * sc; mv = m (block-min) or dmin * mn (super-min, which
// the kernels subtract).
template <DType T>
inline void SubScales(const uint8_t* blk, int si, int q, float32x4_t* ws, float32x4_t* mv) {
  constexpr core::QuantFormat F = core::FormatOf(T);
  constexpr int kNs = F.n_subs();
  const float32x4_t dv = F16x4(blk + 8 * q);
  *ws = dv;
  *mv = vdupq_n_f32(0.0f);
  if constexpr (F.has_min()) *mv = F16x4(blk + 32 + 8 * q);
  if constexpr (F.scales == QuantScales::kSuperMin) {
    *ws = vmulq_f32(dv, U8x4(blk + 64 + si * 16 + 4 * q));
    *mv = vmulq_f32(*mv, U8x4(blk + 64 + (kNs + si) * 16 + 4 * q));
  }
  if constexpr (F.scales == QuantScales::kSuperSigned) *ws = vmulq_f32(dv, S8x4(blk + 32 + si * 16 + 4 * q));
}

// The oracle's f32 steps of one sub-block on 4 lanes: acc = fma(isum - corr, ws * xd, acc),
// then the min term. corr, xd and dsum are per lane (one row's value, or two rows' halves).
template <DType T>
inline float32x4_t SubStep(float32x4_t acc, int32x4_t is, float32x4_t ws, float32x4_t mv, int32x4_t corr,
                           float32x4_t xd, float32x4_t dsum) {
  constexpr core::QuantFormat F = core::FormatOf(T);
  if constexpr (F.offset != 0 && F.bits != 8) is = vsubq_s32(is, corr);
  acc = vfmaq_f32(acc, vcvtq_f32_s32(is), vmulq_f32(ws, xd));
  if constexpr (F.scales == QuantScales::kBlockMin) acc = vfmaq_f32(acc, mv, dsum);
  if constexpr (F.scales == QuantScales::kSuperMin) acc = vfmsq_f32(acc, mv, dsum);
  return acc;
}

// sdot by element: the lane is an immediate, hence one instantiation per lane.
template <DType T, int MR, int U, int Lane>
RADIXLM_DOT inline void DotGroup(const uint8_t* const* chunks, int g, int u0, const int8x16_t* xv, int32x4_t* isum) {
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const int8x16_t w = QuarterCodes<T>(chunks[u], g, (u0 + u) % 4);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) isum[r * U + u] = vdotq_laneq_s32(isum[r * U + u], w, xv[r], Lane);
  }
}

// Rows [0, MR) x panels [p0, p0 + NP) in units of a quarter panel (4 outputs, one register
// per row): U units at a time over all of K. Each row's 16 activation bytes (4 k-groups) are
// one register, each group's codes are reused by all MR rows.
template <DType T, int MR, int NP, int U>
RADIXLM_DOT void DotMicro(const MicroArgs& a) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr core::QuantFormat F = L.f;
  constexpr int kSubsPerChunk = 32 / F.sub;
  constexpr int kGroupsPerSub = F.sub / 4;
  static_assert((4 * NP) % U == 0 && kGroupsPerSub % 4 == 0);
  const int64_t n_blocks = a.K / F.block, ldd = a.ldq / 32;
#pragma GCC unroll 1
  for (int u0 = 0; u0 < 4 * NP; u0 += U) {
    const uint8_t* pan[U];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) pan[u] = a.seg->panel(a.p0 + (u0 + u) / 4);
    float32x4_t acc[MR * U];
#pragma GCC unroll 8
    for (int i = 0; i < MR * U; ++i) acc[i] = vdupq_n_f32(0.0f);
    for (int64_t bi = 0; bi < n_blocks; ++bi)
      for (int c = 0; c < F.block / 32; ++c) {
        const uint8_t* chunks[U];
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) chunks[u] = pan[u] + bi * L.block_bytes + L.header_bytes + c * L.chunk_bytes;
#pragma GCC unroll 2
        for (int s = 0; s < kSubsPerChunk; ++s) {
          const int si = c * kSubsPerChunk + s;
          const int64_t e0 = bi * F.block + c * 32 + s * F.sub, sub_index = e0 / F.sub;
          int32x4_t isum[MR * U];
#pragma GCC unroll 8
          for (int i = 0; i < MR * U; ++i) isum[i] = vdupq_n_s32(0);
#pragma GCC unroll 2
          for (int g4 = 0; g4 < kGroupsPerSub; g4 += 4) {
            int8x16_t xv[MR];
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) xv[r] = vld1q_s8(a.xq + r * a.ldq + e0 + 4 * g4);
            const int g = s * kGroupsPerSub + g4;
            DotGroup<T, MR, U, 0>(chunks, g, u0, xv, isum);
            DotGroup<T, MR, U, 1>(chunks, g + 1, u0, xv, isum);
            DotGroup<T, MR, U, 2>(chunks, g + 2, u0, xv, isum);
            DotGroup<T, MR, U, 3>(chunks, g + 3, u0, xv, isum);
          }
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) {
            float32x4_t ws, mv;
            SubScales<T>(pan[u] + bi * L.block_bytes, si, (u0 + u) % 4, &ws, &mv);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
              const int64_t t = r * a.ld_terms + sub_index;
              const int32x4_t corr = vdupq_n_s32(F.offset != 0 && F.bits != 8 ? a.corr[t] : 0);
              const float32x4_t dsum = vdupq_n_f32(F.has_min() ? a.dsum[t] : 0.0f);
              acc[r * U + u] = SubStep<T>(acc[r * U + u], isum[r * U + u], ws, mv, corr, vdupq_n_f32(a.xd[r * ldd + e0 / 32]), dsum);
            }
          }
        }
      }
#pragma GCC unroll 8
    for (int i = 0; i < MR * U; ++i) vst1q_f32(a.y + (i / U) * a.ldy + 4 * (u0 + i % U), acc[i]);
  }
}

// Two rows' values as [r0, r0, r1, r1] (the layout of smmla's 2 x 2 result).
inline float32x4_t RowPair(float r0, float r1) { return vcombine_f32(vdup_n_f32(r0), vdup_n_f32(r1)); }

// smmla: rows [0, MR) in pairs x panels [p0, p0 + NP) in units of a quarter panel, whose 4
// columns are two column pairs. Per 8 k (two k-groups): the groups' codes zipped by words give
// each column pair's 2 x 8 operand; each row pair's 2 x 8 activations are one register. The
// 2 x 2 result [r0c0, r0c1, r1c0, r1c1] takes the oracle's f32 steps per lane with the
// column's scale and the row's terms. A missing last row is zeros (its sums are discarded).
template <DType T, int MR, int NP, int U>
RADIXLM_I8MM void MmlaMicro(const MicroArgs& a) {
  constexpr QuantLayout L = LayoutOf(T);
  constexpr core::QuantFormat F = L.f;
  constexpr int kSubsPerChunk = 32 / F.sub;
  constexpr int kGroupsPerSub = F.sub / 4;
  constexpr int RP = (MR + 1) / 2;
  static_assert((4 * NP) % U == 0 && kGroupsPerSub % 2 == 0);
  const int64_t n_blocks = a.K / F.block, ldd = a.ldq / 32;
  const int8_t* xr[2 * RP];
#pragma GCC unroll 4
  for (int r = 0; r < 2 * RP; ++r) xr[r] = a.xq + (r < MR ? r : 0) * a.ldq;
#pragma GCC unroll 1
  for (int u0 = 0; u0 < 4 * NP; u0 += U) {
    const uint8_t* pan[U];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) pan[u] = a.seg->panel(a.p0 + (u0 + u) / 4);
    float32x4_t acc[RP * U * 2];
#pragma GCC unroll 16
    for (int i = 0; i < RP * U * 2; ++i) acc[i] = vdupq_n_f32(0.0f);
    for (int64_t bi = 0; bi < n_blocks; ++bi)
      for (int c = 0; c < F.block / 32; ++c) {
#pragma GCC unroll 2
        for (int s = 0; s < kSubsPerChunk; ++s) {
          const int si = c * kSubsPerChunk + s;
          const int64_t e0 = bi * F.block + c * 32 + s * F.sub, sub_index = e0 / F.sub;
          int32x4_t isum[RP * U * 2];
#pragma GCC unroll 16
          for (int i = 0; i < RP * U * 2; ++i) isum[i] = vdupq_n_s32(0);
#pragma GCC unroll 4
          for (int g = 0; g < kGroupsPerSub; g += 2) {
            int8x16_t xv[RP];
#pragma GCC unroll 2
            for (int rp = 0; rp < RP; ++rp) {
              const int8x8_t lo = vld1_s8(xr[2 * rp] + e0 + 4 * g);
              const int8x8_t hi = 2 * rp + 1 < MR ? vld1_s8(xr[2 * rp + 1] + e0 + 4 * g) : vdup_n_s8(0);
              xv[rp] = vcombine_s8(lo, hi);
            }
#pragma GCC unroll 8
            for (int u = 0; u < U; ++u) {
              const uint8_t* chunk = pan[u] + bi * L.block_bytes + L.header_bytes + c * L.chunk_bytes;
              const int32x4_t g0 = vreinterpretq_s32_s8(QuarterCodes<T>(chunk, s * kGroupsPerSub + g, (u0 + u) % 4));
              const int32x4_t g1 = vreinterpretq_s32_s8(QuarterCodes<T>(chunk, s * kGroupsPerSub + g + 1, (u0 + u) % 4));
              const int8x16_t b0 = vreinterpretq_s8_s32(vzip1q_s32(g0, g1)), b1 = vreinterpretq_s8_s32(vzip2q_s32(g0, g1));
#pragma GCC unroll 2
              for (int rp = 0; rp < RP; ++rp) {
                isum[(rp * U + u) * 2] = vmmlaq_s32(isum[(rp * U + u) * 2], xv[rp], b0);
                isum[(rp * U + u) * 2 + 1] = vmmlaq_s32(isum[(rp * U + u) * 2 + 1], xv[rp], b1);
              }
            }
          }
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) {
            float32x4_t ws, mv;
            SubScales<T>(pan[u] + bi * L.block_bytes, si, (u0 + u) % 4, &ws, &mv);
            const float32x4_t ws_pair[2] = {vcombine_f32(vget_low_f32(ws), vget_low_f32(ws)),
                                            vcombine_f32(vget_high_f32(ws), vget_high_f32(ws))};
            const float32x4_t mv_pair[2] = {vcombine_f32(vget_low_f32(mv), vget_low_f32(mv)),
                                            vcombine_f32(vget_high_f32(mv), vget_high_f32(mv))};
#pragma GCC unroll 2
            for (int rp = 0; rp < RP; ++rp) {
              const int r0 = 2 * rp, r1 = 2 * rp + 1 < MR ? 2 * rp + 1 : 2 * rp;
              const int64_t t0 = r0 * a.ld_terms + sub_index, t1 = r1 * a.ld_terms + sub_index;
              int32x4_t corr = vdupq_n_s32(0);
              if constexpr (F.offset != 0 && F.bits != 8) corr = vcombine_s32(vdup_n_s32(a.corr[t0]), vdup_n_s32(a.corr[t1]));
              const float32x4_t dsum = F.has_min() ? RowPair(a.dsum[t0], a.dsum[t1]) : vdupq_n_f32(0.0f);
              const float32x4_t xd = RowPair(a.xd[r0 * ldd + e0 / 32], a.xd[r1 * ldd + e0 / 32]);
#pragma GCC unroll 2
              for (int h = 0; h < 2; ++h) {
                float32x4_t& acc_i = acc[(rp * U + u) * 2 + h];
                acc_i = SubStep<T>(acc_i, isum[(rp * U + u) * 2 + h], ws_pair[h], mv_pair[h], corr, xd, dsum);
              }
            }
          }
        }
      }
#pragma GCC unroll 16
    for (int i = 0; i < RP * U * 2; ++i) {
      const int rp = i / (U * 2), u = u0 + (i / 2) % U, h = i % 2;
      float* out = a.y + 2 * rp * a.ldy + 4 * u + 2 * h;
      vst1_f32(out, vget_low_f32(acc[i]));
      if (2 * rp + 1 < MR) vst1_f32(out + a.ldy, vget_high_f32(acc[i]));
    }
  }
}

// Float types: rows 1..6 with 1 panel, and 1 x 4, 2 x 3, 3 x 2 for decode (gemm.cc's PanelsFor).
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

// Quantised types: rows 1..4 with 1 panel, and 1 x 2 for decode (all eight quarters at once).
// One row goes through sdot at either level: smmla would waste half its products on it.
template <DType T>
MicroFn QuantTable(bool mmla, int mr, int np) {
  if (mr == 1 && np == 2) return &DotMicro<T, 1, 2, 8>;
  if (np != 1) return nullptr;
  switch (mr) {
    case 1: return &DotMicro<T, 1, 1, 4>;
    case 2: return mmla ? &MmlaMicro<T, 2, 1, 4> : &DotMicro<T, 2, 1, 4>;
    case 3: return mmla ? &MmlaMicro<T, 3, 1, 2> : &DotMicro<T, 3, 1, 2>;
    case 4: return mmla ? &MmlaMicro<T, 4, 1, 2> : &DotMicro<T, 4, 1, 2>;
  }
  return nullptr;
}

}  // namespace

MicroFn NeonMicro(const WeightSegment& seg, core::Isa tier, int mr, int np) {
  const bool mmla = tier == core::Isa::kI8mm;
  switch (seg.storage) {
    case DType::kF32: return FloatTable<false>(mr, np);
    case DType::kBF16: return seg.bf16_mode == Bf16Mode::kExact ? FloatTable<true>(mr, np) : nullptr;
    case DType::kQ4_0: return QuantTable<DType::kQ4_0>(mmla, mr, np);
    case DType::kQ4_1: return QuantTable<DType::kQ4_1>(mmla, mr, np);
    case DType::kQ5_0: return QuantTable<DType::kQ5_0>(mmla, mr, np);
    case DType::kQ5_1: return QuantTable<DType::kQ5_1>(mmla, mr, np);
    case DType::kQ8_0: return QuantTable<DType::kQ8_0>(mmla, mr, np);
    case DType::kQ2_K: return QuantTable<DType::kQ2_K>(mmla, mr, np);
    case DType::kQ3_K: return QuantTable<DType::kQ3_K>(mmla, mr, np);
    case DType::kQ4_K: return QuantTable<DType::kQ4_K>(mmla, mr, np);
    case DType::kQ5_K: return QuantTable<DType::kQ5_K>(mmla, mr, np);
    case DType::kQ6_K: return QuantTable<DType::kQ6_K>(mmla, mr, np);
    case DType::kMXFP4: return QuantTable<DType::kMXFP4>(mmla, mr, np);
    default: return nullptr;
  }
}

}  // namespace radixlm::kernels::gemm
