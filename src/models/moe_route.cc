#include "models/moe_route.h"

#include <algorithm>
#include <cmath>

namespace radixlm::models {
namespace {

// probs = softmax(logits) | sigmoid(logits) | logits.
void Probabilities(const MoeConfig& m, const float* l, float* probs) {
  const int64_t E = m.experts;
  if (m.gating == MoeConfig::Gating::kSoftmax) {
    const float mx = *std::max_element(l, l + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += probs[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) probs[e] = static_cast<float>(probs[e] / sum);
  } else if (m.gating == MoeConfig::Gating::kSigmoid) {
    for (int64_t e = 0; e < E; ++e) probs[e] = 1.0f / (1.0f + std::exp(-l[e]));
  } else {
    std::copy(l, l + E, probs);
  }
}

// Group-limited selection: only the groups_used groups whose two best experts score highest
// keep their ranks (DeepSeek-V3's rule, llama.cpp's and Nemotron-H's).
void KeepBestGroups(const MoeConfig& m, RouteScratch* s) {
  const int64_t per = m.experts / m.groups;
  for (int g = 0; g < m.groups; ++g) {
    float a = -INFINITY, b = -INFINITY;
    for (int64_t e = g * per; e < (g + 1) * per; ++e) {
      if (s->rank[e] > a) {
        b = a;
        a = s->rank[e];
      } else if (s->rank[e] > b) {
        b = s->rank[e];
      }
    }
    s->group_score[g] = a + b;
    s->groups[g] = g;
  }
  std::partial_sort(s->groups.begin(), s->groups.begin() + m.groups_used, s->groups.end(), [&](int32_t x, int32_t y) {
    return s->group_score[x] > s->group_score[y] || (s->group_score[x] == s->group_score[y] && x < y);
  });
  std::vector<bool> keep(m.groups, false);
  for (int g = 0; g < m.groups_used; ++g) keep[s->groups[g]] = true;
  for (int64_t e = 0; e < m.experts; ++e)
    if (!keep[e / per]) s->rank[e] = -INFINITY;
}

}  // namespace

void RouteRow(const MoeConfig& m, const float* logits, const float* selection_bias, int32_t* ids, float* wt,
              RouteScratch* s) {
  const int64_t E = m.experts, K = m.used;
  s->probs.resize(E);
  s->rank.resize(E);
  s->order.resize(E);
  s->group_score.resize(m.groups);
  s->groups.resize(m.groups);
  Probabilities(m, logits, s->probs.data());
  for (int64_t e = 0; e < E; ++e) s->rank[e] = s->probs[e] + (selection_bias ? selection_bias[e] : 0.0f);
  if (m.groups > 1) KeepBestGroups(m, s);
  for (int64_t e = 0; e < E; ++e) s->order[e] = static_cast<int32_t>(e);
  std::partial_sort(s->order.begin(), s->order.begin() + K, s->order.end(), [&](int32_t x, int32_t y) {
    return s->rank[x] > s->rank[y] || (s->rank[x] == s->rank[y] && x < y);
  });
  for (int64_t j = 0; j < K; ++j) {
    ids[j] = s->order[j];
    wt[j] = s->probs[s->order[j]];
  }
  if (m.gating == MoeConfig::Gating::kSoftmaxChosen) {
    const float mx = *std::max_element(wt, wt + K);
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += wt[j] = std::exp(wt[j] - mx);
    for (int64_t j = 0; j < K; ++j) wt[j] /= sum;
  }
  if (m.norm_weights) {
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += wt[j];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's clamp (the smallest normal f16)
    for (int64_t j = 0; j < K; ++j) wt[j] /= sum;
  }
  if (m.weights_scale != 1.0f)
    for (int64_t j = 0; j < K; ++j) wt[j] *= m.weights_scale;
}

}  // namespace radixlm::models
