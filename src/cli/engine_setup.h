// The serving engine as the CLI builds it from --kv-tokens, --max-running and friends: shared by
// serve, replay and chat so the three run the same engine from the same options.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cache_tier_setup.h"
#include "cli/common.h"
#include "engine/engine.h"
#include "core/thread_pool.h"
#include "models/kv_store.h"
#include "models/transformer.h"
#include "runner/hybrid_cache_setup.h"
#include "runner/model_executor.h"

namespace radixlm::cli {

void AddEngineOptions(CLI::App* cmd, EngineOptions* o);
// serve and chat: a chat history comes back as text, so the next turn's tokens can leave the
// cached path inside the previous reply (its text tokenizes otherwise than it was generated, or
// the template rewrites it, as Qwen3.5's drops the reasoning); on a hybrid the deepest exact state
// before that point is the previous prompt's end. So those commands keep every prompt end at
// least 32 tokens past the state its request started from (a user message's worth).
// Call before AddEngineOptions (its help shows the default).
void ChatServingDefaults(EngineOptions* o);
// --speculate, --draft-max, --spec-max-rows (part of AddEngineOptions; for commands that take
// only these).
void AddSpeculateOptions(CLI::App* cmd, EngineOptions* o);

// The serving engine on a model and everything it runs on: the KV pool the options size, the
// state slots and hybrid prefix cache of a model with recurrent layers, the executor with its
// prefill compaction and cascade settings. Borrows the model and the pool; not movable (the
// engine holds references to its members).
class ServingEngine {
 public:
  // model_options: where the weights came from, for the disk tier's fingerprint (needed with
  // --cache-dir); sampled_vocab: the tokenizer's size (ids past it are never sampled; 0: all).
  ServingEngine(models::Transformer& model, core::ThreadPool& pool, const EngineOptions& o, core::DType kv_dtype,
                const ModelOptions* model_options = nullptr, int64_t sampled_vocab = 0);
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;
  engine::Engine& engine() { return engine_; }
  const models::KvStore& kv() const { return kv_; }
  tier::DiskTier* disk_tier() const { return disk_.get(); }

 private:
  engine::EngineConfig config_;
  models::KvStore kv_;
  runner::HybridServing hybrid_;
  runner::ModelExecutor executor_;
  std::unique_ptr<tier::DiskTier> disk_;  // before the engine: the engine's stores go to it until it stops
  engine::Engine engine_;
};

}  // namespace radixlm::cli
