// The serving engine on a real model and everything it runs on: the KV pool the options size,
// the state slots and hybrid prefix cache of a model with recurrent layers, the executor with its
// prefill compaction and cascade settings, and the disk tier under the pool. `serve`, `chat`,
// `replay`, `batch` and `generate` all build it here, so they run the same engine from the same
// options.
#pragma once

#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "models/kv_store.h"
#include "models/transformer.h"
#include "runner/hybrid_cache_setup.h"
#include "runner/model_executor.h"
#include "runner/serving_options.h"
#include "tier/tier.h"

namespace radixlm::runner {

// The engine's configuration from the options: the one place an EngineConfig is filled from
// what a user asked for (the pool rounded up to whole blocks).
engine::EngineConfig MakeEngineConfig(const ServingOptions& o);

// Borrows the model and the pool; not movable (the engine holds references to its members).
class ServingEngine {
 public:
  // weights_path: where the weights came from, for the disk tier's fingerprint (needed with a
  // cache_dir); sampled_vocab: the tokenizer's size (ids past it are never sampled; 0: all).
  // Errors: options the model cannot run (speculation over a chunked scan, a hybrid policy it
  // does not serve), a disk tier that cannot be opened.
  static core::StatusOr<std::unique_ptr<ServingEngine>> Make(models::Transformer& model, core::ThreadPool& pool,
                                                             const ServingOptions& o, core::DType kv_dtype,
                                                             const std::string& weights_path = "", int64_t sampled_vocab = 0);
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;
  engine::Engine& engine() { return engine_; }
  // Sequences carry states (recurrent layers or window rings): hits end at checkpoints.
  bool has_states() const { return hybrid_.states != nullptr; }
  const models::KvStore& kv() const { return kv_; }
  tier::Tier* tiers() const { return tiers_.get(); }

 private:
  ServingEngine(models::Transformer& model, core::ThreadPool& pool, const ServingOptions& o, engine::EngineConfig config,
                core::DType kv_dtype, HybridServing hybrid, std::unique_ptr<tier::Tier> tiers);

  engine::EngineConfig config_;
  models::KvStore kv_;
  HybridServing hybrid_;
  ModelExecutor executor_;
  std::unique_ptr<tier::Tier> tiers_;  // before the engine: the engine's stores go to it until it stops
  engine::Engine engine_;
};

}  // namespace radixlm::runner
