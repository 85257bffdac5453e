// engine::Executor on a real model: runs the copy-on-write block copies in the KV store, turns
// a step's sequences into one ForwardBatch, and runs the transformer.
#pragma once

#include "core/thread_pool.h"
#include "engine/executor.h"
#include "models/kv_store.h"
#include "models/transformer.h"

namespace radixlm::runner {

class ModelExecutor : public engine::Executor {
 public:
  // states: the SSM state slots of a model with Mamba2 layers (null otherwise).
  ModelExecutor(models::Transformer& model, core::ThreadPool& pool, models::KvStore& kv,
                models::SsmStateStore* states = nullptr)
      : model_(model), pool_(pool), kv_(kv), states_(states) {}
  void Execute(std::span<const engine::BlockCopy> copies, std::span<const engine::StepSequence> seqs,
               std::vector<float>* logits) override;
  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t max_context() const override { return model_.config().max_context; }
  int32_t state_slots() const override { return states_ ? states_->n_slots() : 0; }
  int32_t prefill_alignment() const override { return states_ ? model_.config().ssm_chunk : 0; }
  void CopyState(int32_t src, int32_t dst) override { states_->Copy(src, dst); }

 private:
  models::Transformer& model_;
  core::ThreadPool& pool_;
  models::KvStore& kv_;
  models::SsmStateStore* states_;
  std::vector<int32_t> ids_, positions_, rows_;
};

}  // namespace radixlm::runner
