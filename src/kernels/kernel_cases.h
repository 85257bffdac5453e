// One table of kernel cases (shapes, dtypes, tolerances) shared by the GoogleTest comparisons
// against the scalar oracles and by the Google Benchmark programs (ggml's test-backend-ops
// idea): what is benchmarked is what is tested.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace radixlm::kernels {

struct GemmCase {
  int64_t m, n, k;
  core::DType weights;
  float rel_tolerance;  // max |fast - oracle| / max |oracle|
};

// Model shapes of Qwen3-0.6B (qkv, o, gate_up, down, lm_head slice) at decode (M = 1..8) and
// prefill (M = 512), plus ragged shapes that hit every micro-kernel and the ragged panel.
inline std::vector<GemmCase> GemmCases(bool include_large) {
  std::vector<GemmCase> cases;
  for (core::DType dt : {core::DType::kF32, core::DType::kBF16}) {
    const float tol = 1e-5f;  // f32 accumulation over K <= 3072 against a double oracle
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 13})
      for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {37, 19}, {100, 300}, {64, 513}})
        cases.push_back({m, n, k, dt, tol});
    if (include_large) {
      cases.push_back({512, 4096, 1024, dt, tol});
      cases.push_back({512, 1024, 2048, dt, tol});
      cases.push_back({512, 6144, 1024, dt, tol});
      cases.push_back({512, 1024, 3072, dt, tol});
      cases.push_back({1, 6144, 1024, dt, tol});
      cases.push_back({1, 1024, 3072, dt, tol});
    }
  }
  return cases;
}

}  // namespace radixlm::kernels
