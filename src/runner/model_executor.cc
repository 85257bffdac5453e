#include "runner/model_executor.h"

namespace radixlm::runner {

void ModelExecutor::Execute(std::span<const engine::BlockCopy> copies, std::span<const engine::StepSequence> seqs,
                            std::vector<float>* logits) {
  for (const engine::BlockCopy& c : copies) kv_.CopyBlockPrefix(c.src, c.dst, c.tokens);
  ids_.clear();
  positions_.clear();
  rows_.clear();
  models::ForwardBatch b;
  for (const engine::StepSequence& s : seqs) {
    const int64_t begin = static_cast<int64_t>(ids_.size());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      ids_.push_back(s.tokens[i]);
      positions_.push_back(s.start_position + static_cast<int32_t>(i));
    }
    if (s.want_logits) rows_.push_back(static_cast<int32_t>(ids_.size() - 1));
    b.seqs.push_back({begin, static_cast<int64_t>(s.tokens.size()), s.block_table});
    if (states_) {
      RADIXLM_CHECK_MSG(s.state_slot >= 0, "a model with Mamba2 layers needs a state slot per sequence");
      if (s.restore_from >= 0) {
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
  logits->resize(rows_.size() * model_.config().vocab_size);
  model_.Forward(pool_, b, kv_, logits->data(), states_);
}

}  // namespace radixlm::runner
