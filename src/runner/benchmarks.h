// Benchmarks of the sharing mechanisms on a real model, for `radixlm bench`: each returns the
// run's figures as one JSON object (bench/ scripts read them).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/transformer.h"

namespace radixlm::runner {

// RadixMLP: prefill of `batch` sequences sharing a `prefix` (+ `suffix` own tokens each) through
// the scoring runner, compaction off, gather or trie (tokens/s, observed and ideal ratios).
core::StatusOr<nlohmann::json> BenchCompaction(models::Transformer& model, core::ThreadPool& pool, int batch, int prefix, int suffix,
                                               const std::string& mode, int max_batch_tokens, int repeats, core::DType kv_dtype);
// Cascade attention: decode of `batch` requests sharing a cached prefix through the engine, on or
// off (decode tokens/s, where the time goes, KV bytes read per step in each mode).
core::StatusOr<nlohmann::json> BenchCascadeDecode(models::Transformer& model, core::ThreadPool& pool, int batch, int prefix,
                                                  int suffix, int gen_tokens, bool cascade, core::DType kv_dtype);

}  // namespace radixlm::runner
