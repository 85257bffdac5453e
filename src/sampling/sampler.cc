#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fast_exp.h"

namespace radixlm::sampling {

double LogProb(std::span<const float> logits, int32_t id) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float x : logits) mx = std::max(mx, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return static_cast<double>(logits[static_cast<size_t>(id)]) - mx - std::log(sum);
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

namespace {

bool ByWeight(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

void TruncatedDistribution(std::span<const float> logits, const SamplingParams& params, Candidates* out) {
  const float inv_t = 1.0f / params.temperature;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, x);
  const float best = max_logit * inv_t;
  auto& c = out->items;
  c.clear();
  c.reserve(logits.size());
  // Below e^-30 of the best token: dropped (see the header).
  for (size_t i = 0; i < logits.size(); ++i) {
    const float z = logits[i] * inv_t - best;
    if (z >= -30.0f) c.push_back({z, static_cast<int32_t>(i)});
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < c.size()) {
    const auto k = c.begin() + params.top_k;
    if (params.top_k <= 4096) std::partial_sort(c.begin(), k, c.end(), ByWeight);  // O(V log k): cheapest for small k
    else std::nth_element(c.begin(), k, c.end(), ByWeight);
    c.resize(params.top_k);
  }
  const size_t n_c = c.size();
  std::pair<float, int32_t>* cp = c.data();
  for (size_t i = 0; i < n_c; ++i) cp[i].first = core::ExpVec(cp[i].first);
  double total = 0;
  for (size_t i = 0; i < n_c; ++i) total += cp[i].first;
  if (params.top_p < 1.0f) {
    // The nucleus: the fewest most likely tokens (in ByWeight order) holding top_p of the mass.
    // First the tokens above a cutoff whose mass already reaches it (lowered 1000x until it
    // does: few tokens when the distribution is peaked), then halving by selection: if the
    // upper half of the range holds what is still needed, the nucleus ends inside it;
    // otherwise all of it is in and the rest is needed from the lower half. O(V) expected.
    double need = params.top_p * total;
    size_t hi = c.size();
    for (double cutoff = 1e-3; cutoff > 1e-14; cutoff *= 1e-3) {  // weights <= 1 (the best is 1)
      const auto mid = std::partition(c.begin(), c.end(), [&](const auto& x) { return x.first >= cutoff; });
      double mass = 0;
      for (auto it = c.begin(); it != mid; ++it) mass += it->first;
      if (mass >= need) {
        hi = static_cast<size_t>(mid - c.begin());
        break;
      }
    }
    size_t lo = 0;
    while (hi - lo > 64) {
      const size_t mid = lo + (hi - lo) / 2;
      std::nth_element(c.begin() + lo, c.begin() + mid, c.begin() + hi, ByWeight);
      double mass = 0;
      for (size_t i = lo; i < mid; ++i) mass += c[i].first;
      if (mass >= need) {
        hi = mid;
      } else {
        need -= mass;
        lo = mid;
      }
    }
    std::sort(c.begin() + lo, c.begin() + hi, ByWeight);
    size_t n = lo;
    double cum = 0;
    while (n < hi) {
      cum += c[n++].first;
      if (cum >= need) break;
    }
    if (cum < need) {  // rounding left the range short: continue in order below it
      std::sort(c.begin() + hi, c.end(), ByWeight);
      while (n < c.size() && cum < need) cum += c[n++].first;
    }
    c.resize(n);
    total = 0;
    for (const auto& x : c) total += x.first;
  }
  out->total = total;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  // A temperature so small that logits / temperature overflows float is greedy sampling (its
  // limit); the softmax would turn the overflow into NaN and pick the worst candidate.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, x);
  if (!std::isfinite(max_logit / params_.temperature)) return Argmax(logits);
  if (params_.top_k <= 0 && params_.top_p >= 1.0f) {
    // Temperature alone: nothing to truncate, so no candidate list; the weights in one
    // vectorised pass (tokens below e^-30 of the best weigh 0, as in TruncatedDistribution).
    const float inv_t = 1.0f / params_.temperature, best = max_logit * inv_t;
    const size_t n = logits.size();
    weights_.resize(n);
    float* w = weights_.data();
    const float* l = logits.data();
    for (size_t i = 0; i < n; ++i) {
      const float z = std::max(l[i] * inv_t - best, -30.0f);
      w[i] = z > -30.0f ? core::ExpVec(z) : 0.0f;
    }
    // Sums per block of 256 (float lanes the compiler vectorises), so the draw skips whole
    // blocks and walks one.
    constexpr size_t kBlock = 256;
    const size_t blocks = (n + kBlock - 1) / kBlock;
    block_sums_.resize(blocks);
    double total = 0;
    for (size_t b = 0; b < blocks; ++b) {
      float s = 0;
      for (size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) s += w[i];
      block_sums_[b] = s;
      total += s;
    }
    double r = rng_.Uniform() * total;
    size_t b = 0;
    while (b + 1 < blocks && r > block_sums_[b]) r -= block_sums_[b++];
    int32_t last = static_cast<int32_t>(b * kBlock);
    for (size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      if (w[i] == 0.0f) continue;
      last = static_cast<int32_t>(i);
      r -= w[i];
      if (r <= 0) return last;
    }
    return last;
  }
  TruncatedDistribution(logits, params_, &candidates_);
  double r = rng_.Uniform() * candidates_.total;
  for (const auto& c : candidates_.items) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.items.back().second;
}

}  // namespace radixlm::sampling
