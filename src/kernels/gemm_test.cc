#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/quant.h"
#include "core/random.h"
#include "kernels/gemm_internal.h"
#include "kernels/kernel_cases.h"

namespace radixlm::kernels {
namespace {

using core::DType;

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

// Restores the ISA cap when a test that lowered it ends.
struct IsaCap {
  explicit IsaCap(core::Isa cap) { core::SetIsaCap(cap); }
  ~IsaCap() { core::SetIsaCap(core::Isa::kAvx512); }
};

// The ISA tiers this CPU can run for a case's weight type (scalar always).
std::vector<core::Isa> TiersFor(const PackedWeight& w) {
  std::vector<core::Isa> tiers;
  for (core::Isa isa : core::IsaLevels()) {
    if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
    bool distinct = true;
    for (const WeightSegment& s : w.segments()) distinct &= gemm::TierOf(s, isa) == isa;
    if (distinct) tiers.push_back(isa);
  }
  return tiers;
}

TEST(GemmTest, FastPathMatchesOracleOnEveryCase) {
  core::ThreadPool pool(2);
  for (const GemmCase& c : GemmCases(/*include_large=*/false)) {
    const PackedWeight pw = PackCase(c, 1);
    const auto x = RandomVector(c.m * c.k, 2);
    std::vector<float> got(c.m * c.n), want(c.m * c.n);
    Gemm(pool, x.data(), c.m, c.k, pw, got.data(), c.n);
    GemmReference(x.data(), c.m, c.k, pw, want.data(), c.n);
    EXPECT_LE(MaxRelError(got, want), c.rel_tolerance) << c.Name();
  }
}

TEST(GemmTest, LargeModelShapesMatchOracleOnSampledRows) {
  core::ThreadPool pool(2);
  for (const GemmCase& c : GemmCases(/*include_large=*/true)) {
    if (c.m * c.n * c.k < (1 << 24)) continue;  // the small ones are covered above
    if (c.m > 1 && c.weights != DType::kF32 && c.weights != DType::kBF16 && c.weights != DType::kQ4_K &&
        c.weights != DType::kQ8_0)
      continue;  // prefill shapes for a sample of the formats: the oracle is slow
    if (c.bf16_mode == Bf16Mode::kBf16Activations && !HasBf16Dot() && c.m > 1)
      continue;  // the scalar emulation at prefill shapes proves nothing new, slowly
    const PackedWeight pw = PackCase(c, 3);
    const auto x = RandomVector(c.m * c.k, 4);
    std::vector<float> got(c.m * c.n);
    Gemm(pool, x.data(), c.m, c.k, pw, got.data(), c.n);
    for (int64_t m : {int64_t{0}, c.m / 2, c.m - 1}) {  // three rows
      std::vector<float> want(c.n), row(got.begin() + m * c.n, got.begin() + (m + 1) * c.n);
      GemmReference(x.data() + m * c.k, 1, c.k, pw, want.data(), c.n);
      EXPECT_LE(MaxRelError(row, want), c.rel_tolerance) << c.Name() << " row " << m;
    }
  }
}

TEST(GemmTest, Bf16StorageRoundsWeightsToNearestEven) {
  const float w[2] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256};  // ties: round to even mantissa
  const PackedWeight pw = PackedWeight::Pack(w, DType::kF32, 2, 1, DType::kBF16);
  EXPECT_EQ(pw.At(0, 0), 1.0f);
  EXPECT_EQ(pw.At(1, 0), 1.0f + 4.0f / 256);
}

// Repacking keeps every quantised weight: each row reads back bit for bit as the format's
// dequantisation of the source row (37 rows: a ragged last panel).
TEST(GemmTest, QuantisedPanelsReadBackAsTheFormatDequantises) {
  for (DType t : QuantisedTypes()) {
    const int64_t n = 37, k = 2 * core::BlockElems(t);
    const auto bytes = RandomWeightBytes(t, n, k, 11);
    const PackedWeight pw = PackedWeight::Pack(bytes.data(), t, n, k, t);
    ASSERT_EQ(pw.storage(), t);
    std::vector<float> want(k), got(k);
    for (int64_t r = 0; r < n; ++r) {
      core::DequantizeRow(t, bytes.data() + r * core::RowBytes(t, k), want.data(), k);
      pw.ReadRow(r, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), k * 4)) << core::DTypeName(t) << " row " << r;
      for (int64_t i : {int64_t{0}, k / 3, k - 1}) ASSERT_EQ(pw.At(r, i), want[i]);
    }
  }
}

