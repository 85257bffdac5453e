#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/vec_avx2.h"

namespace radixlm::kernels {
namespace {

constexpr long kIters = 20'000'000;

RADIXLM_AVX2 float FmaLoop(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  return avx2::HSum(s);
}

}  // namespace

double MeasureFmaPeakGflops(core::ThreadPool& pool) {
  if (core::ActiveIsa() < core::Isa::kAvx2) return 0;
  std::vector<double> runs;
  std::vector<float> sinks(pool.size());
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.RunOnAll([&](int t) { sinks[t] += FmaLoop(kIters / 10); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(pool.size() * (kIters / 10) * 12.0 * 8 * 2 / s / 1e9);
  }
  if (sinks[0] == 12345.f) runs.push_back(0);  // keeps the loops observable
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace radixlm::kernels
