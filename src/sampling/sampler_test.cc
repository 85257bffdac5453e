#include "sampling/sampler.h"

#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <map>
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

// min_p drops what is less likely than min_p x the best token (after temperature), on both
// the whole-vocabulary path and the top-k candidate path.
TEST(SamplerTest, MinPDropsTheUnlikelyTokens) {
  // weights relative to the best (temperature 1): 1, e^-1 = 0.37, e^-3 = 0.05, e^-5 = 0.007
  const std::vector<float> logits = {5.0f, 4.0f, 2.0f, 0.0f};
  for (int top_k : {0, 3}) {
    Sampler s({.temperature = 1.0f, .top_k = top_k, .seed = 9, .min_p = 0.1f});
    std::map<int32_t, int> seen;
    for (int i = 0; i < 400; ++i) ++seen[s.Sample(logits)];
    EXPECT_EQ(seen.count(2) + seen.count(3), 0u) << "top_k " << top_k;
    EXPECT_GT(seen[1], 40) << "top_k " << top_k;
  }
}

// The penalties as OpenAI (presence, frequency: over generated tokens) and vLLM (repetition:
// over prompt and generated tokens, dividing positive logits, multiplying negative ones) define
// them.
TEST(SamplerTest, PenaltiesFollowTheirDefinitions) {
  Sampler s({.presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f});
  s.SetPrompt(std::vector<int32_t>{1, 3});
  std::vector<float> logits = {4.0f, 4.0f, 1.0f, -1.0f, 0.0f};
  ASSERT_EQ(s.Sample(logits), 0);  // greedy: ids 0 and 1 tie before penalties, but 1 is in the prompt
  s.Penalize(logits);  // counts now: 0 generated once; 1 and 3 in the prompt
  EXPECT_FLOAT_EQ(logits[0], 4.0f / 2.0f - (0.25f * 1 + 0.5f));
  EXPECT_FLOAT_EQ(logits[1], 4.0f / 2.0f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_FLOAT_EQ(logits[3], -1.0f * 2.0f);
  EXPECT_FLOAT_EQ(logits[4], 0.0f);
  std::vector<float> again = {4.0f, 4.0f, 1.0f, -1.0f, 0.0f};
  s.Penalize(again);
  EXPECT_EQ(s.Sample(again), 1);
  std::vector<float> third = {4.0f, 4.0f, 1.0f, -1.0f, 0.0f};
  s.Penalize(third);  // 0 and 1 generated once each
  EXPECT_FLOAT_EQ(third[1], 4.0f / 2.0f - 0.75f);
  Sampler plain({});
  std::vector<float> untouched = {1.0f, 2.0f};
  plain.SetPrompt(std::vector<int32_t>{0, 1});
  plain.Penalize(untouched);
  EXPECT_EQ(untouched, (std::vector<float>{1.0f, 2.0f}));
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

// The textbook truncation (sort the whole vocabulary, keep top-k, then the smallest prefix
// holding top-p of the mass), as an oracle for the selection-based one.
std::map<int32_t, double> SortedReference(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<double, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({logits[i] / p.temperature, static_cast<int32_t>(i)});
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  const double mx = c[0].first;
  double total = 0;
  for (auto& x : c) total += (x.first = std::exp(x.first - mx));
  size_t n = c.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    n = 0;
    while (n < c.size()) {
      cum += c[n++].first / total;
      if (cum >= p.top_p) break;
    }
  }
  total = 0;
  for (size_t i = 0; i < n; ++i) total += c[i].first;
  std::map<int32_t, double> out;
  for (size_t i = 0; i < n; ++i) out[c[i].second] = c[i].first / total;
  return out;
}

// On a Qwen3-sized vocabulary, flat (random-weight) and peaked logits: the selection-based
// truncation keeps the same tokens with the same probabilities (to 1e-5, float weights; tokens below e^-30 of
// the best may be dropped, together under 1e-8), for temperature, top-k and top-p alone and
// together.
TEST(SamplerTest, SelectionTruncationEqualsTheSortedOracle) {
  core::Rng rng(3);
  for (double spread : {1.0, 4.0, 12.0}) {
    std::vector<float> logits(151936);
    for (auto& x : logits) x = static_cast<float>(rng.Normal(0, spread));
    for (SamplingParams p : {SamplingParams{.temperature = 1.0f}, SamplingParams{.temperature = 0.7f, .top_k = 40},
                             SamplingParams{.temperature = 1.0f, .top_p = 0.9f}, SamplingParams{.temperature = 0.6f, .top_p = 0.95f},
                             SamplingParams{.temperature = 1.3f, .top_k = 1000, .top_p = 0.5f}}) {
      const auto want = SortedReference(logits, p);
      Candidates got;
      TruncatedDistribution(logits, p, &got);
      std::map<int32_t, double> have;
      for (const auto& [w, id] : got.items) have[id] = w / got.total;
      double dropped = 0;
      for (const auto& [id, prob] : want)
        if (!have.count(id)) dropped += prob;
      EXPECT_LT(dropped, 1e-8) << spread;
      for (const auto& [id, prob] : have) {
        ASSERT_TRUE(want.count(id)) << "kept a token the oracle drops: " << id << " spread " << spread;
        ASSERT_NEAR(prob, want.at(id), 1e-5) << spread;  // float weights vs the double oracle
      }
    }
  }
}

// The vocabulary passes run at each ISA's width with the same bits: the same seed draws the same
// tokens, and the nucleus is the same set, whichever level is active.
TEST(SamplerTest, EveryIsaDrawsTheSameTokens) {
  core::Rng rng(9);
  std::vector<float> logits(151936);
  for (auto& x : logits) x = static_cast<float>(rng.Normal(0, 3.0));
  std::vector<std::vector<int32_t>> draws;
  std::vector<size_t> nucleus;
  for (core::Isa isa : core::IsaLevels()) {
    core::SetIsaCap(isa);
    std::vector<int32_t> d;
    for (SamplingParams p : {SamplingParams{.temperature = 0.9f, .seed = 5}, SamplingParams{.temperature = 0.8f, .top_p = 0.9f, .seed = 5}}) {
      Sampler s(p);
      for (int i = 0; i < 200; ++i) d.push_back(s.Sample(logits));
    }
    draws.push_back(d);
    Candidates c;
    TruncatedDistribution(logits, {.temperature = 0.8f, .top_p = 0.9f}, &c);
    nucleus.push_back(c.items.size());
  }
  core::SetIsaCap(core::Isa::kAvx512);
  EXPECT_EQ(draws[0], draws[1]);
  EXPECT_EQ(draws[0], draws[2]);
  EXPECT_EQ(nucleus[0], nucleus[1]);
  EXPECT_EQ(nucleus[0], nucleus[2]);
}

// Greedy sampling (and speculative decoding's verification, which runs it on every draft row)
// picks the lowest id among the maxima, on every ISA, as the scalar scan does.
TEST(SamplerTest, ArgmaxIsTheFirstMaximumOnEveryIsa) {
  core::Rng rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1 + rng.Below(3000));
    for (auto& x : logits) x = static_cast<float>(rng.Below(7)) - (rng.Below(10) == 0 ? INFINITY : 0.0f);  // ties, -inf
    int32_t want = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[static_cast<size_t>(want)]) want = static_cast<int32_t>(i);
    for (core::Isa isa : core::IsaLevels()) {
      core::SetIsaCap(isa);
      EXPECT_EQ(Argmax(logits), want) << trial;
    }
    core::SetIsaCap(core::Isa::kAvx512);
  }
}

}  // namespace
}  // namespace radixlm::sampling
