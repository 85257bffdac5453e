// Scalar micro-kernels: the oracle every SIMD path is compared with bit for bit, and the path
// on CPUs without AVX2. Each output element is computed with exactly the operation sequence
// the SIMD kernels use per lane (std::fma where they fuse), one element at a time.
#include <cmath>
#include <cstring>

#include "kernels/gemm_internal.h"

namespace radixlm::kernels::gemm {
namespace {

using core::DType;
using core::QuantScales;

// f32 activations times a panel of T: acc = fma(x[k], weight(w, k, c), acc) for k in order,
// weight(w, k, c) being column c's weight at k as f32.
template <typename T, typename Weight>
void MicroFmaF32(const MicroArgs& a, Weight weight) {
  for (int p = 0; p < a.np; ++p) {
    const T* w = reinterpret_cast<const T*>(a.seg->panel(a.p0 + p));
    for (int r = 0; r < a.mr; ++r)
      for (int c = 0; c < kPanelCols; ++c) {
        float acc = 0;
        for (int64_t k = 0; k < a.K; ++k) acc = std::fma(a.xf[r * a.ldx + k], weight(w, k, c), acc);
        a.y[r * a.ldy + p * kPanelCols + c] = acc;
      }
  }
}

void MicroF32(const MicroArgs& a) {
  MicroFmaF32<float>(a, [](const float* w, int64_t k, int c) { return w[k * kPanelCols + c]; });
}

void MicroBf16Exact(const MicroArgs& a) {
  MicroFmaF32<uint16_t>(
      a, [](const uint16_t* w, int64_t k, int c) { return core::Bf16ToF32(w[((k / 2) * kPanelCols + c) * 2 + (k & 1)]); });
}

void MicroBf16Dot(const MicroArgs& a) {
  const int64_t pairs = (a.K + 1) / 2;
  for (int p = 0; p < a.np; ++p) {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(a.seg->panel(a.p0 + p));
    for (int r = 0; r < a.mr; ++r)
      for (int c = 0; c < kPanelCols; ++c) {
        float acc = 0;
        const uint16_t* x = a.xb + r * a.ldxb;
        for (int64_t kk = 0; kk < pairs; ++kk) {
          const uint16_t* wp = w + (kk * kPanelCols + c) * 2;
          acc = Bf16DotLane(acc, wp[0], wp[1], x[2 * kk], x[2 * kk + 1]);
        }
        a.y[r * a.ldy + p * kPanelCols + c] = acc;
      }
  }
}

// Per sub-block: isum = sum u * q (exact) [- offset * sum q]; acc = fma(isum, ws * xd, acc);
// then, for formats with a min, acc = fma(mv, dsum, acc) with mv = m or -(dmin * mn).
void MicroQuant(const MicroArgs& a) {
  const core::DType t = a.seg->storage;
  const core::QuantFormat f = core::FormatOf(t);
  const int64_t n_blocks = a.K / f.block;
  core::DecodedBlock b;
  for (int p = 0; p < a.np; ++p)
    for (int c = 0; c < kPanelCols; ++c) {
      const int64_t n = (a.p0 + p) * kPanelCols + c;
      float acc[16] = {};
      for (int64_t bi = 0; bi < n_blocks; ++bi) {
        QuantisedDecodeLane(*a.seg, a.K, n, bi, &b);
        const float d = core::F16ToF32(b.d), dmin = core::F16ToF32(b.dmin);
        for (int s = 0; s < f.n_subs(); ++s) {
          const int64_t e0 = bi * f.block + s * f.sub, sub_index = e0 / f.sub;
          float ws = d;
          if (f.scales == QuantScales::kSuperMin || f.scales == QuantScales::kSuperSigned) ws = d * static_cast<float>(b.sc[s]);
          float mv = 0;
          if (f.scales == QuantScales::kBlockMin) mv = dmin;
          if (f.scales == QuantScales::kSuperMin) mv = -(dmin * static_cast<float>(b.mn[s]));
          for (int r = 0; r < a.mr; ++r) {
            const int8_t* xq = a.xq + r * a.ldq;
            int32_t isum = 0;
            for (int j = 0; j < f.sub; ++j) isum += static_cast<int32_t>(b.u[s * f.sub + j]) * xq[e0 + j];
            if (f.offset) isum -= a.corr[r * a.ld_terms + sub_index];
            const float xd = a.xd[r * (a.ldq / 32) + e0 / 32];
            acc[r] = std::fma(static_cast<float>(isum), ws * xd, acc[r]);
            if (f.has_min()) acc[r] = std::fma(mv, a.dsum[r * a.ld_terms + sub_index], acc[r]);
          }
        }
      }
      for (int r = 0; r < a.mr; ++r) a.y[r * a.ldy + p * kPanelCols + c] = acc[r];
    }
}

}  // namespace

MicroFn ScalarMicro(const WeightSegment& seg, int mr, int np) {
  if (mr < 1 || mr > 16 || np < 1) return nullptr;
  if (core::IsQuantized(seg.storage)) return &MicroQuant;
  if (seg.storage == DType::kF32) return &MicroF32;
  return seg.bf16_mode == Bf16Mode::kBf16Activations ? &MicroBf16Dot : &MicroBf16Exact;
}

}  // namespace radixlm::kernels::gemm