// The integer machinery is exact: a quantised GEMM equals, to f32 rounding, the double
// product of the dequantised weights and the dequantised (int8) activations.
TEST(GemmTest, QuantisedGemmIsExactOnQuantisedActivations) {
  core::ThreadPool pool(2);
  for (DType t : QuantisedTypes()) {
    const int64_t m = 9, n = 37, k = 2 * core::BlockElems(t);
    const auto bytes = RandomWeightBytes(t, n, k, 12);
    const PackedWeight pw = PackedWeight::Pack(bytes.data(), t, n, k, t);
    const auto x = RandomVector(m * k, 13);
    std::vector<float> xq(m * k);
    std::vector<int8_t> q(k);
    std::vector<float> d(k / 32);
    std::vector<int32_t> sums(k / 16);
    for (int64_t r = 0; r < m; ++r) {
      gemm::QuantiseRowScalar(x.data() + r * k, k, q.data(), d.data(), sums.data());
      for (int64_t i = 0; i < k; ++i) xq[r * k + i] = d[i / 32] * q[i];
    }
    std::vector<float> got(m * n), want(m * n);
    Gemm(pool, x.data(), m, k, pw, got.data(), n);
    GemmReference(xq.data(), m, k, pw, want.data(), n);
    EXPECT_LE(MaxRelError(got, want), 2e-6f) << core::DTypeName(t);
  }
}

// Every SIMD path computes exactly the scalar oracle's operations: bitwise equal outputs.
TEST(GemmTest, EveryIsaPathEqualsTheScalarOracleBitwise) {
  core::ThreadPool pool(2);
  int compared = 0;
  for (const GemmCase& c : GemmCases(/*include_large=*/false)) {
    if (c.m != 13 && c.m != 3 && c.m != 1) continue;  // decode, few-row and prefill tiles
    const PackedWeight pw = PackCase(c, 5);
    const auto x = RandomVector(c.m * c.k, 6);
    std::vector<float> scalar(c.m * c.n);
    {
      IsaCap cap(core::Isa::kScalar);
      Gemm(pool, x.data(), c.m, c.k, pw, scalar.data(), c.n);
    }
    for (core::Isa isa : TiersFor(pw)) {
      if (isa == core::Isa::kScalar) continue;
      IsaCap cap(isa);
      std::vector<float> fast(c.m * c.n);
      Gemm(pool, x.data(), c.m, c.k, pw, fast.data(), c.n);
      EXPECT_EQ(0, std::memcmp(fast.data(), scalar.data(), fast.size() * 4)) << c.Name() << " on " << core::IsaName(isa);
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "no SIMD path on this CPU";
}

// Every weight type: f32, bf16 (exact, and with bf16 activations where the CPU has the bf16
// dot product) and each quantised type.
std::vector<std::pair<DType, Bf16Mode>> EveryWeightKind() {
  std::vector<std::pair<DType, Bf16Mode>> kinds = {{DType::kF32, Bf16Mode::kExact}, {DType::kBF16, Bf16Mode::kExact}};
  if (HasBf16Dot()) kinds.push_back({DType::kBF16, Bf16Mode::kBf16Activations});
  for (DType q : QuantisedTypes()) kinds.push_back({q, Bf16Mode::kExact});
  return kinds;
}

// The property every sharing optimisation relies on: a row's output is bitwise the same
// alone, inside any batch, at any offset, and with any thread count, for every weight type.
TEST(GemmTest, RowsAreBitwiseBatchInvariantForEveryWeightType) {
  core::ThreadPool pool1(1), pool2(2);
  for (auto [dt, mode] : EveryWeightKind()) {
    const int64_t n = 200, k = 512, rows_total = 120;
    const PackedWeight pw = PackCase({1, n, k, dt, mode, 0}, 7);
    const auto x = RandomVector(rows_total * k, 8);
    std::vector<float> batch(rows_total * n);
    Gemm(pool2, x.data(), rows_total, k, pw, batch.data(), n);
    for (int64_t row : {0, 1, 5, 8, 9, 97, 119}) {
      for (int64_t m : {1, 2, 3, 4, 7, 11}) {  // the row first in batches of various sizes
        const int64_t rows = std::min<int64_t>(m, rows_total - row);
        std::vector<float> alone(rows * n);
        Gemm(m % 2 ? pool1 : pool2, x.data() + row * k, rows, k, pw, alone.data(), n);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + row * n, n * sizeof(float)))
            << "row " << row << " in a batch of " << rows << " " << core::DTypeName(dt);
      }
    }
  }
}

