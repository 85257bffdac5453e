// Element types of tensors and the scalar conversions between them. bf16 and f16 are
// storage formats only: arithmetic is always done in f32. The block-quantised types are
// GGML's (what GGUF files hold): a row of n elements is n / BlockElems blocks of BlockBytes
// bytes each; core/quant.h defines their layouts and dequantisation.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace radixlm::core {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32,
                             kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kMXFP4 };

inline bool IsQuantized(DType t) { return t >= DType::kQ4_0; }

// Bytes of one element. REQUIRES: !IsQuantized(t) (a quantised element has no size of its own;
// use RowBytes).
inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    default: return 0;
  }
}
// Elements per block: 1 for plain types, 32 or 256 for quantised ones.
int64_t BlockElems(DType t);
// Bytes per block (the element size for plain types).
size_t BlockBytes(DType t);
// Bytes of a row of n elements. REQUIRES: n % BlockElems(t) == 0.
inline size_t RowBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / BlockElems(t)) * BlockBytes(t);
}
std::string_view DTypeName(DType t);
bool ParseDType(std::string_view name, DType* out);

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Round to nearest even, as PyTorch and llama.cpp do; NaN stays NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

// Converts n elements of `src` (of type `from`) to f32; quantised types are dequantised.
// REQUIRES: n % BlockElems(from) == 0.
void ConvertToF32(DType from, const void* src, float* dst, size_t n);

}  // namespace radixlm::core
