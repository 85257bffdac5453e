#include "core/quant.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/status.h"

// Built with -ffp-contract=off (CMakeLists): y = S * u - M must round the product and the
// subtraction separately, as the format's definition does, not as one fused operation.

namespace radixlm::core {

void UnpackScaleMinK4(const uint8_t q[12], int j, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void UnpackScalesQ3K(const uint8_t q[12], int8_t out[16]) {
  // Low 4 bits: bytes 0..7 (low nibbles for scales 0..7, high nibbles for 8..15); high 2 bits:
  // bytes 8..11, two bits per scale, scale i in byte 8 + i % 4 at bit 2 * (i / 4).
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (q[i] & 0xF) : (q[i - 8] >> 4);
    const int high = (q[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

namespace {

void DecodeNibbles(const uint8_t qs[16], uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = qs[j] & 0xF;
    u[j + 16] = qs[j] >> 4;
  }
}

void AddQ5HighBits(const uint8_t qh_bytes[4], uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 32; ++j) u[j] |= static_cast<uint8_t>(((qh >> j) & 1) << 4);
}

// Q4_0, Q4_1, Q5_0, Q5_1: the scale, the min (the _1 formats), 32 nibbles and (Q5) their fifth bits.
template <typename Block>
void DecodeLegacy(const void* block, DecodedBlock* out) {
  auto* b = static_cast<const Block*>(block);
  out->d = b->d;
  if constexpr (requires { b->m; }) out->dmin = b->m;
  DecodeNibbles(b->qs, out->u);
  if constexpr (requires { b->qh; }) AddQ5HighBits(b->qh, out->u);
}

// Element order of Q2_K / Q3_K: two halves of 128; in each, four 2-bit planes (shift 0, 2, 4,
// 6) of 32 bytes, each plane two sub-blocks of 16 elements (bytes 0..15, then 16..31).
template <typename Fn>
void ForEachCrumb(const uint8_t qs[64], Fn&& fn) {
  for (int half = 0; half < 2; ++half)
    for (int plane = 0; plane < 4; ++plane)
      for (int l = 0; l < 32; ++l) {
        const int e = half * 128 + plane * 32 + l;
        fn(e, (qs[half * 32 + l] >> (2 * plane)) & 3, half * 4 + plane, l);
      }
}

// 2^(e - 128) as f16 bits: normal for e - 128 in [-14, 15], subnormal in [-24, -15]; 0 outside
// (such blocks are refused at load unless all their values are zero: FirstOutOfRange).
uint16_t Mxfp4ScaleF16(uint8_t e) {
  const int k = static_cast<int>(e) - 128;
  if (k >= -14 && k <= 15) return static_cast<uint16_t>((k + 15) << 10);
  if (k >= -24 && k < -14) return static_cast<uint16_t>(1u << (k + 24));
  return 0;
}

// Codes looked up to u = doubled E2M1 value + 12 (offset 12); d = 2^(e - 128), or 0 for a
// block of zeros.
void DecodeMxfp4(const BlockMXFP4* b, DecodedBlock* out) {
  bool nonzero = false;
  for (int j = 0; j < 16; ++j) {
    out->u[j] = static_cast<uint8_t>(kMxfp4Values[b->qs[j] & 0xF] + 12);
    out->u[j + 16] = static_cast<uint8_t>(kMxfp4Values[b->qs[j] >> 4] + 12);
    nonzero = nonzero || (b->qs[j] & 0x77) != 0;
  }
  out->d = nonzero ? Mxfp4ScaleF16(b->e) : 0;
}

}  // namespace

void DecodeBlock(DType t, const void* block, DecodedBlock* out) {
  for (int s = 0; s < 16; ++s) {
    out->sc[s] = 1;
    out->mn[s] = 0;
  }
  out->dmin = 0;
  switch (t) {
    case DType::kQ4_0: return DecodeLegacy<BlockQ4_0>(block, out);
    case DType::kQ4_1: return DecodeLegacy<BlockQ4_1>(block, out);
    case DType::kQ5_0: return DecodeLegacy<BlockQ5_0>(block, out);
    case DType::kQ5_1: return DecodeLegacy<BlockQ5_1>(block, out);
    case DType::kMXFP4: return DecodeMxfp4(static_cast<const BlockMXFP4*>(block), out);
    case DType::kQ8_0: {
      auto* b = static_cast<const BlockQ8_0*>(block);
      out->d = b->d;
      for (int j = 0; j < 32; ++j) out->u[j] = static_cast<uint8_t>(b->qs[j] + 128);
      return;
    }
    case DType::kQ2_K: {
      auto* b = static_cast<const BlockQ2_K*>(block);
      out->d = b->d;
      out->dmin = b->dmin;
      for (int s = 0; s < 16; ++s) {
        out->sc[s] = b->scales[s] & 0xF;
        out->mn[s] = b->scales[s] >> 4;
      }
      ForEachCrumb(b->qs, [&](int e, int q, int, int) { out->u[e] = static_cast<uint8_t>(q); });
      return;
    }
    case DType::kQ3_K: {
      auto* b = static_cast<const BlockQ3_K*>(block);
      out->d = b->d;
      int8_t sc[16];
      UnpackScalesQ3K(b->scales, sc);
      for (int s = 0; s < 16; ++s) out->sc[s] = sc[s];
      // The high bit of element (plane p of half h, byte l) is bit 4h + p of hmask[l]; the
      // format subtracts 4 where it is clear, i.e. u = q + 4 * bit with offset 4.
      ForEachCrumb(b->qs, [&](int e, int q, int bitpos, int l) {
        out->u[e] = static_cast<uint8_t>(q | (((b->hmask[l] >> bitpos) & 1) << 2));
      });
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      auto* b4 = static_cast<const BlockQ4_K*>(block);
      auto* b5 = static_cast<const BlockQ5_K*>(block);
      out->d = five ? b5->d : b4->d;
      out->dmin = five ? b5->dmin : b4->dmin;
      const uint8_t* scales = five ? b5->scales : b4->scales;
      const uint8_t* qs = five ? b5->qs : b4->qs;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, mn;
        UnpackScaleMinK4(scales, j, &sc, &mn);
        out->sc[j] = sc;
        out->mn[j] = mn;
      }
      // Four chunks of 64: 32 bytes, low nibbles first (sub-block 2c), high nibbles (2c + 1);
      // Q5_K's fifth bit of element l of sub-block s is bit s of qh[l].
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          uint8_t lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
          if (five) {
            lo |= static_cast<uint8_t>(((b5->qh[l] >> (2 * c)) & 1) << 4);
            hi |= static_cast<uint8_t>(((b5->qh[l] >> (2 * c + 1)) & 1) << 4);
          }
          out->u[64 * c + l] = lo;
          out->u[64 * c + 32 + l] = hi;
        }
      return;
    }
    case DType::kQ6_K: {
      auto* b = static_cast<const BlockQ6_K*>(block);
      out->d = b->d;
      for (int s = 0; s < 16; ++s) out->sc[s] = b->scales[s];
      // Two halves of 128: ql 64 bytes (low nibbles: elements 0..63, high nibbles: 64..127),
      // qh 32 bytes holding the top two bits of four elements each.
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b->ql + 64 * h;
        const uint8_t* qh = b->qh + 32 * h;
        uint8_t* u = out->u + 128 * h;
        for (int l = 0; l < 32; ++l) {
          u[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
          u[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
          u[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
          u[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
      }
      return;
    }
    default: break;
  }
  RADIXLM_CHECK_MSG(false, "not a quantised dtype");
}

SubScale SubScaleOf(const QuantFormat& f, const DecodedBlock& b, int s) {
  const float d = F16ToF32(b.d);
  switch (f.scales) {
    case QuantScales::kBlock: return {d, 0, false};
    case QuantScales::kBlockMin: return {d, F16ToF32(b.dmin), true};
    case QuantScales::kSuperMin:
      return {d * static_cast<float>(b.sc[s]), -(F16ToF32(b.dmin) * static_cast<float>(b.mn[s])), true};
    case QuantScales::kSuperSigned: return {d * static_cast<float>(b.sc[s]), 0, false};
  }
  return {};
}

void DequantizeRow(DType t, const void* x, float* y, int64_t n) {
  const QuantFormat f = FormatOf(t);
  RADIXLM_CHECK_MSG(f.block > 0, "not a quantised dtype");
  RADIXLM_CHECK(n % f.block == 0);
  const size_t bytes = BlockBytes(t);
  DecodedBlock b;
  for (int64_t i = 0; i < n / f.block; ++i) {
    DecodeBlock(t, static_cast<const uint8_t*>(x) + i * bytes, &b);
    for (int s = 0; s < f.n_subs(); ++s) {
      const SubScale ss = SubScaleOf(f, b, s);
      for (int j = s * f.sub; j < (s + 1) * f.sub; ++j) {
        const float v = ss.scale * static_cast<float>(static_cast<int>(b.u[j]) - f.offset);
        y[i * f.block + j] = ss.has_bias ? v + ss.bias : v;
      }
    }
  }
}

namespace {

// Index of the first element whose exponent bits (mask) are all set, or -1. Chunks of 256 are
// tested with a branch-free OR so the loop vectorises; the chunk that has one is then walked.
template <typename U>
int64_t FirstAllOnes(const U* x, int64_t n, U mask) {
  constexpr int64_t kChunk = 256;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    bool any = false;
    for (int64_t i = c; i < end; ++i) any |= (x[i] & mask) == mask;
    if (!any) continue;
    for (int64_t i = c; i < end; ++i)
      if ((x[i] & mask) == mask) return i;
  }
  return -1;
}

}  // namespace

int64_t FirstNonFinite(DType t, const void* data, int64_t numel) {
  switch (t) {
    case DType::kF32: return FirstAllOnes(static_cast<const uint32_t*>(data), numel, uint32_t{0x7F800000});
    case DType::kF16: return FirstAllOnes(static_cast<const uint16_t*>(data), numel, uint16_t{0x7C00});
    case DType::kBF16: return FirstAllOnes(static_cast<const uint16_t*>(data), numel, uint16_t{0x7F80});
    case DType::kI32: return -1;
    default: break;
  }
  // Byte offsets of a block's f16 scale fields (the Block* structs above).
  std::vector<size_t> fields;
  switch (t) {
    case DType::kQ4_0: case DType::kQ5_0: case DType::kQ8_0: fields = {0}; break;
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K: fields = {0, 2}; break;
    case DType::kQ2_K: fields = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}; break;
    case DType::kQ3_K: fields = {offsetof(BlockQ3_K, d)}; break;
    case DType::kQ6_K: fields = {offsetof(BlockQ6_K, d)}; break;
    default: return -1;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t block_bytes = BlockBytes(t);
  const int64_t blocks = numel / BlockElems(t);
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t f : fields) {
      uint16_t h;
      std::memcpy(&h, bytes + static_cast<size_t>(b) * block_bytes + f, 2);
      if ((h & 0x7C00) == 0x7C00) return b;
    }
  return -1;
}

int64_t FirstOutOfRange(DType t, const void* data, int64_t numel) {
  if (t != DType::kMXFP4) return -1;
  const auto* blocks = static_cast<const BlockMXFP4*>(data);
  for (int64_t b = 0; b < numel / kQK; ++b) {
    if (blocks[b].e >= 104 && blocks[b].e <= 143) continue;
    for (int j = 0; j < 16; ++j)
      if ((blocks[b].qs[j] & 0x77) != 0) return b;
  }
  return -1;
}

}  // namespace radixlm::core
