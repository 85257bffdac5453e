// A loaded model described for people and tools: what `radixlm info` prints and what the disk
// tier's fingerprint and `bench --json` name as the numerics.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "models/transformer.h"

namespace radixlm::models {

// What the matrix products compute with on this CPU, one part per distinct weight type, largest
// share first: e.g. "q4_k weights x int8 activations (avx512 vnni)", "bf16 weights x bf16
// activations (vdpbf16ps)".
std::string MatmulDescription(const Transformer& m);

// `info --json`: architecture, sizes, dtypes, layer kinds; "ssm": the recurrent layers' shape and
// the state one sequence holds (null without them); "experts": the experts' layout and what a
// decode token reads of them (null for a dense model). kv_dtype: "f32" | "bf16" | "f16".
nlohmann::json ModelInfoJson(const Transformer& m, const std::string& kv_dtype);

}  // namespace radixlm::models
