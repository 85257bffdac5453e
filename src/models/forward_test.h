// One forward of a hand-built batch and its logits, for the models tests that build their own
// ForwardBatch (prefix_compaction_test.cc, hybrid_model_test.cc).
#pragma once

#include <vector>

#include "core/thread_pool.h"
#include "models/kv_store.h"
#include "models/ssm_state.h"
#include "models/transformer.h"

namespace radixlm::models {

// The logits of the batch's logit rows: [logit_rows.size(), vocab_size].
inline std::vector<float> ForwardLogits(Transformer& model, core::ThreadPool& pool, const ForwardBatch& batch, KvStore& kv,
                                        SsmStateStore* states = nullptr) {
  std::vector<float> logits(batch.logit_rows.size() * model.config().vocab_size);
  model.Forward(pool, batch, kv, logits.data(), states);
  return logits;
}

}  // namespace radixlm::models
