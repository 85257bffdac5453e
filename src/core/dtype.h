// Element types of tensors and the scalar conversions between them. bf16 and f16 are
// storage formats only: arithmetic is always done in f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace radixlm::core {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32 };

inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
  }
  return 0;
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

// Converts n elements of `src` (of type `from`) to f32.
void ConvertToF32(DType from, const void* src, float* dst, size_t n);

}  // namespace radixlm::core
