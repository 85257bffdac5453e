// The seam between the HTTP server and what embeds and reranks: the server builds jobs of
// token ids and waits on futures; runner::ScoringQueue implements it on a real model.
// Kept here (not in runner/) so the server stays model-agnostic, as it is for generation.
#pragma once

#include <cstdint>
#include <future>
#include <vector>

#include "core/status.h"

namespace radixlm::engine {

enum class Pooling { kLastToken, kMean };

struct ScoringJob {
  // kPromptLogprobs: each input token's log-probability after the tokens before it (the
  // completions API's echo with logprobs), with the top_k most likely of its position.
  enum class Kind { kEmbed, kYesNo, kPromptLogprobs } kind = Kind::kEmbed;
  int top_k = 0;                          // kPromptLogprobs
  std::vector<std::vector<int32_t>> inputs;
  Pooling pooling = Pooling::kLastToken;  // kEmbed
  bool normalize = true;                  // kEmbed: L2
  int32_t yes_id = -1, no_id = -1;        // kYesNo
};

struct TokenLogprob {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // best first
};

struct ScoringResult {
  std::vector<std::vector<float>> embeddings;  // kEmbed, one per input
  std::vector<double> logits;                  // kYesNo: logit(yes) - logit(no), one per input
  // kPromptLogprobs, one per input: positions 1.. of the input (position 0 has no context).
  std::vector<std::vector<TokenLogprob>> prompt_logprobs;
};

struct ScoringStats {
  int64_t sequences = 0, forwards = 0, compacted_forwards = 0;
  int64_t original_rows = 0, computed_rows = 0;  // computed = compact rows of compacted forwards
  int64_t output_rows = 0;  // hidden-state and logit rows read out: one per distinct computed row
  double seconds = 0;
  int64_t batches = 0, jobs = 0, merged_jobs = 0;  // service level; merged: shared a batch with another job
  double ratio() const { return original_rows ? double(computed_rows) / original_rows : 1.0; }
};

class ScoringService {
 public:
  virtual ~ScoringService() = default;
  // Thread-safe. The future holds the result or why the job was refused (bad input, too long).
  virtual std::future<core::StatusOr<ScoringResult>> Submit(ScoringJob job) = 0;
  virtual ScoringStats stats() const = 0;
  virtual int64_t max_input_tokens() const = 0;
};

}  // namespace radixlm::engine
