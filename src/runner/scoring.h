// Scoring forwards for embedding and reranking: no generation, no cache, one forward per
// packed group of sequences, with intra-batch prefix dedup (RadixMLP).
//
// Owns: a KV store sized for one forward (block ids handed out afresh every forward).
// Packing: sequences in order, a forward filled while its *computed* rows (compact rows when
// it will be compacted, else original rows) fit max_batch_tokens and its KV rows fit the store
// (kv_rows, by default 2 x max_batch_tokens). A forward is compacted when its compact/original ratio is below
// `threshold` (0 = never, 1 = always), with attention in trie space (the forward's common
// prefix blocks shared, as the radix cache shares them) or in the original layout.
// Invariant: results do not depend on packing or compaction (every kernel computes rows
// independently: outputs are bitwise those of each sequence run alone).
// Callers: `radixlm embed|rerank` and the server's ScoringQueue. Not thread-safe: one call at
// a time (the model itself serialises forwards with the engine).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/scoring_service.h"
#include "models/kv_store.h"
#include "models/transformer.h"

namespace radixlm::runner {

struct ScoringConfig {
  int64_t max_batch_tokens = 8192;
  // KV rows the store holds for one forward; 0 = 2 x max_batch_tokens. REQUIRES: 0 or at least
  // max_batch_tokens (a forward's first sequence always fits).
  int64_t kv_rows = 0;
  double threshold = 0.92;
  bool trie_attention = true;
  int32_t block_tokens = 16;
  core::DType kv_dtype = core::DType::kF32;
};

using engine::Pooling;
using engine::ScoringStats;  // the runner fills the forward-level fields

class ScoringRunner {
 public:
  ScoringRunner(models::Transformer& model, core::ThreadPool& pool, ScoringConfig config);

  // Pooled final-normed hidden states, one [d_model] vector per sequence; L2-normalised when
  // `normalize`. Errors (nothing computed): an empty sequence, one longer than
  // max_batch_tokens or the model's context, a token outside the vocabulary.
  core::StatusOr<std::vector<std::vector<float>>> Embed(std::span<const std::vector<int32_t>> seqs, Pooling pooling,
                                                        bool normalize);
  // logit(yes) - logit(no) at each sequence's last token: a yes/no reranker's relevance
  // logit (sigmoid of it = softmax over the two logits). Same errors as Embed.
  core::StatusOr<std::vector<double>> YesNoLogits(std::span<const std::vector<int32_t>> seqs, int32_t yes_id,
                                                  int32_t no_id);

  // Each token's log-probability after the tokens before it (positions 1.. of each sequence)
  // and the top_k most likely of its position: log softmax of the model's logits there. The
  // logits are computed from the final hidden states in chunks of rows, so memory stays
  // O(chunk x vocab) whatever the length. Same errors as Embed.
  core::StatusOr<std::vector<std::vector<engine::TokenLogprob>>> PromptLogprobs(std::span<const std::vector<int32_t>> seqs,
                                                                                 int top_k);

  // OK when Embed / YesNoLogits would accept these inputs.
  core::Status Validate(std::span<const std::vector<int32_t>> seqs) const;

  // Called after each forward with the sequences done so far and the call's total (a CLI's
  // progress bar); on the calling thread.
  void set_progress(std::function<void(size_t done, size_t total)> progress) { progress_ = std::move(progress); }

  const ScoringStats& stats() const { return stats_; }
  const ScoringConfig& config() const { return config_; }
  const models::ModelConfig& model_config() const { return model_.config(); }

 private:
  // What a forward returns: hidden states for pooling (none, each sequence's last row, or
  // every row) and/or the last rows' logits, read out once per computed row (duplicates of a
  // row share its output, so output memory is bounded by computed rows). Run calls
  // out(first, count, outputs) per forward, in sequence order.
  struct Outputs {
    std::optional<Pooling> pooling;
    bool logits = false;
  };
  struct ForwardOutputs {
    std::span<const float> hidden;        // [distinct rows, d_model]
    std::span<const int32_t> hidden_of;   // pooled rows in order (every row or each last row) -> row of hidden
    std::span<const float> logits;        // [distinct last rows, vocab_size]
    std::span<const int32_t> logits_of;   // [count] sequence -> row of logits
  };
  using OnForward = std::function<void(size_t first, size_t count, const ForwardOutputs& outputs)>;
  std::vector<size_t> Pack(std::span<const std::vector<int32_t>> seqs) const;  // forward starts + end
  void Run(std::span<const std::vector<int32_t>> seqs, const Outputs& what, const OnForward& out);

  models::Transformer& model_;
  core::ThreadPool& pool_;
  ScoringConfig config_;
  models::KvStore kv_;
  std::function<void(size_t, size_t)> progress_;
  ScoringStats stats_;
};

}  // namespace radixlm::runner
