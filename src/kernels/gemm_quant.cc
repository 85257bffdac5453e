// Quantised weights in the GEMM: repacking GGUF blocks into panels (layout in
// gemm_internal.h), reading them back, and the activation forms (int8 blocks, bf16 rows).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_features.h"
#include "kernels/gemm_internal.h"

namespace radixlm::kernels::gemm {
namespace {

using core::DecodedBlock;
using core::QuantScales;

// Where lane r's code for element e of a block lives: the low plane byte and bit shift, and
// the high bits' byte and shift (offsets from the block's start).
struct CodeSlot {
  int64_t low_byte;
  int low_shift;
  int64_t high_byte;
  int high_shift;
};
CodeSlot SlotOf(const QuantLayout& l, int r, int e) {
  const int c = e / 32, g = (e % 32) / 4, i = e % 4;
  const int64_t chunk = l.header_bytes + static_cast<int64_t>(c) * l.chunk_bytes;
  const int byte = 4 * r + i;
  CodeSlot s;
  switch (l.low_bits) {
    case 8: s.low_byte = chunk + g * 64 + byte; s.low_shift = 0; break;
    case 4: s.low_byte = chunk + (g % 4) * 64 + byte; s.low_shift = 4 * (g / 4); break;
    default: s.low_byte = chunk + (g % 2) * 64 + byte; s.low_shift = 2 * (g / 2); break;
  }
  if (l.high_bits > 0) {
    const int per_vector = 8 / l.high_bits;
    s.high_byte = chunk + l.low_bytes + (g / per_vector) * 64 + byte;
    s.high_shift = (g % per_vector) * l.high_bits;
  } else {
    s.high_byte = -1;
    s.high_shift = 0;
  }
  return s;
}

void WriteLane(const QuantLayout& l, const DecodedBlock& b, int r, uint8_t* blk) {
  const int ns = l.f.n_subs();
  auto put16 = [&](int64_t off, uint16_t v) { std::memcpy(blk + off + 2 * r, &v, 2); };
  put16(0, b.d);
  switch (l.f.scales) {
    case QuantScales::kBlock: break;
    case QuantScales::kBlockMin: put16(32, b.dmin); break;
    case QuantScales::kSuperMin:
      put16(32, b.dmin);
      for (int s = 0; s < ns; ++s) {
        blk[64 + s * 16 + r] = static_cast<uint8_t>(b.sc[s]);
        blk[64 + (ns + s) * 16 + r] = static_cast<uint8_t>(b.mn[s]);
      }
      break;
    case QuantScales::kSuperSigned:
      for (int s = 0; s < ns; ++s) blk[32 + s * 16 + r] = static_cast<uint8_t>(static_cast<int8_t>(b.sc[s]));
      break;
  }
  const int low_mask = (1 << l.low_bits) - 1;
  for (int e = 0; e < l.f.block; ++e) {
    const CodeSlot s = SlotOf(l, r, e);
    blk[s.low_byte] |= static_cast<uint8_t>((b.u[e] & low_mask) << s.low_shift);
    if (l.high_bits > 0) blk[s.high_byte] |= static_cast<uint8_t>((b.u[e] >> l.low_bits) << s.high_shift);
  }
}

}  // namespace

void PackQuantised(const void* src, core::DType t, int64_t rows, int64_t n_in, WeightSegment* seg,
                   core::ThreadPool* pool) {
  const QuantLayout l = LayoutOf(t);
  RADIXLM_CHECK(n_in % l.f.block == 0);
  const int64_t n_blocks = n_in / l.f.block;
  seg->panel_bytes = n_blocks * l.block_bytes;
  seg->buf.Resize(static_cast<size_t>(seg->n_panels()) * seg->panel_bytes);  // zeroed: padding rows give 0
  const size_t row_bytes = core::RowBytes(t, n_in), src_block = core::BlockBytes(t);
  auto pack = [&](int64_t p0, int64_t p1) {
    DecodedBlock b;
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* panel = seg->buf.data() + p * seg->panel_bytes;
      for (int r = 0; r < kPanelCols && p * kPanelCols + r < rows; ++r) {
        const uint8_t* row = static_cast<const uint8_t*>(src) + (p * kPanelCols + r) * row_bytes;
        for (int64_t i = 0; i < n_blocks; ++i) {
          core::DecodeBlock(t, row + i * src_block, &b);
          WriteLane(l, b, r, panel + i * l.block_bytes);
        }
      }
    }
  };
  if (pool) pool->ParallelFor(seg->n_panels(), [&](int, int64_t b, int64_t e) { pack(b, e); });
  else pack(0, seg->n_panels());
}

