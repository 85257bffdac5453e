// Internals of kernels/gemm shared by its translation units (the driver, the packing of each
// weight type, and the micro-kernels of each ISA). Not part of the kernels' interface.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "core/status.h"
#include "core/quant.h"
#include "kernels/gemm.h"

namespace radixlm::kernels::gemm {

// ---- quantised panel layout ------------------------------------------------------------------
// Per panel (16 output rows) and weight block (f.block elements of each row):
//   header: the block's scales as 16-lane vectors, by family
//     block:         d[16] f16
//     block-min:     d[16] f16, m[16] f16
//     super-min:     d[16] f16, dmin[16] f16, sc[n_subs][16] u8, mn[n_subs][16] u8
//     super-signed:  d[16] f16, sc[n_subs][16] s8
//   then per chunk of 32 elements (k-groups g = 0..7 of 4 consecutive elements; group g's
//   64-byte vector holds byte 4r + i = code of row r, element 4g + i):
//     low plane:   bits >= 4: four 64-byte vectors, vector v's low nibbles group v and high
//                  nibbles group v + 4 (8 vectors of plain bytes for 8-bit codes);
//                  2-bit codes (Q2_K, Q3_K): two vectors, vector v's bits 2j..2j+1 group v + 2j
//     high bits:   the E = bits - low-plane bits above the low plane (bit 4 of 5-bit, bits 4-5
//                  of 6-bit, bit 2 of 3-bit) in E 64-byte vectors: group g's E bits of byte b
//                  sit in vector g / (8 / E), byte b, at bit (g % (8 / E)) * E. Extracting a
//                  group is a shift and a mask (no mask registers, which are slow on Zen).
struct QuantLayout {
  core::QuantFormat f;
  int header_bytes = 0;
  int low_bytes = 0;     // per chunk
  int low_bits = 0;      // 2, 4 or 8
  int high_bits = 0;     // E: 0, 1 or 2
  int chunk_bytes = 0;   // low plane + high planes
  int block_bytes = 0;   // header + chunks, per panel
};
constexpr QuantLayout LayoutOf(core::DType t) {
  QuantLayout l;
  l.f = core::FormatOf(t);
  const int ns = l.f.n_subs();
  switch (l.f.scales) {
    case core::QuantScales::kBlock: l.header_bytes = 32; break;
    case core::QuantScales::kBlockMin: l.header_bytes = 64; break;
    case core::QuantScales::kSuperMin: l.header_bytes = 64 + 32 * ns; break;
    case core::QuantScales::kSuperSigned: l.header_bytes = 32 + 16 * ns; break;
  }
  l.low_bits = l.f.bits == 8 ? 8 : l.f.bits >= 4 ? 4 : 2;
  l.low_bytes = l.low_bits == 8 ? 512 : l.low_bits == 4 ? 256 : 128;
  l.high_bits = l.f.bits - l.low_bits;
  l.chunk_bytes = l.low_bytes + 64 * l.high_bits;
  l.block_bytes = l.header_bytes + (l.f.block / 32) * l.chunk_bytes;
  return l;
}

// Repacks rows [0, rows) of a quantised matrix (GGUF row-major blocks) into segment panels.
void PackQuantised(const void* src, core::DType t, int64_t rows, int64_t n_in, WeightSegment* seg,
                   core::ThreadPool* pool);
// Row n (relative to the segment) of a quantised segment, dequantised exactly as the format
// defines (bitwise core::DequantizeRow of the source row), and its block b in canonical form.
void QuantisedReadRow(const WeightSegment& seg, int64_t n_in, int64_t n, float* out);
void QuantisedDecodeLane(const WeightSegment& seg, int64_t n_in, int64_t n, int64_t b, core::DecodedBlock* out);

// ---- prepared activations ----------------------------------------------------------------
// Quantised activation rows: per row, int8 codes [K] and an f32 scale per 32 elements
// (x ~= d * q, d = amax / 127, q = round-to-nearest-even(x * 127 / amax)), and per format
// family the sub-block terms the kernels add: corr = offset * sum(q) (int) and
// dsum = d * sum(q) (f32), one per sub-block of 16 or 32.
struct QuantActs {
  int64_t K = 0;
  std::vector<int8_t> q;        // [M, K]
  std::vector<float> d;         // [M, K / 32]
  struct Terms {
    int sub = 0, offset = 0;
    std::vector<int32_t> corr;  // [M, K / sub]
    std::vector<float> dsum;    // [M, K / sub]
  };
  std::vector<Terms> terms;
  const Terms& TermsFor(int sub, int offset) const;
};
// Quantises rows [m0, m1) of x into acts (sized by the caller), with the terms listed
// (entries with sub 0 are unused).
void QuantiseRows(const float* x, int64_t ldx, int64_t m0, int64_t m1, QuantActs* acts);
// One row: q[K], d[K / 32] and the sums of q over each 16 elements, sum16[K / 16].
// REQUIRES: K % 32 == 0.
void QuantiseRowScalar(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16);
// bf16 activation rows [m0, m1): xb[m, k] = bf16(x[m, k]) (RNE, denormals flushed as
// vcvtne2ps2bf16 does), K padded to even with zero.
void Bf16Rows(const float* x, int64_t ldx, int64_t K, int64_t m0, int64_t m1, uint16_t* xb, int64_t ldxb);

// ---- micro-kernels -----------------------------------------------------------------------------
// One call computes rows [0, mr) x panels [p0, p0 + np) of a segment over all of K and
// overwrites y (row stride ldy, column 0 = first column of panel p0, 16 columns per panel).
struct MicroArgs {
  const WeightSegment* seg = nullptr;
  int mr = 0, np = 0;            // rows and panels of this call (templated kernels know them)
  int64_t p0 = 0;
  int64_t K = 0;
  const float* xf = nullptr;     // f32 activations, row stride ldx
  int64_t ldx = 0;
  const uint16_t* xb = nullptr;  // bf16 activations (K padded to even), row stride ldxb
  int64_t ldxb = 0;
  const int8_t* xq = nullptr;    // quantised activations, row stride ldq (= K)
  const float* xd = nullptr;     // their scales, row stride K / 32
  const int32_t* corr = nullptr; // their sub-block terms, row stride ld_terms
  const float* dsum = nullptr;
  int64_t ldq = 0, ld_terms = 0;
  float* y = nullptr;
  int64_t ldy = 0;
};
using MicroFn = void (*)(const MicroArgs&);

// The ISA whose micro-kernels run a segment under the cap `isa`: AVX-512 needs F (float
// types), BW + VNNI (quantised) or BF16 (bf16 activations, which have no AVX2 path and fall
// back to the scalar emulation); otherwise AVX2 + FMA; otherwise scalar. On ARM: kNeon for
// float types, kI8mm or kDotprod for quantised ones (plain NEON: scalar).
core::Isa TierOf(const WeightSegment& seg, core::Isa isa);
// Row-chunk height for prefill-sized M, and panels per call for `rows` rows (1..MaxRows).
// Every tier provides kernels for rows 1..MaxRows with PanelsFor(MaxRows) and 1 panel, and
// for rows 1..3 with PanelsFor(rows).
int MaxRows(const WeightSegment& seg, core::Isa tier);
int PanelsFor(const WeightSegment& seg, core::Isa tier, int rows);
MicroFn PickMicro(const WeightSegment& seg, core::Isa tier, int mr, int np);

// Per-ISA tables (gemm_scalar.cc, gemm_avx2.cc, gemm_avx512.cc, gemm_neon.cc); nullptr where
// not provided.
MicroFn ScalarMicro(const WeightSegment& seg, int mr, int np);
#if RADIXLM_ARM
// tier: kNeon (f32 and bf16 weights), kDotprod or kI8mm (quantised weights).
MicroFn NeonMicro(const WeightSegment& seg, core::Isa tier, int mr, int np);
#else
inline MicroFn NeonMicro(const WeightSegment&, core::Isa, int, int) { return nullptr; }
#endif
#if RADIXLM_X86
MicroFn Avx2Micro(const WeightSegment& seg, int mr, int np);
MicroFn Avx512Micro(const WeightSegment& seg, int mr, int np);
// SIMD activation quantisation and bf16 rounding (bitwise the scalar ones).
void QuantiseRowAvx2(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16);
void QuantiseRowAvx512(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16);
void Bf16RowAvx512(const float* x, int64_t K, uint16_t* xb);
#else
// Not built for this CPU family (core::ActiveIsa() never gives an x86 level here, so TierOf
// never asks): no kernels; the quantisers are never called.
inline MicroFn Avx2Micro(const WeightSegment&, int, int) { return nullptr; }
inline MicroFn Avx512Micro(const WeightSegment&, int, int) { return nullptr; }
inline void QuantiseRowAvx2(const float*, int64_t, int8_t*, float*, int32_t*) { RADIXLM_CHECK_MSG(false, "an x86 kernel on another CPU"); }
inline void QuantiseRowAvx512(const float*, int64_t, int8_t*, float*, int32_t*) { RADIXLM_CHECK_MSG(false, "an x86 kernel on another CPU"); }
inline void Bf16RowAvx512(const float*, int64_t, uint16_t*) { RADIXLM_CHECK_MSG(false, "an x86 kernel on another CPU"); }
#endif

// 127 / amax, the activation quantiser's multiplier, or 0 for a block too small to scale (its
// reciprocal would overflow f32 and x * id be infinite or NaN): such a block quantises to 0.
inline float InverseScale(float amax) { return amax >= 1e-30f ? 127.0f / amax : 0.0f; }

// Scalar helpers shared by the oracles: vdpbf16ps's arithmetic on one lane (DAZ inputs, two
// FMAs odd then even, FTZ after each), and the activation quantiser's rounding.
float Bf16DotLane(float acc, uint16_t w_even, uint16_t w_odd, uint16_t x_even, uint16_t x_odd);
uint16_t ToBf16Activation(float x);

}  // namespace radixlm::kernels::gemm
