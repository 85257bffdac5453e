// Token sampling from logits: greedy, temperature, min-p, top-k, top-p (nucleus), seeded, and the
// repetition penalties (presence, frequency, repetition). Its own module (it sees only floats
// and ids) so the engine samples without depending on model code. Greedy (temperature 0) picks
// the lowest id among equal maxima, so it is deterministic.
// Order, as vLLM's sampler: penalties on the logits, then temperature, min-p, top-k, top-p.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/random.h"

namespace radixlm::sampling {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = all
  float top_p = 1.0f;        // 1 = all
  uint64_t seed = 0;
  // Tokens less likely than min_p x the most likely one (after temperature) are dropped.
  float min_p = 0.0f;
  // OpenAI's penalties over the tokens generated so far: logit -= frequency_penalty x count +
  // presence_penalty x (count > 0). vLLM's repetition penalty over prompt and generated tokens
  // (Keskar et al. 2019): a positive logit is divided by it, a negative one multiplied. 1 = off.
  float presence_penalty = 0.0f, frequency_penalty = 0.0f, repetition_penalty = 1.0f;
  bool HasPenalties() const { return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1; }
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
  // REQUIRES: logits already penalised (Penalize) when the params have penalties.
  int32_t Sample(std::span<const float> logits);

  // The penalties (SamplingParams::HasPenalties): the prompt is seen once, every token Sample
  // returns is counted; Penalize applies them to the logits of the next draw. O(distinct tokens
  // seen) per call.
  void SetPrompt(std::span<const int32_t> prompt);
  void Penalize(std::span<float> logits) const;
  const SamplingParams& params() const { return params_; }

 private:
  int32_t Draw(std::span<const float> logits);

  SamplingParams params_;
  core::Rng rng_;
  std::unordered_map<int32_t, int32_t> generated_counts_;  // with penalties: id -> times generated (0: prompt only)
  Candidates candidates_;
  std::vector<float> weights_;  // without top-k: every token's weight, drawn in id order
  std::vector<double> block_sums_;
  std::vector<std::pair<float, int32_t>> edge_;  // top-p: the nucleus's boundary bucket
};

int32_t Argmax(std::span<const float> logits);

// log softmax(logits)[id]: the model's log-probability of a token (before temperature, top-k and
// top-p, as OpenAI's logprobs and best_of ranking use it).
double LogProb(std::span<const float> logits, int32_t id);

// OpenAI's logprobs of one position: log softmax of the raw logits. `lse` = log sum exp(logits);
// `top` gets the k most likely (id, log-probability), best first (ties: the lower id). O(V).
double LogSumExp(std::span<const float> logits);
void TopLogProbs(std::span<const float> logits, int k, double lse, std::vector<std::pair<int32_t, float>>* top);

}  // namespace radixlm::sampling
