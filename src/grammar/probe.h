// Probing a compiled grammar from outside the server: random documents drawn from its masks,
// mask timings over them, texts and JSON instances fed to a matcher. `radixlm grammar` prints
// these for the differential schema fuzzer (fuzz/schema_diff.py), the sample checks against
// python3-jsonschema and the mask-latency bench.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {

struct WalkOptions {
  int max_tokens = 512;
  double stop_bias = 0.5;      // probability of taking a stop token when one is allowed
  int64_t fuel = kStepFuel;    // work units a mask or a token may cost
};

struct Walk {
  std::vector<int32_t> tokens;
  std::vector<double> mask_us;
  int64_t max_mask_units = 0;  // the costliest mask's work units (matcher.h: kStepFuel)
  bool stopped = false;
};

// A random document: each step fills the mask and takes a uniformly random allowed token,
// except that a stop token, when allowed, is taken with probability stop_bias. Error
// (ResourceExhausted): a mask exceeded the work budget.
core::StatusOr<Walk> RandomWalk(Matcher& m, std::mt19937_64& rng, const WalkOptions& o);

// A random document cut at max_tokens and completed by the grammar's shortest completion (a
// whole document): {"document", "completed", "tokens", "max_mask_units"}.
core::StatusOr<nlohmann::json> SampleDocument(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng,
                                              const WalkOptions& o);

// Mask latency over `runs` random documents: {"runs", "tokens", "documents_completed",
// "mask_us_median", "mask_us_p99", "mask_us_max", "mask_us_mean", "mask_units_max"}.
core::StatusOr<nlohmann::json> BenchMasks(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, int runs,
                                          const WalkOptions& o);

// A text fed byte by byte: {"prefix": accepted as a prefix, "complete": a whole document}.
nlohmann::json CheckText(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text);

// One {"schema", "instances": [values]} case: {"compiled", "compile_ms", "error"} or
// {"compiled", "compile_ms", "accept": [[compact, python-style], ...]}: whether the schema's
// grammar accepts each instance as a whole document (any member order; json_feed.h). Compiled
// for a byte vocabulary (acceptance of text does not depend on the tokenizer), within the
// server's bounds (grammar_cache.h). Error: the row has no schema.
core::StatusOr<nlohmann::json> CheckCase(const nlohmann::ordered_json& row);

}  // namespace radixlm::grammar
