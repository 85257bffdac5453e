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

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params), rng_(params.seed) {}
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  core::Rng rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t Argmax(std::span<const float> logits);

// log softmax(logits)[id]: the model's log-probability of a token (before temperature, top-k and
// top-p, as OpenAI's logprobs and best_of ranking use it).
double LogProb(std::span<const float> logits, int32_t id);

}  // namespace radixlm::sampling
