#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/tensor.h"

#include "core/cpu_features.h"
#if RADIXLM_X86
#include "kernels/vec_avx2.h"
#include "kernels/vec_avx512.h"
#endif
#if RADIXLM_ARM
#include <arm_neon.h>
#endif

namespace radixlm::kernels {
namespace {

constexpr long kIters = 20'000'000;

// The fastest of 9 runs of ops / second of `loop` on every thread, in units of 1e9. A ceiling
// is the best the machine does: on a shared VM other work (or the host placing both vCPUs on
// one core's two hyperthreads) only slows a run, and the median of 5 read half the peak at
// times, which put kernels above "100% of peak".
template <typename Loop>
double BestRate(core::ThreadPool& pool, Loop loop, long iters, double ops_per_iter) {
  double best = 0;
  std::vector<float> sinks(pool.size());
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.RunOnAll([&](int t) { sinks[t] += loop(iters); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, pool.size() * iters * ops_per_iter / s / 1e9);
  }
  return best + (sinks[0] == 12345.f ? 1e-9 : 0);  // keeps the loops observable
}


// Streaming read rate of n floats (a multiple of 32 per thread's share) through `sum`.
template <typename Sum>
double ReadRate(core::ThreadPool& pool, int64_t bytes, Sum sum) {
  const int64_t n = std::clamp<int64_t>(bytes / 4, int64_t{1} << 18, int64_t{128} << 20) / 1024 * 1024;
  core::AlignedBuffer buf(n * sizeof(float));
  const float* p = buf.as<float>();
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) { std::memset(buf.as<float>() + b, 0, (e - b) * 4); });
  std::vector<float> sinks(pool.size());
  double best = 0;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n / 32, [&](int t, int64_t b, int64_t e) { sinks[t] += sum(p + b * 32, (e - b) * 32); });
    best = std::max(best, n * 4.0 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
  }
  return best + (sinks[0] == 1.5f ? 1e-9 : 0);
}

#if RADIXLM_ARM
// 16 independent chains of 4-lane fmla / sdot / smmla: enough for the latency of the pipes of
// any ARM core (Neoverse V2: 4 x 128-bit FMA pipes, latency 4).
float FmaLoopNeon(long iters) {
  float32x4_t acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = vdupq_n_f32(static_cast<float>(i));
  const float32x4_t a = vdupq_n_f32(0.999999f), b = vdupq_n_f32(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = vfmaq_f32(b, acc[i], a);
  float32x4_t s = acc[0];
  for (int i = 1; i < 16; ++i) s = vaddq_f32(s, acc[i]);
  return vaddvq_f32(s);
}

__attribute__((target("arch=armv8.2-a+dotprod"))) float SdotLoop(long iters) {
  int32x4_t acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = vdupq_n_s32(i);
  const int8x16_t a = vdupq_n_s8(1), b = vdupq_n_s8(1);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = vdotq_s32(acc[i], a, b);
  int32x4_t s = acc[0];
  for (int i = 1; i < 16; ++i) s = vaddq_s32(s, acc[i]);
  return static_cast<float>(vaddvq_s32(s));
}

__attribute__((target("arch=armv8.2-a+i8mm"))) float SmmlaLoop(long iters) {
  int32x4_t acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = vdupq_n_s32(i);
  const int8x16_t a = vdupq_n_s8(1), b = vdupq_n_s8(1);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = vmmlaq_s32(acc[i], a, b);
  int32x4_t s = acc[0];
  for (int i = 1; i < 16; ++i) s = vaddq_s32(s, acc[i]);
  return static_cast<float>(vaddvq_s32(s));
}

float SumNeon(const float* p, int64_t n) {
  float32x4_t a[8];
  for (int j = 0; j < 8; ++j) a[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i + 32 <= n; i += 32)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) a[j] = vaddq_f32(a[j], vld1q_f32(p + i + 4 * j));
  for (int j = 1; j < 8; ++j) a[0] = vaddq_f32(a[0], a[j]);
  return vaddvq_f32(a[0]);
}
#endif

#if RADIXLM_X86

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

// 16 independent zmm chains: enough to cover the latency of two FMA (or dot-product) pipes.
__attribute__((target("avx512f"))) float FmaLoop512(long iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return avx512::ReduceAdd(s);
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Loop(long iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80)), b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3380));
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return avx512::ReduceAdd(s);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) float Int8Loop(long iters) {
  __m512i acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, acc[i]);
  return static_cast<float>(avx512::ReduceAddI32(s));
}

// AVX2's int8 dot product as gemm_avx2.cc's inner loop does it: vpmaddubsw (32 u8 x s8
// multiply-adds into int16 pairs) summed in int16 by vpaddw, 12 independent chains.
RADIXLM_AVX2 float Int8Loop256(long iters) {
  __m256i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi16(static_cast<int16_t>(i));
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(a, b));
  __m256i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_epi16(s, acc[i]);
  return static_cast<float>(_mm256_extract_epi16(s, 0));
}


RADIXLM_AVX2 float SumAvx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  return avx2::HSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}
#endif

}  // namespace

double MeasureReadBandwidthGBs(core::ThreadPool& pool, int64_t bytes) {
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return ReadRate(pool, bytes, SumAvx2);
#endif
#if RADIXLM_ARM
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kNeon)) return ReadRate(pool, bytes, SumNeon);
#endif
  return 0;
}

double MeasureFmaPeakGflops(core::ThreadPool& pool) {
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512)) return BestRate(pool, FmaLoop512, kIters / 10, 16.0 * 16 * 2);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return BestRate(pool, FmaLoop, kIters / 10, 12.0 * 8 * 2);
#endif
#if RADIXLM_ARM
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kNeon)) return BestRate(pool, FmaLoopNeon, kIters / 10, 16.0 * 4 * 2);
#endif
  return 0;
}

double MeasureBf16DotPeakGflops(core::ThreadPool& pool) {
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512_bf16) return BestRate(pool, Bf16Loop, kIters / 10, 16.0 * 32 * 2);
#endif
  return 0;
}

double MeasureInt8DotPeakGops(core::ThreadPool& pool) {
#if RADIXLM_X86
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512_vnni) return BestRate(pool, Int8Loop, kIters / 10, 16.0 * 64 * 2);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2)) return BestRate(pool, Int8Loop256, kIters / 10, 12.0 * 32 * 2);
#endif
#if RADIXLM_ARM  // the instruction the quantised GEMM runs at this level (gemm_neon.cc)
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kI8mm)) return BestRate(pool, SmmlaLoop, kIters / 10, 16.0 * 32 * 2);
  if (core::AtLeast(core::ActiveIsa(), core::Isa::kDotprod)) return BestRate(pool, SdotLoop, kIters / 10, 16.0 * 16 * 2);
#endif
  return 0;
}

}  // namespace radixlm::kernels
