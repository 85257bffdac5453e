// Speculative decoding measured on one prompt: `generate --speculate` and `bench --speculate`
// run one prompt through the serving engine (engine::SpeculateConfig), so what they measure is
// what `serve` does.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "models/transformer.h"
#include "runner/generator.h"
#include "runner/serving_options.h"

namespace radixlm::runner {

struct SpeculativeRun {
  std::vector<int32_t> tokens;
  bool stopped = false;
  double prefill_seconds = 0;    // submission to the first token
  double decode_seconds = 0;     // first token to the last
  int64_t decode_steps = 0;      // engine steps after the first token
  int64_t drafted = 0, accepted = 0, verifications = 0;
  nlohmann::json by_origin;      // {origin: {verifications, drafted, accepted}} of origins that drafted
};

// One request (gen's sampling, stops and max_tokens) on a fresh engine of `eo` (its prefix
// cache starts empty, so a run never drafts from an earlier run's answer). on_token: each
// token as it is produced (may be empty).
core::StatusOr<SpeculativeRun> RunSpeculative(models::Transformer& model, core::ThreadPool& pool,
                                              const std::vector<int32_t>& prompt, const GenerateOptions& gen,
                                              const ServingOptions& eo, core::DType kv_dtype,
                                              const std::function<void(int32_t)>& on_token = {});

// bench --speculate: decode tokens/s of `repeats` runs (median), tokens and accepted draft
// tokens per verification step, the acceptance rate by draft origin, and the verification
// cost: the forward time of r = 1 .. draft_max + 1 rows of one sequence at the prompt's end
// over the time of one row (what a step that verifies a draft of r - 1 tokens costs), with the
// speed-up those costs and the measured acceptance imply, as one JSON object.
// sampling: greedy by default; with a temperature, run r uses seed + r.
core::StatusOr<nlohmann::json> BenchSpeculativeDecode(models::Transformer& model, core::ThreadPool& pool,
                                                     const std::vector<int32_t>& prompt, int gen_tokens,
                                                     const sampling::SamplingParams& sampling, const ServingOptions& eo,
                                                     core::DType kv_dtype, int repeats);

}  // namespace radixlm::runner
