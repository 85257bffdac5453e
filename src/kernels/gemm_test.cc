#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"
#include "kernels/kernel_cases.h"

namespace radixlm::kernels {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed) {
  core::Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Normal(0, 1);
  return v;
}

float MaxRelError(const std::vector<float>& got, const std::vector<float>& want) {
  float err = 0, scale = 1e-30f;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

TEST(GemmTest, FastPathMatchesOracleOnEveryCase) {
  core::ThreadPool pool(2);
  for (const GemmCase& c : GemmCases(/*include_large=*/false)) {
    const auto w = RandomVector(c.n * c.k, 1);
    const auto x = RandomVector(c.m * c.k, 2);
    const PackedWeight pw = PackedWeight::Pack(w.data(), core::DType::kF32, c.n, c.k, c.weights);
    std::vector<float> got(c.m * c.n), want(c.m * c.n);
    Gemm(pool, x.data(), c.m, c.k, pw, got.data(), c.n);
    GemmReference(x.data(), c.m, c.k, pw, want.data(), c.n);
    EXPECT_LE(MaxRelError(got, want), c.rel_tolerance)
        << "M=" << c.m << " N=" << c.n << " K=" << c.k << " " << core::DTypeName(c.weights);
  }
}

TEST(GemmTest, LargeModelShapesMatchOracleOnSampledRows) {
  core::ThreadPool pool(2);
  for (const GemmCase& c : GemmCases(/*include_large=*/true)) {
    if (c.m * c.n * c.k < (1 << 24)) continue;  // the small ones are covered above
    const auto w = RandomVector(c.n * c.k, 3);
    const auto x = RandomVector(c.m * c.k, 4);
    const PackedWeight pw = PackedWeight::Pack(w.data(), core::DType::kF32, c.n, c.k, c.weights);
    std::vector<float> got(c.m * c.n);
    Gemm(pool, x.data(), c.m, c.k, pw, got.data(), c.n);
    for (int64_t m : {int64_t{0}, c.m / 2, c.m - 1}) {  // the oracle is slow: check three rows
      std::vector<float> want(c.n), row(got.begin() + m * c.n, got.begin() + (m + 1) * c.n);
      GemmReference(x.data() + m * c.k, 1, c.k, pw, want.data(), c.n);
      EXPECT_LE(MaxRelError(row, want), c.rel_tolerance) << "M=" << c.m << " N=" << c.n << " K=" << c.k << " row " << m;
    }
  }
}

TEST(GemmTest, Bf16StorageRoundsWeightsToNearestEven) {
  const float w[2] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256};  // ties: round to even mantissa
  const PackedWeight pw = PackedWeight::Pack(w, core::DType::kF32, 2, 1, core::DType::kBF16);
  EXPECT_EQ(pw.At(0, 0), 1.0f);
  EXPECT_EQ(pw.At(1, 0), 1.0f + 4.0f / 256);
}

// The property later sharing optimisations rely on: a row's output is bitwise the same alone,
// inside any batch, at any offset, and with any thread count.
TEST(GemmTest, RowsAreBitwiseBatchInvariant) {
  core::ThreadPool pool1(1), pool2(2);
  for (core::DType dt : {core::DType::kF32, core::DType::kBF16}) {
    const int64_t n = 200, k = 700;
    const auto w = RandomVector(n * k, 5);
    const PackedWeight pw = PackedWeight::Pack(w.data(), core::DType::kF32, n, k, dt);
    const auto x = RandomVector(300 * k, 6);
    std::vector<float> batch(300 * n);
    Gemm(pool2, x.data(), 300, k, pw, batch.data(), n);
    for (int64_t row : {0, 1, 5, 6, 7, 150, 299}) {
      for (int64_t m : {1, 2, 3, 4, 7}) {  // the row first in batches of various sizes
        const int64_t rows = std::min<int64_t>(m, 300 - row);
        std::vector<float> alone(rows * n);
        Gemm(m % 2 ? pool1 : pool2, x.data() + row * k, rows, k, pw, alone.data(), n);
        EXPECT_EQ(0, std::memcmp(alone.data(), batch.data() + row * n, n * sizeof(float)))
            << "row " << row << " in a batch of " << rows << " " << core::DTypeName(dt);
      }
    }
  }
}

TEST(GemmTest, ScalarAndAvx2PathsAgree) {
  if (core::DetectedCpu().avx2_fma == false) GTEST_SKIP() << "no AVX2 on this CPU";
  core::ThreadPool pool(2);
  const int64_t m = 9, n = 70, k = 300;
  const auto w = RandomVector(n * k, 7), x = RandomVector(m * k, 8);
  const PackedWeight pw = PackedWeight::Pack(w.data(), core::DType::kF32, n, k, core::DType::kBF16);
  std::vector<float> fast(m * n), scalar(m * n);
  Gemm(pool, x.data(), m, k, pw, fast.data(), n);
  core::SetIsaCap(core::Isa::kScalar);
  Gemm(pool, x.data(), m, k, pw, scalar.data(), n);
  core::SetIsaCap(core::Isa::kAvx512);
  EXPECT_LE(MaxRelError(fast, scalar), 1e-5f);
}

}  // namespace
}  // namespace radixlm::kernels
