#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) candidates_.push_back({logits[i] / params_.temperature, static_cast<int32_t>(i)});
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);
  const float max_logit = candidates_[0].first;
  // A temperature so small that logits / temperature overflows float is greedy sampling (its
  // limit); the softmax below would turn the overflow into NaN and pick the worst candidate.
  if (!std::isfinite(max_logit)) return Argmax(logits);
  double total = 0;
  for (auto& c : candidates_) total += (c.first = std::exp(c.first - max_logit));
  if (params_.top_p < 1.0f) {  // smallest prefix whose probability reaches top_p
    double cum = 0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cum += candidates_[n++].first / total;
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(n);
    total = 0;
    for (auto& c : candidates_) total += c.first;
  }
  double r = rng_.Uniform() * total;
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace radixlm::sampling
