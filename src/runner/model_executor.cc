#include "runner/model_executor.h"

#include <algorithm>

namespace radixlm::runner {

const models::CompactionPlan* ModelExecutor::PlanCompaction(std::span<const engine::StepSequence> seqs,
                                                            std::span<const int64_t> seq_begin) {
  // Recurrent layers run each sequence's rows in order; window rings are per sequence but
  // written row by row like paged KV, so compaction unfolds their layers' attention.
  const bool recurrent = states_ && !states_->has_rings();
  if (recurrent || compaction_.threshold <= 0 || seqs.size() < 2) return nullptr;
  // Rows can be shared only between sequences whose first rows agree (token and position):
  // a cheap test that skips decode-only steps before contexts are compared.
  std::vector<std::pair<int32_t, int32_t>> firsts;
  for (const engine::StepSequence& s : seqs)
    if (!s.tokens.empty()) firsts.push_back({s.start_position, s.tokens[0]});
  std::ranges::sort(firsts);
  if (std::ranges::adjacent_find(firsts) == firsts.end()) return nullptr;
  // Context groups: equal contexts (compared in full, hashed first) share a group id.
  std::vector<int64_t> group(seqs.size());
  std::vector<uint64_t> hash(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    uint64_t h = 1469598103934665603ull ^ seqs[i].context.size();
    for (int32_t t : seqs[i].context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    hash[i] = h;
    group[i] = static_cast<int64_t>(i);
    for (size_t j = 0; j < i; ++j) {
      if (group[j] == static_cast<int64_t>(j) && hash[j] == h && seqs[j].share_group == seqs[i].share_group &&
          std::ranges::equal(seqs[j].context, seqs[i].context)) {
        group[i] = static_cast<int64_t>(j);
        break;
      }
    }
  }
  plan_ = models::BuildCompactionPlan(ids_, positions_, seq_begin, 0, group);
  const bool use = compaction_.threshold >= 1.0 || plan_.ratio() < compaction_.threshold;
  if (!use) return nullptr;
  deduplicated_rows_ += plan_.original_rows() - plan_.compact_rows();
  return &plan_;
}

std::vector<iovec> ModelExecutor::Segments(int32_t block) const {
  std::vector<iovec> v;
  for (const models::KvStore::Segment& s : kv_.BlockSegments(block)) v.push_back({s.data, s.bytes});
  return v;
}

int32_t ModelExecutor::LoadBlocks(std::span<const engine::BlockTransfer> loads) {
  if (!tier_ || loads.empty()) return 0;
  // Admission runs between steps, when the compute threads are idle: they read (and verify)
  // the blocks in parallel. A block past a failed one is loaded for nothing and recomputed.
  // Each thread's share goes as one batch (a remote medium pipelines its round trips).
  std::vector<char> ok(loads.size(), 0);
  pool_.ParallelFor(static_cast<int64_t>(loads.size()), [&](int, int64_t begin, int64_t end) {
    std::vector<cache::TierKey> keys;
    std::vector<std::vector<iovec>> dst;
    for (int64_t i = begin; i < end; ++i) {
      keys.push_back(loads[i].key);
      dst.push_back(Segments(loads[i].block));
    }
    tier_->LoadMany(keys, dst, std::span<char>(ok.data() + begin, static_cast<size_t>(end - begin)));
  });
  return static_cast<int32_t>(std::find(ok.begin(), ok.end(), 0) - ok.begin());
}

std::vector<iovec> ModelExecutor::StateSegments(const engine::StateTransfer& t) const {
  std::vector<iovec> v = {{states_->SlotData(t.slot), states_->slot_bytes()}};
  if (t.block >= 0)
    for (const iovec& s : Segments(t.block)) v.push_back(s);
  return v;
}

bool ModelExecutor::LoadState(const engine::StateTransfer& t) {
  return tier_ && states_ && tier_->LoadState(t.key, StateSegments(t));
}

void ModelExecutor::StoreStates(std::span<const engine::StateTransfer> stores) {
  if (!tier_ || !states_) return;
  for (const engine::StateTransfer& t : stores) tier_->StoreState(t.key, t.parent, t.tail, StateSegments(t));
}

void ModelExecutor::StoreBlocks(std::span<const engine::BlockTransfer> stores) {
  if (!tier_) return;
  for (const engine::BlockTransfer& t : stores) tier_->Store(t.key, Segments(t.block));
}

void ModelExecutor::Execute(std::span<const engine::BlockCopy> copies, std::span<const engine::StepSequence> seqs,
                            std::vector<float>* logits) {
  for (const engine::BlockCopy& c : copies) kv_.CopyBlockPrefix(c.src, c.dst, c.tokens);
  ids_.clear();
  positions_.clear();
  rows_.clear();
  models::ForwardBatch b;
  std::vector<int64_t> seq_begin = {0};
  for (const engine::StepSequence& s : seqs) {
    const int64_t begin = static_cast<int64_t>(ids_.size());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      ids_.push_back(s.tokens[i]);
      positions_.push_back(s.start_position + static_cast<int32_t>(i));
    }
    for (int32_t k = s.logit_rows; k > 0; --k) rows_.push_back(static_cast<int32_t>(ids_.size()) - k);
    b.seqs.push_back({begin, static_cast<int64_t>(s.tokens.size()), s.block_table});
    seq_begin.push_back(static_cast<int64_t>(ids_.size()));
    if (states_) {
      RADIXLM_CHECK_MSG(s.state_slot >= 0, "a model with recurrent layers or window rings needs a state slot per sequence");
      if (s.restore_from >= 0 && states_->has_rings()) {
        states_->CopyWindow(s.restore_from, s.state_slot, s.start_position);
      } else if (s.restore_from >= 0) {
        states_->Copy(s.restore_from, s.state_slot);
      } else if (s.reset_state) {
        states_->Reset(s.state_slot);
      }
      models::SsmSeq seq{s.state_slot, {}};
      for (const auto& c : s.checkpoints) seq.checkpoints.push_back({c.after_tokens, c.slot});
      b.ssm.push_back(std::move(seq));
    }
  }
  b.token_ids = ids_;
  b.positions = positions_;
  b.logit_rows = rows_;
  b.compaction = PlanCompaction(seqs, seq_begin);
  b.trie_attention = b.compaction && compaction_.trie_attention;
  if (cascade_ && !b.compaction)
    b.cascade = kernels::PlanCascadeGroups(b.seqs, positions_.data(), kv_.block_tokens(),
                                           kernels::AttentionSplitTokens(kv_.block_tokens()));
  for (const kernels::CascadeGroup& g : b.cascade)
    (g.first_chunk == 0 ? cascade_rows_ : cascade_nested_rows_) += static_cast<int64_t>(g.rows.size());
  logits->resize(rows_.size() * model_.config().vocab_size);
  model_.Forward(pool_, b, kv_, logits->data(), states_);
}

}  // namespace radixlm::runner
