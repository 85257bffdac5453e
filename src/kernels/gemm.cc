#include "kernels/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"

namespace radixlm::kernels {
namespace {

using core::DType;

// K is processed in blocks so a panel slice (kKBlock x 16) stays in L1 while activation rows
// of an M block stream from L2. Fixed constants: the reduction order must not depend on M.
constexpr int64_t kKBlock = 256;
constexpr int64_t kMBlock = 120;  // a multiple of 6

// ---- micro-kernels -------------------------------------------------------------------------
// Each computes rows [MR] x panels [NP*16] over k in [k0, k1), accumulating into y when
// `accumulate` (k0 > 0), so each output element is one FMA chain in k order.

template <typename WT>
inline float LoadW(const WT* p) {
  if constexpr (sizeof(WT) == 4) return *p;
  else return core::Bf16ToF32(*p);
}

template <typename WT, int MR, int NP>
void MicroScalar(const float* x, int64_t ldx, const WT* const* panels, int64_t k0, int64_t k1,
                 float* y, int64_t ldy, bool accumulate) {
  float acc[MR][NP * kPanelCols];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NP * kPanelCols; ++c) acc[r][c] = accumulate ? y[r * ldy + c] : 0.f;
  for (int64_t k = k0; k < k1; ++k) {
    for (int p = 0; p < NP; ++p) {
      const WT* b = panels[p] + k * kPanelCols;
      for (int r = 0; r < MR; ++r) {
        const float a = x[r * ldx + k];
        for (int c = 0; c < kPanelCols; ++c) acc[r][p * kPanelCols + c] += a * LoadW(b + c);
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NP * kPanelCols; ++c) y[r * ldy + c] = acc[r][c];
}

template <typename WT>
__attribute__((target("avx2,fma"))) inline __m256 LoadW8(const WT* p) {
  if constexpr (sizeof(WT) == 4) {
    return _mm256_loadu_ps(p);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The accumulators are one flat array initialised on separate branches, with every loop
// marked for complete unrolling: with a 2-D array or a conditional initialiser gcc 12 keeps
// a stack copy of each accumulator and stores it every iteration (measured: 3x slower).
template <typename WT, int MR, int NP>
__attribute__((target("avx2,fma"))) void MicroAvx2(const float* x, int64_t ldx,
                                                   const WT* const* panels, int64_t k0,
                                                   int64_t k1, float* y, int64_t ldy,
                                                   bool accumulate) {
  constexpr int NC = NP * 2;
  __m256 acc[MR * NC];
  if (accumulate) {
#pragma GCC unroll 24
    for (int i = 0; i < MR * NC; ++i) acc[i] = _mm256_loadu_ps(y + (i / NC) * ldy + (i % NC) * 8);
  } else {
#pragma GCC unroll 24
    for (int i = 0; i < MR * NC; ++i) acc[i] = _mm256_setzero_ps();
  }
  const WT* pb[NP];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) pb[p] = panels[p] + k0 * kPanelCols;
  const float* xr = x + k0;
  for (int64_t k = k0; k < k1; ++k, ++xr) {
    __m256 b[NC];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      b[2 * p] = LoadW8(pb[p]);
      b[2 * p + 1] = LoadW8(pb[p] + 8);
      pb[p] += kPanelCols;
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(xr + r * ldx);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[r * NC + c] = _mm256_fmadd_ps(a, b[c], acc[r * NC + c]);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < MR * NC; ++i) _mm256_storeu_ps(y + (i / NC) * ldy + (i % NC) * 8, acc[i]);
}

template <typename WT>
using MicroFn = void (*)(const float*, int64_t, const WT* const*, int64_t, int64_t, float*,
                         int64_t, bool);

// Panels per call for a row chunk of `mr` rows: few rows get more panels so there are enough
// independent FMA chains to hide latency (decode, M = 1, uses 4 panels = 8 chains).
constexpr int PanelsFor(int mr) { return mr == 1 ? 4 : mr == 2 ? 3 : mr == 3 ? 2 : 1; }

template <typename WT, int MR, int NP>
MicroFn<WT> Pick(bool avx2) {
  return avx2 ? &MicroAvx2<WT, MR, NP> : &MicroScalar<WT, MR, NP>;
}

template <typename WT>
MicroFn<WT> PickMicro(int mr, int np, bool avx2) {
  switch (mr * 8 + np) {
    case 1 * 8 + 4: return Pick<WT, 1, 4>(avx2);
    case 2 * 8 + 3: return Pick<WT, 2, 3>(avx2);
    case 3 * 8 + 2: return Pick<WT, 3, 2>(avx2);
    case 1 * 8 + 1: return Pick<WT, 1, 1>(avx2);
    case 2 * 8 + 1: return Pick<WT, 2, 1>(avx2);
    case 3 * 8 + 1: return Pick<WT, 3, 1>(avx2);
    case 4 * 8 + 1: return Pick<WT, 4, 1>(avx2);
    case 5 * 8 + 1: return Pick<WT, 5, 1>(avx2);
    case 6 * 8 + 1: return Pick<WT, 6, 1>(avx2);
  }
  RADIXLM_CHECK_MSG(false, "no GEMM micro-kernel for this shape");
  return nullptr;
}

// Computes rows [m0, m1) x panels [p0, p1) into y (full width ldy, columns from p0*16).
// Loop order (k block, m block, panel, row chunk): a panel's k-slice (16 KB f32) stays in L1
// while the row chunks of the m block (<= 120 KB of activations) stream from L2.
template <typename WT>
void GemmPanels(const float* x, int64_t ldx, const PackedWeight& w, int64_t m0, int64_t m1,
                int64_t p0, int64_t p1, float* y, int64_t ldy) {
  const bool avx2 = core::ActiveIsa() >= core::Isa::kAvx2;
  const int64_t K = w.n_in(), N = w.n_out();
  const bool ragged = (N % kPanelCols) != 0;
  const int64_t full_end = (ragged && p1 == w.n_panels()) ? p1 - 1 : p1;
  alignas(64) float tail[6 * kPanelCols];
  const WT* panels[4];
  // The ragged last panel goes through a 16-column tile.
  auto ragged_panel = [&](int64_t m, int mr, int64_t kb, int64_t ke) {
    const int64_t p = full_end, cols = N - p * kPanelCols;
    panels[0] = static_cast<const WT*>(w.panel(p));
    float* yt = y + m * ldy + p * kPanelCols;
    if (kb > 0)
      for (int r = 0; r < mr; ++r) std::memcpy(tail + r * kPanelCols, yt + r * ldy, cols * 4);
    PickMicro<WT>(mr, 1, avx2)(x + m * ldx, ldx, panels, kb, ke, tail, kPanelCols, kb > 0);
    for (int r = 0; r < mr; ++r) std::memcpy(yt + r * ldy, tail + r * kPanelCols, cols * 4);
  };
  for (int64_t kb = 0; kb < K; kb += kKBlock) {
    const int64_t ke = std::min(K, kb + kKBlock);
    for (int64_t mb = m0; mb < m1; mb += kMBlock) {
      const int64_t me = std::min(m1, mb + kMBlock);
      if (me - mb <= 3) {
        // Few rows (decode): several panels per call for enough independent FMA chains.
        const int mr = static_cast<int>(me - mb);
        const int np_full = PanelsFor(mr);
        for (int64_t p = p0; p < full_end;) {
          const int np = (p + np_full <= full_end) ? np_full : 1;
          for (int i = 0; i < np; ++i) panels[i] = static_cast<const WT*>(w.panel(p + i));
          PickMicro<WT>(mr, np, avx2)(x + mb * ldx, ldx, panels, kb, ke, y + mb * ldy + p * kPanelCols, ldy, kb > 0);
          p += np;
        }
        if (full_end < p1) ragged_panel(mb, mr, kb, ke);
        continue;
      }
      for (int64_t p = p0; p < full_end; ++p) {
        panels[0] = static_cast<const WT*>(w.panel(p));
        for (int64_t m = mb; m < me; m += 6) {
          const int mr = static_cast<int>(std::min<int64_t>(6, me - m));
          PickMicro<WT>(mr, 1, avx2)(x + m * ldx, ldx, panels, kb, ke, y + m * ldy + p * kPanelCols, ldy, kb > 0);
        }
      }
      if (full_end < p1)
        for (int64_t m = mb; m < me; m += 6) ragged_panel(m, static_cast<int>(std::min<int64_t>(6, me - m)), kb, ke);
    }
  }
}

}  // namespace

PackedWeight PackedWeight::Pack(const void* w, DType src_dtype, int64_t n_out, int64_t n_in,
                                DType storage) {
  return PackStacked(&w, &n_out, 1, src_dtype, n_in, storage);
}

PackedWeight PackedWeight::PackStacked(const void* const* parts, const int64_t* part_rows,
                                       int n_parts, DType src_dtype, int64_t n_in, DType storage) {
  RADIXLM_CHECK(storage == DType::kF32 || storage == DType::kBF16);
  PackedWeight pw;
  pw.n_in_ = n_in;
  pw.storage_ = storage;
  for (int i = 0; i < n_parts; ++i) pw.n_out_ += part_rows[i];
  pw.buf_.Resize(static_cast<size_t>(pw.n_panels()) * kPanelCols * n_in * core::DTypeSize(storage));
  int64_t row0 = 0;
  for (int i = 0; i < n_parts; ++i) {
    pw.PackRows(parts[i], src_dtype, row0, part_rows[i]);
    row0 += part_rows[i];
  }
  return pw;
}

void PackedWeight::PackRows(const void* w, DType src_dtype, int64_t row0, int64_t rows) {
  // Rows are converted 16 at a time (one panel's worth) so writes to the panel are contiguous.
  const size_t src_row_bytes = n_in_ * core::DTypeSize(src_dtype);
  std::vector<float> tile(static_cast<size_t>(kPanelCols) * n_in_);
  for (int64_t r = 0; r < rows;) {
    const int64_t n = row0 + r, p = n / kPanelCols, c0 = n % kPanelCols;
    const int64_t take = std::min<int64_t>(rows - r, kPanelCols - c0);
    for (int64_t i = 0; i < take; ++i)
      core::ConvertToF32(src_dtype, static_cast<const uint8_t*>(w) + (r + i) * src_row_bytes,
                         tile.data() + i * n_in_, n_in_);
    const size_t base = static_cast<size_t>(p) * n_in_ * kPanelCols + c0;
    for (int64_t k = 0; k < n_in_; ++k)
      for (int64_t i = 0; i < take; ++i) {
        const float v = tile[i * n_in_ + k];
        if (storage_ == DType::kF32) buf_.as<float>()[base + k * kPanelCols + i] = v;
        else buf_.as<uint16_t>()[base + k * kPanelCols + i] = core::F32ToBf16(v);
      }
    r += take;
  }
}

float PackedWeight::At(int64_t n, int64_t k) const {
  const size_t idx = (static_cast<size_t>(n / kPanelCols) * n_in_ + k) * kPanelCols + n % kPanelCols;
  return storage_ == DType::kF32 ? buf_.as<float>()[idx] : core::Bf16ToF32(buf_.as<uint16_t>()[idx]);
}

void PackedWeight::ReadRow(int64_t n, float* out) const {
  const size_t base = static_cast<size_t>(n / kPanelCols) * n_in_ * kPanelCols + n % kPanelCols;
  if (storage_ == DType::kF32) {
    const float* p = buf_.as<float>() + base;
    for (int64_t k = 0; k < n_in_; ++k) out[k] = p[k * kPanelCols];
  } else {
    const uint16_t* p = buf_.as<uint16_t>() + base;
    for (int64_t k = 0; k < n_in_; ++k) out[k] = core::Bf16ToF32(p[k * kPanelCols]);
  }
}

void Gemm(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const PackedWeight& w,
          float* y, int64_t ldy) {
  if (M <= 0) return;
  // Split output panels across threads in groups of 4 so few-row calls keep their wide
  // micro-kernel; with few panels per thread split rows instead.
  const int64_t groups = (w.n_panels() + 3) / 4;
  const bool split_rows = groups < 2 * pool.size() && M >= 6 * pool.size();
  pool.ParallelFor(split_rows ? (M + 5) / 6 : groups, [&](int, int64_t b, int64_t e) {
    int64_t m0 = 0, m1 = M, p0 = 0, p1 = w.n_panels();
    if (split_rows) { m0 = b * 6; m1 = std::min(M, e * 6); }
    else { p0 = b * 4; p1 = std::min(w.n_panels(), e * 4); }
    if (w.storage() == DType::kF32) GemmPanels<float>(x, ldx, w, m0, m1, p0, p1, y, ldy);
    else GemmPanels<uint16_t>(x, ldx, w, m0, m1, p0, p1, y, ldy);
  });
}

void GemmReference(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, float* y,
                   int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.n_out(); ++n) {
      double s = 0;
      for (int64_t k = 0; k < w.n_in(); ++k) s += static_cast<double>(x[m * ldx + k]) * w.At(n, k);
      y[m * ldy + n] = static_cast<float>(s);
    }
}

}  // namespace radixlm::kernels
