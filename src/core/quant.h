// GGML's block-quantised weight formats as GGUF files store them (the layouts of
// ggml/src/ggml-common.h, dequantisation as ggml's dequantize_row_*): Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0 (blocks of 32), the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (super-blocks of 256
// with 16 or 8 sub-blocks) and MXFP4 (OCP microscaling FP4: 32 E2M1 values and one E8M0
// scale, gpt-oss's expert weights). These are everything inside the Q4_K_M / Q5_K_M / Q6_K /
// Q8_0 / MXFP4_MOE files people download.
//
// Every format decodes to one canonical form, which the kernels' repacking also reads:
//   unsigned integer codes u (2..8 bits) and, per sub-block of `sub` elements, a float scale S
//   and possibly a float bias, with the value
//     block scale    (Q4_0, Q5_0, Q8_0):  y = d * (u - offset)
//       MXFP4 too: its 4-bit E2M1 code q is looked up (ggml's kvalues_mxfp4, the E2M1 values
//       doubled: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives) to u = kvalue + 12, and its
//       E8M0 byte e is d = 2^(e - 128) (ggml's GGML_E8M0_TO_FP32_HALF) as an f16. That f16 is
//       exact for e in [104, 143]; a
//       block with a nonzero value outside that range is refused at load (FirstOutOfRange),
//       and a block whose values are all zero decodes to d = 0 whatever its e.
//     scale + min    (Q4_1, Q5_1):        y = d * u + m
//     super + min    (Q2_K, Q4_K, Q5_K):  y = (d * sc) * u - (dmin * mn)
//     super signed   (Q3_K, Q6_K):        y = (d * sc) * (u - offset)
//   d, m, dmin are the block's f16 fields; sc, mn the sub-block's small integers. Each product
//   is exact in f32 (an f16 times an integer of at most 8 bits), so this form is bit for bit
//   ggml's dequantisation order: a product, then one subtraction or addition.
// tests/reference/quant_ref.py reads the same bytes independently (numpy) and the test
// compares every format bitwise.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace radixlm::core {

inline constexpr int kQK = 32;    // elements per block of the *_0 / *_1 formats
inline constexpr int kQKK = 256;  // elements per K-quant super-block

#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
// Element j < 16 is the low nibble of qs[j], element j + 16 its high nibble.
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };
#pragma pack(pop)
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

enum class QuantScales : uint8_t {
  kBlock,          // d per block
  kBlockMin,       // d and m per block
  kSuperMin,       // d, dmin per super-block; unsigned sc, mn per sub-block
  kSuperSigned,    // d per super-block; signed sc per sub-block
};

struct QuantFormat {
  int block = 0;   // elements per block
  int sub = 0;     // elements per sub-block (one scale)
  int bits = 0;    // bits per code
  int offset = 0;  // subtracted from u (block and super-signed scales)
  QuantScales scales = QuantScales::kBlock;
  constexpr int n_subs() const { return block / sub; }
  constexpr bool has_min() const { return scales == QuantScales::kBlockMin || scales == QuantScales::kSuperMin; }
};
// REQUIRES: IsQuantized(t) (a plain type gives an empty format).
constexpr QuantFormat FormatOf(DType t) {
  switch (t) {
    case DType::kQ4_0: return {32, 32, 4, 8, QuantScales::kBlock};
    case DType::kQ4_1: return {32, 32, 4, 0, QuantScales::kBlockMin};
    case DType::kQ5_0: return {32, 32, 5, 16, QuantScales::kBlock};
    case DType::kQ5_1: return {32, 32, 5, 0, QuantScales::kBlockMin};
    case DType::kQ8_0: return {32, 32, 8, 128, QuantScales::kBlock};
    case DType::kQ2_K: return {256, 16, 2, 0, QuantScales::kSuperMin};
    case DType::kQ3_K: return {256, 16, 3, 4, QuantScales::kSuperSigned};
    case DType::kQ4_K: return {256, 32, 4, 0, QuantScales::kSuperMin};
    case DType::kQ5_K: return {256, 32, 5, 0, QuantScales::kSuperMin};
    case DType::kQ6_K: return {256, 16, 6, 32, QuantScales::kSuperSigned};
    case DType::kMXFP4: return {32, 32, 5, 12, QuantScales::kBlock};
    default: return {};
  }
}

// One block in canonical form.
struct DecodedBlock {
  uint8_t u[kQKK];           // codes, [block]
  uint16_t d = 0, dmin = 0;  // f16 bits: scale; m (block-min) or dmin (super-min); 0 otherwise
  int16_t sc[16] = {};       // per sub-block integer scale (K-quants), 1 otherwise
  int16_t mn[16] = {};       // per sub-block integer min (super-min), 0 otherwise
};
void DecodeBlock(DType t, const void* block, DecodedBlock* out);

// The float scale and bias of sub-block s of a decoded block: y = S * (u - offset) + B, where
// has_bias is false for the block and super-signed families (no addition happens there).
struct SubScale {
  float scale = 0, bias = 0;
  bool has_bias = false;
};
SubScale SubScaleOf(const QuantFormat& f, const DecodedBlock& b, int s);

// y[0, n) = dequantised x. REQUIRES: IsQuantized(t), n % BlockElems(t) == 0.
void DequantizeRow(DType t, const void* x, float* y, int64_t n);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (ggml's
// get_scale_min_k4), and the 16 signed 6-bit scales of a Q3_K block (minus 32).
// The first value that is not finite (NaN or inf), or -1: every element of a plain tensor
// (f32, f16, bf16; I32 has none), the f16 scale fields (d, m, dmin) of every block of a
// quantised one, where a non-finite scale makes the block's whole output non-finite. Returns
// the element index (plain) or block index (quantised). One pass at memory speed, so loading
// checks every tensor. REQUIRES: numel % BlockElems(t) == 0.
int64_t FirstNonFinite(DType t, const void* data, int64_t numel);
// The first MXFP4 block whose scale 2^(e - 128) the canonical form cannot carry exactly (e
// outside [104, 143]) while one of its values is nonzero, or -1 (every block of every other
// type: their scales are f16 already).
int64_t FirstOutOfRange(DType t, const void* data, int64_t numel);
// ggml's kvalues_mxfp4: the E2M1 value of each 4-bit code, doubled.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void UnpackScaleMinK4(const uint8_t scales[12], int j, uint8_t* sc, uint8_t* mn);
void UnpackScalesQ3K(const uint8_t scales[12], int8_t out[16]);

}  // namespace radixlm::core
