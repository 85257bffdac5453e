// Horizontal reductions of a zmm register, written out instead of GCC's _mm512_reduce_*: GCC 12's
// versions (and every intrinsic that extracts or shuffles 512-bit lanes) start from an
// undefined register, which -Wuninitialized reports wherever they are inlined. The register
// goes through memory instead. Add keeps GCC's order exactly (halves, then quarters, then
// pairs), so results are bitwise those of _mm512_reduce_add_ps; max is exact in any order.
#pragma once

#include <immintrin.h>

#include <algorithm>

namespace radixlm::kernels::avx512 {

#define RADIXLM_AVX512_REDUCE __attribute__((target("avx512f"), always_inline)) inline

RADIXLM_AVX512_REDUCE float ReduceAdd(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = t[i + 8] + t[i];
  for (int i = 0; i < 4; ++i) q[i] = h[i + 4] + h[i];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

RADIXLM_AVX512_REDUCE float ReduceMax(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  return *std::max_element(t, t + 16);
}

RADIXLM_AVX512_REDUCE int ReduceAddI32(__m512i v) {
  alignas(64) int t[16];
  _mm512_store_si512(t, v);
  unsigned s = 0;  // wraps as the vector add does
  for (int x : t) s += static_cast<unsigned>(x);
  return static_cast<int>(s);
}

#undef RADIXLM_AVX512_REDUCE

}  // namespace radixlm::kernels::avx512