// Mixture-of-experts grouping: 6 experts of 80 output rows stacked in one weight (each expert's
// slice starts on a panel; the last ends ragged), 164 rows routed to them unevenly (one expert
// empty, one larger than a row block); each row's output through GemmGrouped is bitwise what
// Gemm gives for that row alone with its expert's own weights, for every weight type and thread
// count.
TEST(GemmTest, GroupedRowsAreBitwiseTheRowAloneForEveryWeightType) {
  core::ThreadPool pool1(1), pool2(2);
  for (auto [dt, mode] : EveryWeightKind()) {
    const int64_t n = 80, n_last = 40, k = 256, n_experts = 6;
    const int64_t total_out = n * (n_experts - 1) + n_last;
    const auto bytes = RandomWeightBytes(dt, total_out, k, 100);
    const DType src = core::IsQuantized(dt) ? dt : DType::kF32;
    const PackedWeight stacked = PackedWeight::Pack(bytes.data(), src, total_out, k, dt, mode);
    const size_t row_bytes = core::RowBytes(src, k);
    std::vector<PackedWeight> own;  // each expert packed on its own
    for (int64_t e = 0; e < n_experts; ++e)
      own.push_back(PackedWeight::Pack(bytes.data() + e * n * row_bytes, src, e + 1 < n_experts ? n : n_last, k, dt, mode));
    const std::vector<int64_t> sizes = {9, 0, 100, 1, 31, 23};
    int64_t rows = 0;
    std::vector<GemmGroup> groups;
    for (int64_t e = 0; e < n_experts; ++e) {
      groups.push_back({&stacked, e * n, e + 1 < n_experts ? n : n_last, rows, sizes[e]});
      rows += sizes[e];
    }
    const auto x = RandomVector(rows * k, 11);
    for (core::ThreadPool* pool : {&pool1, &pool2}) {
      std::vector<float> y(rows * n, -1.0f);
      GemmGrouped(*pool, x.data(), rows, k, groups, y.data(), n);
      for (int64_t e = 0; e < n_experts; ++e) {
        const GemmGroup& g = groups[e];
        for (int64_t r = g.row_begin; r < g.row_begin + g.n_rows; r += (g.n_rows > 20 ? 7 : 1)) {
          std::vector<float> alone(g.out_rows);
          Gemm(pool1, x.data() + r * k, 1, k, own[e], alone.data(), g.out_rows);
          ASSERT_EQ(0, std::memcmp(alone.data(), y.data() + r * n, g.out_rows * sizeof(float)))
              << "row " << r << " expert " << e << " " << core::DTypeName(dt) << " threads " << pool->size();
        }
      }
    }
  }
}

// Few output columns and many rows: the work is split by rows instead of panel groups (the
// thread split must not change a row either).
TEST(GemmTest, RowSplitWorkIsBitwiseTheSameAsOneThread) {
  core::ThreadPool pool1(1), pool2(2);
  std::vector<std::pair<DType, Bf16Mode>> kinds = {{DType::kF32, Bf16Mode::kExact}, {DType::kQ4_K, Bf16Mode::kExact},
                                                   {DType::kQ8_0, Bf16Mode::kExact}};
  if (HasBf16Dot()) kinds.push_back({DType::kBF16, Bf16Mode::kBf16Activations});
  for (auto [dt, mode] : kinds) {
    const int64_t n = 40, k = 256, m = 40;  // 3 panels: one work group, rows split over threads
    const PackedWeight pw = PackCase({m, n, k, dt, mode, 0}, 9);
    const auto x = RandomVector(m * k, 10);
    std::vector<float> one(m * n), two(m * n);
    Gemm(pool1, x.data(), m, k, pw, one.data(), n);
    Gemm(pool2, x.data(), m, k, pw, two.data(), n);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << core::DTypeName(dt);
  }
}

