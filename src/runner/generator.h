// Single-sequence generation on a real model: chunked prefill then decode, through a KV
// store whose blocks come from a BlockPool. The serving engine (continuous batching, the
// radix cache) replaces this for many sequences; this is the plain path that CLI commands
// and tests compare against.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cache/block_pool.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "models/kv_store.h"
#include "sampling/sampler.h"
#include "models/transformer.h"

namespace radixlm::runner {

// A KV store and block pool sized for `tokens` positions of one sequence (16-token blocks):
// what a Generator runs on.
struct SequenceKv {
  static constexpr int kBlockTokens = 16;
  SequenceKv(const models::ModelConfig& c, int64_t tokens, core::DType dtype)
      : blocks(static_cast<int32_t>((tokens + kBlockTokens - 1) / kBlockTokens)),
        store(c, {blocks, kBlockTokens, dtype}), pool({blocks, kBlockTokens}) {}
  int32_t blocks;
  models::KvStore store;
  cache::BlockPool pool;
};

struct GenerateOptions {
  int max_tokens = 16;
  std::vector<int32_t> stop_ids;     // generation ends after emitting one of these
  sampling::SamplingParams sampling;
  int prefill_chunk = 512;           // tokens per prefill forward
};

struct GenerateResult {
  std::vector<int32_t> tokens;       // generated ids (including a final stop id)
  double prefill_seconds = 0;
  double decode_seconds = 0;         // all decode steps
  int decode_steps = 0;
  bool stopped = false;              // ended on a stop id
};

class Generator {
 public:
  Generator(models::Transformer& model, core::ThreadPool& pool, models::KvStore& kv, cache::BlockPool& blocks)
      : model_(model), pool_(pool), kv_(kv), blocks_(blocks) {
    // A model with Mamba2 layers carries one recurrent state: slot 0, reset per call.
    if (model.config().n_ssm_layers() > 0) states_ = std::make_unique<models::SsmStateStore>(model.config(), 1);
  }

  // on_token(id) is called as each token is produced; returning false stops generation.
  core::StatusOr<GenerateResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                          const std::function<bool(int32_t)>& on_token = {});
  // Logits of every position of `ids` ([n, vocab]) computed in one prefill.
  core::StatusOr<std::vector<float>> AllLogits(const std::vector<int32_t>& ids);

 private:
  models::Transformer& model_;
  core::ThreadPool& pool_;
  models::KvStore& kv_;
  cache::BlockPool& blocks_;
  std::unique_ptr<models::SsmStateStore> states_;
  void Run(models::ForwardBatch& b, float* logits);
};

struct PerplexityResult {
  double perplexity = 0;
  int64_t tokens_scored = 0, windows = 0;
};

// Perplexity of a token sequence as train/train_kjv.py computes it: cut into windows of ctx
// tokens, each window's tokens after its first scored from the logits of the window so far;
// exp(mean negative log-likelihood), accumulated in double. on_window(w): after each window.
// Errors: fewer than two ids, ctx past the model's context.
core::StatusOr<PerplexityResult> Perplexity(models::Transformer& model, core::ThreadPool& pool, const std::vector<int32_t>& ids,
                                            int64_t ctx, core::DType kv_dtype,
                                            const std::function<void(int64_t)>& on_window = {});

}  // namespace radixlm::runner
