// engine::Executor on a real model: runs the copy-on-write block copies in the KV store, turns
// a step's sequences into one ForwardBatch, and runs the transformer.
//
// Intra-step prefix dedup (RadixMLP on prefill): sequences of a step whose contexts (tokens
// already in their KV) are equal form a group; rows with the same (token, position) path
// within a group are computed once, with attention in trie space. Rows the radix cache
// already holds never reach the executor, so the two compose: cached rows are not computed
// at all, rows new to the cache but shared within the step are computed once. Used when the
// step's compact/original ratio is below the threshold; never for models with Mamba2 layers
// (their state is per sequence).
#pragma once

#include "core/thread_pool.h"
#include "engine/executor.h"
#include "models/kv_store.h"
#include "models/transformer.h"
#include "tier/tier.h"

namespace radixlm::runner {

struct PrefillCompaction {
  double threshold = 0.92;  // compact a step when compact/original rows < this; 0 = never, 1 = always
  bool trie_attention = true;
};

class ModelExecutor : public engine::Executor {
 public:
  // states: the SSM state slots of a model with Mamba2 layers (null otherwise).
  ModelExecutor(models::Transformer& model, core::ThreadPool& pool, models::KvStore& kv,
                models::SsmStateStore* states = nullptr)
      : model_(model), pool_(pool), kv_(kv), states_(states) {}
  void set_compaction(PrefillCompaction c) { compaction_ = c; }
  // Cascade attention for decode rows that share prefix blocks (on by default; the answers are
  // the same either way, only the KV reads change).
  void set_cascade(bool on) { cascade_ = on; }
  // The tiers under the pool (borrowed; null: none): blocks move between them and the KV store.
  void set_tier(tier::Tier* t) { tier_ = t; }
  int64_t cascade_rows() const { return cascade_rows_; }  // rows attended in a cascade group
  int64_t cascade_nested_rows() const { return cascade_nested_rows_; }  // ... in a nested level
  void Execute(std::span<const engine::BlockCopy> copies, std::span<const engine::StepSequence> seqs,
               std::vector<float>* logits) override;
  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t max_context() const override { return model_.config().max_context; }
  int32_t state_slots() const override { return states_ ? states_->n_slots() : 0; }
  int32_t prefill_alignment() const override {
    return states_ && model_.config().n_ssm_layers() > 0 ? model_.config().ssm_chunk : 0;
  }
  void CopyState(int32_t src, int32_t dst) override { states_->Copy(src, dst); }
  int64_t deduplicated_rows() const override { return deduplicated_rows_; }
  bool shares_step_prefixes() const override { return !states_ && compaction_.threshold > 0; }
  int32_t LoadBlocks(std::span<const engine::BlockTransfer> loads) override;
  void StoreBlocks(std::span<const engine::BlockTransfer> stores) override;
  bool LoadState(const engine::StateTransfer& load) override;
  void StoreStates(std::span<const engine::StateTransfer> stores) override;

 private:
  models::Transformer& model_;
  core::ThreadPool& pool_;
  models::KvStore& kv_;
  models::SsmStateStore* states_;
  tier::Tier* tier_ = nullptr;
  std::vector<iovec> Segments(int32_t block) const;
  std::vector<iovec> StateSegments(const engine::StateTransfer& t) const;  // the slot, then the block's
  std::vector<int32_t> ids_, positions_, rows_;
  PrefillCompaction compaction_;
  bool cascade_ = true;
  int64_t cascade_rows_ = 0;
  int64_t cascade_nested_rows_ = 0;
  int64_t deduplicated_rows_ = 0;
  // The plan for this step, or null when it would not pay (or cannot be used).
  const models::CompactionPlan* PlanCompaction(std::span<const engine::StepSequence> seqs,
                                               std::span<const int64_t> seq_begin);
  models::CompactionPlan plan_;
};

}  // namespace radixlm::runner
