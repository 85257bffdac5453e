#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace radixlm::sampling {
namespace {

TEST(SamplerTest, GreedyTopKTopPAndSeeds) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f, -1.0f};
  EXPECT_EQ(Sampler({}).Sample(logits), 1);  // lowest id among equal maxima
  Sampler topk({.temperature = 1.0f, .top_k = 2, .seed = 1});
  for (int i = 0; i < 200; ++i) {
    const int32_t t = topk.Sample(logits);
    EXPECT_TRUE(t == 1 || t == 3);
  }
  Sampler topp({.temperature = 1.0f, .top_p = 0.01f, .seed = 2});  // only the single best survives
  for (int i = 0; i < 50; ++i) EXPECT_EQ(topp.Sample(logits), 1);
  Sampler a({.temperature = 1.0f, .seed = 3}), b({.temperature = 1.0f, .seed = 3});
  std::vector<int32_t> sa, sb;
  int distinct_from_greedy = 0;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.Sample(logits));
    sb.push_back(b.Sample(logits));
    distinct_from_greedy += sa.back() != 1 && sa.back() != 3;
  }
  EXPECT_EQ(sa, sb);
  EXPECT_GT(distinct_from_greedy, 0);
}

TEST(SamplerTest, TemperatureTooSmallForFloatIsGreedy) {
  // 3 / 1e-40 overflows float: without the guard the softmax is NaN and the last candidate
  // (the least likely token, id 4) would be picked every time.
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f, -1.0f};
  Sampler tiny({.temperature = 1e-40f, .seed = 7});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(tiny.Sample(logits), 1);
}

TEST(SamplerTest, LogProbIsTheLogSoftmax) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f, -1.0f};
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  for (int32_t i = 0; i < 5; ++i) EXPECT_NEAR(LogProb(logits, i), logits[i] - std::log(z), 1e-12);
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(LogProb(big, 0), -std::log(2.0), 1e-12);
}

}  // namespace
}  // namespace radixlm::sampling
