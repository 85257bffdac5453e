// exp for loops the compiler should vectorise: shared by the Mamba2 scan (kernels/ssm.cc) and
// the sampler's softmax weights (sampling/sampler.cc).
#pragma once

#include <bit>
#include <cstdint>

namespace radixlm::core {

// exp(x) in plain arithmetic that the compiler vectorises (std::exp is a library call it does
// not): 2^n * p(r) with n = round(x / ln 2) by the 1.5 * 2^23 trick and Cephes' polynomial,
// ~2 ulp over [-87, 88], 0 below. Each operation is written out, so a file built without
// contraction (kernels/ssm.cc) rounds identically in its scalar, AVX2 and AVX-512 builds.
inline float ExpVec(float x) {
  const float lo = -87.3365478515625f, hi = 88.3762626647949f;
  const bool underflow = x < lo;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const float big = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (nearest even)
  const float n = (x * 1.44269504088896341f + big) - big;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  const float scale = std::bit_cast<float>(e);
  return underflow ? 0.0f : p * scale;
}

}  // namespace radixlm::core