// A fused projection whose parts have different types (a Q4_K_M file's q, k in Q4_K, v in
// Q6_K) computes each part in its own type: bitwise the parts computed separately.
TEST(GemmTest, MixedTypePartsStayFusedAndExact) {
  core::ThreadPool pool(2);
  const int64_t k = 512, m = 10;
  const auto a = RandomWeightBytes(DType::kQ4_K, 48, k, 21), b = RandomWeightBytes(DType::kQ6_K, 20, k, 22);
  const auto c = RandomWeightBytes(DType::kF32, 16, k, 23);
  PackedWeight::Options o;
  o.keep_quantised = true;
  const PackedWeight fused = PackedWeight::PackParts(
      {{a.data(), DType::kQ4_K, 48}, {b.data(), DType::kQ6_K, 20}, {c.data(), DType::kF32, 16}}, k, o);
  ASSERT_EQ(fused.segments().size(), 3u);
  ASSERT_EQ(fused.n_out(), 84);
  const PackedWeight pa = PackedWeight::Pack(a.data(), DType::kQ4_K, 48, k, DType::kQ4_K);
  const PackedWeight pb = PackedWeight::Pack(b.data(), DType::kQ6_K, 20, k, DType::kQ6_K);
  const PackedWeight pc = PackedWeight::Pack(c.data(), DType::kF32, 16, k, DType::kF32);
  const auto x = RandomVector(m * k, 24);
  std::vector<float> y(m * 84), ya(m * 48), yb(m * 20), yc(m * 16);
  Gemm(pool, x.data(), m, k, fused, y.data(), 84);
  Gemm(pool, x.data(), m, k, pa, ya.data(), 48);
  Gemm(pool, x.data(), m, k, pb, yb.data(), 20);
  Gemm(pool, x.data(), m, k, pc, yc.data(), 16);
  for (int64_t r = 0; r < m; ++r) {
    EXPECT_EQ(0, std::memcmp(y.data() + r * 84, ya.data() + r * 48, 48 * 4)) << r;
    EXPECT_EQ(0, std::memcmp(y.data() + r * 84 + 48, yb.data() + r * 20, 20 * 4)) << r;
    EXPECT_EQ(0, std::memcmp(y.data() + r * 84 + 68, yc.data() + r * 16, 16 * 4)) << r;
  }
}

// Dequantising packing: a quantised source stored as f32 or bf16 holds the format's values.
TEST(GemmTest, QuantisedSourceCanBeStoredDequantised) {
  const int64_t n = 20, k = 256;
  const auto bytes = RandomWeightBytes(DType::kQ5_K, n, k, 31);
  const PackedWeight pw = PackedWeight::Pack(bytes.data(), DType::kQ5_K, n, k, DType::kF32);
  std::vector<float> want(k), got(k);
  for (int64_t r = 0; r < n; ++r) {
    core::DequantizeRow(DType::kQ5_K, bytes.data() + r * core::RowBytes(DType::kQ5_K, k), want.data(), k);
    pw.ReadRow(r, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), k * 4));
  }
}

TEST(GemmTest, SimdActivationQuantisationEqualsScalarBitwise) {
  const int64_t k = 1024;
  auto x = RandomVector(k, 41);
  for (int i = 0; i < 32; ++i) x[i] = 0;  // an all-zero block
  x[40] = 1e-30f;                          // tiny and huge values
  x[70] = -3e30f;
  for (int i = 96; i < 128; ++i) x[i] = 0;  // a block whose scale's reciprocal overflows: all zero
  x[100] = 1e-40f;
  x[160] = INFINITY;                        // non-finite inputs quantise to 0, never undefined
  x[200] = std::nanf("");
  std::vector<int8_t> q0(k), q1(k);
  std::vector<float> d0(k / 32), d1(k / 32);
  std::vector<int32_t> s0(k / 16), s1(k / 16);
  gemm::QuantiseRowScalar(x.data(), k, q0.data(), d0.data(), s0.data());
  int compared = 0;
  for (auto [present, quantise, name] : {std::tuple{core::DetectedCpu().avx2_fma, &gemm::QuantiseRowAvx2, "AVX2"},
                                         std::tuple{core::DetectedCpu().avx512bw, &gemm::QuantiseRowAvx512, "AVX-512"}}) {
    if (!present) continue;
    quantise(x.data(), k, q1.data(), d1.data(), s1.data());
    EXPECT_EQ(q0, q1) << name;
    EXPECT_EQ(0, std::memcmp(d0.data(), d1.data(), d0.size() * 4)) << name;
    EXPECT_EQ(s0, s1) << name;
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

TEST(GemmTest, Bf16ActivationRoundingEqualsTheInstruction) {
  if (!core::DetectedCpu().avx512_bf16) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  auto x = RandomVector(100, 51);
  x[0] = 1e-40f;   // denormal: the instruction flushes it
  x[1] = -2e-39f;
  x[2] = 1.0f + 1.0f / 256;  // a tie
  x[3] = std::nanf("");
  x[4] = -INFINITY;
  std::vector<uint16_t> simd(100);
  gemm::Bf16RowAvx512(x.data(), 100, simd.data());
  for (int i = 0; i < 100; ++i) {
    if (!std::isnan(x[i])) {
      EXPECT_EQ(simd[i], gemm::ToBf16Activation(x[i])) << i << " " << x[i];
    }
  }
}

}  // namespace
}  // namespace radixlm::kernels