void QuantisedDecodeLane(const WeightSegment& seg, int64_t n_in, int64_t n, int64_t bi, DecodedBlock* out) {
  const QuantLayout l = LayoutOf(seg.storage);
  const int r = static_cast<int>(n % kPanelCols), ns = l.f.n_subs();
  const uint8_t* blk = seg.panel(n / kPanelCols) + bi * l.block_bytes;
  auto get16 = [&](int64_t off) {
    uint16_t v;
    std::memcpy(&v, blk + off + 2 * r, 2);
    return v;
  };
  out->d = get16(0);
  out->dmin = 0;
  for (int s = 0; s < 16; ++s) {
    out->sc[s] = 1;
    out->mn[s] = 0;
  }
  switch (l.f.scales) {
    case QuantScales::kBlock: break;
    case QuantScales::kBlockMin: out->dmin = get16(32); break;
    case QuantScales::kSuperMin:
      out->dmin = get16(32);
      for (int s = 0; s < ns; ++s) {
        out->sc[s] = blk[64 + s * 16 + r];
        out->mn[s] = blk[64 + (ns + s) * 16 + r];
      }
      break;
    case QuantScales::kSuperSigned:
      for (int s = 0; s < ns; ++s) out->sc[s] = static_cast<int8_t>(blk[32 + s * 16 + r]);
      break;
  }
  for (int e = 0; e < l.f.block; ++e) {
    const CodeSlot s = SlotOf(l, r, e);
    int u = (blk[s.low_byte] >> s.low_shift) & ((1 << l.low_bits) - 1);
    if (l.high_bits > 0) u |= ((blk[s.high_byte] >> s.high_shift) & ((1 << l.high_bits) - 1)) << l.low_bits;
    out->u[e] = static_cast<uint8_t>(u);
  }
}

void QuantisedReadRow(const WeightSegment& seg, int64_t n_in, int64_t n, float* out) {
  const core::QuantFormat f = core::FormatOf(seg.storage);
  DecodedBlock b;
  for (int64_t i = 0; i < n_in / f.block; ++i) {
    QuantisedDecodeLane(seg, n_in, n, i, &b);
    // The same expression as core::DequantizeRow, so a row reads back bit for bit.
    for (int s = 0; s < f.n_subs(); ++s) {
      const core::SubScale ss = core::SubScaleOf(f, b, s);
      for (int j = s * f.sub; j < (s + 1) * f.sub; ++j) {
        const float v = ss.scale * static_cast<float>(static_cast<int>(b.u[j]) - f.offset);
        out[i * f.block + j] = ss.has_bias ? v + ss.bias : v;
      }
    }
  }
}

// ---- activations -----------------------------------------------------------------------------

void QuantiseRowScalar(const float* x, int64_t K, int8_t* q, float* d, int32_t* sum16) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    d[b] = amax / 127.0f;
    const float id = InverseScale(amax);
    for (int h = 0; h < 2; ++h) {
      int32_t s = 0;
      for (int i = 16 * h; i < 16 * h + 16; ++i) {
        // A non-finite input (NaN, inf) quantises to 0, as the SIMD paths do, never to an
        // undefined conversion.
        const float scaled = xb[i] * id;
        const int v = std::fabs(scaled) <= 127.5f ? static_cast<int>(std::nearbyint(scaled)) : 0;
        q[b * 32 + i] = static_cast<int8_t>(v);
        s += v;
      }
      sum16[2 * b + h] = s;
    }
  }
}

void QuantiseRows(const float* x, int64_t ldx, int64_t m0, int64_t m1, QuantActs* acts) {
  const int64_t K = acts->K;
  const core::Isa isa = core::ActiveIsa();
  const bool avx512 = core::AtLeast(isa, core::Isa::kAvx512) && core::DetectedCpu().avx512bw;
  thread_local std::vector<int32_t> sum16;
  sum16.resize(K / 16);
  for (int64_t m = m0; m < m1; ++m) {
    int8_t* q = acts->q.data() + m * K;
    float* d = acts->d.data() + m * (K / 32);
    if (avx512) QuantiseRowAvx512(x + m * ldx, K, q, d, sum16.data());
    else if (core::AtLeast(isa, core::Isa::kAvx2)) QuantiseRowAvx2(x + m * ldx, K, q, d, sum16.data());
    else QuantiseRowScalar(x + m * ldx, K, q, d, sum16.data());
    for (QuantActs::Terms& t : acts->terms) {
      if (t.sub == 0) continue;
      const int64_t n = K / t.sub;
      int32_t* corr = t.corr.data() + m * n;
      float* dsum = t.dsum.data() + m * n;
      for (int64_t s = 0; s < n; ++s) {
        const int32_t sum = t.sub == 16 ? sum16[s] : sum16[2 * s] + sum16[2 * s + 1];
        corr[s] = t.offset * sum;
        dsum[s] = d[s * t.sub / 32] * static_cast<float>(sum);
      }
    }
  }
}

uint16_t ToBf16Activation(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);  // zero, denormal
  return core::F32ToBf16(x);
}

void Bf16Rows(const float* x, int64_t ldx, int64_t K, int64_t m0, int64_t m1, uint16_t* xb, int64_t ldxb) {
  const bool avx512 = core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512_bf16;
  for (int64_t m = m0; m < m1; ++m) {
    uint16_t* out = xb + m * ldxb;
    if (avx512) {
      Bf16RowAvx512(x + m * ldx, K, out);
    } else {
      for (int64_t k = 0; k < K; ++k) out[k] = ToBf16Activation(x[m * ldx + k]);
    }
    if (K % 2) out[K] = 0;
  }
}

float Bf16DotLane(float acc, uint16_t w_even, uint16_t w_odd, uint16_t x_even, uint16_t x_odd) {
  auto daz = [](uint16_t h) { return (h & 0x7f80u) == 0 ? 0.0f * (h & 0x8000u ? -1.0f : 1.0f) : core::Bf16ToF32(h); };
  auto ftz = [](float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v; };
  acc = ftz(std::fma(daz(x_odd), daz(w_odd), acc));
  return ftz(std::fma(daz(x_even), daz(w_even), acc));
}

}  // namespace radixlm::kernels::gemm
