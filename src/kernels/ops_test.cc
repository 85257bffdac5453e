#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"

namespace radixlm::kernels {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  core::Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Normal(0, scale);
  return v;
}

// Runs fn under the scalar ISA cap, then restores the detected level.
template <typename F>
void WithScalar(F fn) {
  core::SetIsaCap(core::Isa::kScalar);
  fn();
  core::SetIsaCap(core::Isa::kAvx512);
}

TEST(RmsNormTest, MatchesDefinitionOnBothPaths) {
  for (int64_t dim : {1, 7, 64, 1024, 1030}) {
    const auto x = RandomVector(3 * dim, 1), w = RandomVector(dim, 2);
    std::vector<float> fast(3 * dim), scalar(3 * dim);
    RmsNorm(x.data(), w.data(), fast.data(), 3, dim, 1e-6f);
    WithScalar([&] { RmsNorm(x.data(), w.data(), scalar.data(), 3, dim, 1e-6f); });
    for (int64_t t = 0; t < 3; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
      const double inv = 1 / std::sqrt(ss / dim + 1e-6);
      for (int64_t i = 0; i < dim; ++i) {
        const double want = x[t * dim + i] * inv * w[i];
        EXPECT_NEAR(fast[t * dim + i], want, 2e-6 * std::fabs(want) + 1e-7) << "dim " << dim;
        EXPECT_NEAR(scalar[t * dim + i], want, 2e-6 * std::fabs(want) + 1e-7) << "dim " << dim;
      }
    }
  }
}

TEST(RmsNormTest, WorksInPlace) {
  auto x = RandomVector(64, 3);
  const auto w = RandomVector(64, 4);
  std::vector<float> out(64);
  RmsNorm(x.data(), w.data(), out.data(), 1, 64, 1e-6f);
  RmsNorm(x.data(), w.data(), x.data(), 1, 64, 1e-6f);
  EXPECT_EQ(x, out);
}

TEST(RopeTest, NeoxAndInterleavedRotatePairsByPositionTimesFrequency) {
  const int hd = 8, heads = 2;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kInterleaved}) {
    const RopeTable table = MakeRopeTable(layout, hd, 10000.0);
    auto x = RandomVector(3 * heads * hd, 5);
    const auto orig = x;
    const int32_t pos[3] = {0, 1, 1000};
    std::vector<float> cs(3 * hd);
    RopeCosSin(table, pos, 3, cs.data());
    ApplyRope(table, cs.data(), x.data(), 3, heads, hd);
    for (int t = 0; t < 3; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hd / 2; ++i) {
          const int a = layout == RopeLayout::kNeox ? i : 2 * i, b = layout == RopeLayout::kNeox ? i + hd / 2 : 2 * i + 1;
          const double ang = pos[t] * std::pow(10000.0, -2.0 * i / hd);
          const float* o = orig.data() + (t * heads + h) * hd;
          const float* r = x.data() + (t * heads + h) * hd;
          EXPECT_NEAR(r[a], o[a] * std::cos(ang) - o[b] * std::sin(ang), 1e-5);
          EXPECT_NEAR(r[b], o[a] * std::sin(ang) + o[b] * std::cos(ang), 1e-5);
        }
  }
}

TEST(RopeTest, Llama3ScalingKeepsHighFrequenciesAndDividesLowOnes) {
  Llama3RopeScaling s{8.0f, 1.0f, 4.0f, 8192};
  const RopeTable plain = MakeRopeTable(RopeLayout::kNeox, 128, 500000.0);
  const RopeTable scaled = MakeRopeTable(RopeLayout::kNeox, 128, 500000.0, &s);
  EXPECT_FLOAT_EQ(scaled.inv_freq[0], plain.inv_freq[0]);            // wavelength 2*pi < 2048
  EXPECT_FLOAT_EQ(scaled.inv_freq[63], plain.inv_freq[63] / 8.0f);   // wavelength > 8192
  const int mid = 30;  // wavelength ~2.9K: in the smoothly interpolated band (2048..8192)
  EXPECT_LT(scaled.inv_freq[mid], plain.inv_freq[mid]);
  EXPECT_GT(scaled.inv_freq[mid], plain.inv_freq[mid] / 8.0f);
}

TEST(SiluMulTest, BothPathsMatchDefinition) {
  const int64_t ffn = 37;
  const auto gu = RandomVector(2 * 2 * ffn, 6, 4.0f);
  std::vector<float> fast(2 * ffn), scalar(2 * ffn);
  SiluMul(gu.data(), fast.data(), 2, ffn);
  WithScalar([&] { SiluMul(gu.data(), scalar.data(), 2, ffn); });
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < ffn; ++i) {
      const double g = gu[t * 2 * ffn + i], u = gu[t * 2 * ffn + ffn + i];
      const double want = g / (1 + std::exp(-g)) * u;
      EXPECT_NEAR(fast[t * ffn + i], want, 1e-5 * std::fabs(want) + 1e-6);
      EXPECT_NEAR(scalar[t * ffn + i], want, 1e-5 * std::fabs(want) + 1e-6);
    }
}

TEST(EmbeddingTest, LooksUpRowsInEveryStorageDtype) {
  const float table[6] = {1, 2, 3, 4, 5, 6};  // [3, 2]
  uint16_t bf[6], f16[6];
  for (int i = 0; i < 6; ++i) { bf[i] = core::F32ToBf16(table[i]); f16[i] = core::F32ToF16(table[i]); }
  const int32_t ids[2] = {2, 0};
  for (auto [ptr, dt] : {std::pair<const void*, core::DType>{table, core::DType::kF32}, {bf, core::DType::kBF16}, {f16, core::DType::kF16}}) {
    float out[4];
    EmbeddingLookup(ptr, dt, 2, ids, 2, out);
    EXPECT_EQ(out[0], 5); EXPECT_EQ(out[1], 6); EXPECT_EQ(out[2], 1); EXPECT_EQ(out[3], 2);
  }
}

TEST(GatherScatterTest, ScatterInvertsGather) {
  const auto src = RandomVector(5 * 3, 7);
  const int32_t idx[5] = {4, 0, 3, 1, 2};
  std::vector<float> gathered(15), back(15);
  GatherRows(src.data(), idx, 5, 3, gathered.data());
  for (int c = 0; c < 3; ++c) EXPECT_EQ(gathered[c], src[4 * 3 + c]);
  ScatterRows(gathered.data(), idx, 5, 3, back.data());
  EXPECT_EQ(back, src);
}

TEST(DTypeTest, HalfConversionsRoundTripAndRound) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(core::F16ToF32(core::F32ToF16(f)), f) << f;
  EXPECT_TRUE(std::isinf(core::F16ToF32(core::F32ToF16(1e6f))));
  EXPECT_EQ(core::Bf16ToF32(core::F32ToBf16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(core::Bf16ToF32(core::F32ToBf16(NAN))));
}

}  // namespace
}  // namespace radixlm::kernels
