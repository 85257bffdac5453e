// Sampling cost per token on a Qwen3-sized vocabulary (151,936 logits): the selection-based
// truncation the engine uses against the full sort it replaced, for temperature alone, top-k
// and top-p, on flat (random-weight model) and peaked logits. Compare with a decode step of the
// same model (`radixlm bench -m random:qwen3-0.6b --gen-tokens 32 --json`: 1 / decode_tokens_per_s).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/random.h"
#include "sampling/sampler.h"

namespace {

using radixlm::sampling::Sampler;
using radixlm::sampling::SamplingParams;

std::vector<float> Logits(double spread) {
  radixlm::core::Rng rng(1);
  std::vector<float> l(151936);
  for (auto& x : l) x = rng.Normal(0, static_cast<float>(spread));
  return l;
}

SamplingParams Params(int mode) {
  switch (mode) {
    case 1: return {.temperature = 0.7f, .top_k = 40, .seed = 1};
    case 2: return {.temperature = 0.8f, .top_p = 0.9f, .seed = 1};
    default: return {.temperature = 1.0f, .seed = 1};
  }
}

// The sampler before: every logit into a candidate list, the whole list sorted (partial sort
// with top-k), softmax, nucleus, draw.
int32_t SortedSample(const std::vector<float>& logits, const SamplingParams& p, radixlm::core::Rng& rng,
                     std::vector<std::pair<float, int32_t>>& c) {
  c.clear();
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({logits[i] / p.temperature, static_cast<int32_t>(i)});
  auto by = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = c.size();
  if (p.top_k > 0) {
    keep = p.top_k;
    std::partial_sort(c.begin(), c.begin() + keep, c.end(), by);
  } else {
    std::sort(c.begin(), c.end(), by);
  }
  c.resize(keep);
  const float mx = c[0].first;
  double total = 0;
  for (auto& x : c) total += (x.first = std::exp(x.first - mx));
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < c.size()) {
      cum += c[n++].first / total;
      if (cum >= p.top_p) break;
    }
    c.resize(n);
    total = 0;
    for (auto& x : c) total += x.first;
  }
  double r = rng.Uniform() * total;
  for (const auto& x : c) {
    r -= x.first;
    if (r <= 0) return x.second;
  }
  return c.back().second;
}

void BM_Selection(benchmark::State& state) {
  const auto logits = Logits(state.range(1) / 10.0);
  Sampler s(Params(static_cast<int>(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(s.Sample(logits));
}

void BM_FullSort(benchmark::State& state) {
  const auto logits = Logits(state.range(1) / 10.0);
  const SamplingParams p = Params(static_cast<int>(state.range(0)));
  radixlm::core::Rng rng(1);
  std::vector<std::pair<float, int32_t>> c;
  for (auto _ : state) benchmark::DoNotOptimize(SortedSample(logits, p, rng, c));
}

// Args: mode (0 temperature, 1 top-k 40, 2 top-p 0.9), logit spread x 10 (10 flat, 40 peaked).
BENCHMARK(BM_Selection)->ArgsProduct({{0, 1, 2}, {10, 40}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FullSort)->ArgsProduct({{0, 1, 2}, {10, 40}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
