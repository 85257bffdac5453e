// Token sampling from logits: greedy, temperature, top-k, top-p (nucleus), seeded. Its own
// module (it sees only floats and ids) so the engine samples without depending on model code.
// Greedy (temperature 0) picks the lowest id among equal maxima, so it is deterministic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/random.h"

namespace radixlm::sampling {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = all
  float top_p = 1.0f;        // 1 = all
  uint64_t seed = 0;
};

// The distribution a sampler draws from: the candidates top-k and top-p keep, with their
// unnormalised weights exp((logit - max) / temperature), in no particular order. The nucleus is
// the textbook one (the fewest heaviest tokens holding top_p of the mass, ties by id).
// Cost: O(V) passes and selection, never a sort of the vocabulary (top-p alone: the mass per
// weight bucket (8 per power of two) finds the boundary bucket, only that one is selected in,
// with top-k, selection within the candidates above a weight cutoff). Tokens below e^-30 of
// the best are dropped first: together under 1e-8 of the mass at any vocabulary size up to
// 10^6, below float's rounding of the total. The passes over the vocabulary run at the
// machine's vector width and give the same bits on every ISA.
struct Candidates {
  std::vector<std::pair<float, int32_t>> items;  // (weight, id)
  double total = 0;
};
// REQUIRES: temperature > 0 and the scaled best logit finite.
void TruncatedDistribution(std::span<const float> logits, const SamplingParams& params, Candidates* out);

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params), rng_(params.seed) {}
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  core::Rng rng_;
  Candidates candidates_;
  std::vector<float> weights_;  // without top-k: every token's weight, drawn in id order
  std::vector<double> block_sums_;
  std::vector<std::pair<float, int32_t>> edge_;  // top-p: the nucleus's boundary bucket
};

int32_t Argmax(std::span<const float> logits);

// log softmax(logits)[id]: the model's log-probability of a token (before temperature, top-k and
// top-p, as OpenAI's logprobs and best_of ranking use it).
double LogProb(std::span<const float> logits, int32_t id);

}  // namespace radixlm::sampling
