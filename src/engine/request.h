// What a client submits to the engine and what it gets back, token by token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sampling/constraint.h"
#include "sampling/sampler.h"

namespace radixlm::engine {

using RequestId = int64_t;

struct RequestParams {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  std::vector<int32_t> stop_ids;
  // Until this many tokens are generated, stop_ids cannot be sampled (their logits are -inf).
  int min_tokens = 0;
  sampling::SamplingParams sampling;
  // A recorded completion replayed in place of sampling (a trace, a cache warm-up): its tokens
  // are emitted and their KV computed exactly as if they had been generated, and no logits are
  // computed. max_tokens is then its length, which may be 0 (the prompt only).
  std::optional<std::vector<int32_t>> continuation;
  // Tenancy: requests with different salts never share cached prefixes or step rows (vLLM's and
  // SGLang's cache_salt). Empty: the shared default.
  std::string cache_salt;
  // Sum the sampled tokens' log-probabilities into Usage::cumulative_logprob (best_of ranks by it).
  bool cumulative_logprob = false;
  // OpenAI's logprobs: -1 off; k >= 0: every generated token's event carries its log-probability
  // under the model (log softmax of the raw logits, before penalties, temperature or a
  // constraint) and the k most likely tokens of that position.
  int top_logprobs = -1;
  // A constraint on the output (a grammar); each request needs its own object (it holds the
  // sequence's state). Recorded continuations ignore it.
  std::shared_ptr<sampling::TokenConstraint> constraint;
  // OpenAI's logit_bias (and serve --logit-bias): added to each token's logit before the penalties
  // and the sampler; logprobs stay the model's.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The client will send the prompt's first `tokens` again (Anthropic's cache_control, the
  // Responses API's prompt_cache_key): once the request finishes, the prefix cache keeps that
  // prefix ahead of unmarked ones for ttl_seconds (cache::Memory::Mark). 0: no mark.
  struct CacheMark {
    int64_t tokens = 0;
    double ttl_seconds = 300;
  } cache_mark;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens served from the prefix cache (first admission)
  int64_t completion_tokens = 0;
  int64_t preemptions = 0;
  double ttft_seconds = 0;        // submission to first generated token
  double total_seconds = 0;
  double cumulative_logprob = 0;  // with RequestParams::cumulative_logprob
};

// Delivered on the engine thread; keep handlers short (push into a queue).
struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;             // -1 on the final event when no token accompanies it
  FinishReason finish = FinishReason::kNone;
  std::string error;              // with kError
  Usage usage;                    // filled on the final event
  // With RequestParams::top_logprobs >= 0, for `token`: its log-probability and the most likely
  // (id, log-probability) of its position.
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs;
};
using TokenCallback = std::function<void(const TokenEvent&)>;

}  // namespace radixlm::engine
