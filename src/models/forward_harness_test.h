// A test harness (models tests only): forward steps of several sequences against one KV store,
// with block tables handed out by a BlockPool.
#pragma once

#include <vector>

#include "cache/block_pool.h"
#include "core/thread_pool.h"
#include "models/kv_store.h"
#include "models/transformer.h"

namespace radixlm::models {

// Runs forward steps against one KV store, with block tables handed out by a BlockPool.
class Harness {
 public:
  explicit Harness(Transformer& m) : model_(m), store_(m.config(), {256, 16}), blocks_({256, 16}), pool_(2) {}

  std::vector<int32_t> NewSequence(int tokens) { return *blocks_.Allocate((tokens + 15) / 16); }

  struct Piece {
    const std::vector<int32_t>* table;
    std::vector<int32_t> ids;
    int32_t start_pos;
    bool all_logits;  // else last row only
  };
  // One forward over several sequences' token spans; returns logits of the requested rows.
  std::vector<float> Step(const std::vector<Piece>& pieces) {
    ForwardBatch b;
    ids_.clear();
    pos_.clear();
    rows_.clear();
    for (const Piece& p : pieces) {
      const int64_t begin = ids_.size();
      for (size_t i = 0; i < p.ids.size(); ++i) {
        ids_.push_back(p.ids[i]);
        pos_.push_back(p.start_pos + static_cast<int32_t>(i));
        if (p.all_logits || i + 1 == p.ids.size()) rows_.push_back(static_cast<int32_t>(begin + i));
      }
      b.seqs.push_back({begin, static_cast<int64_t>(p.ids.size()), *p.table});
    }
    b.token_ids = ids_;
    b.positions = pos_;
    b.logit_rows = rows_;
    std::vector<float> logits(rows_.size() * model_.config().vocab_size);
    model_.Forward(pool_, b, store_, logits.data());
    return logits;
  }

 private:
  Transformer& model_;
  KvStore store_;
  cache::BlockPool blocks_;
  core::ThreadPool pool_;
  std::vector<int32_t> ids_, pos_, rows_;
};

}  // namespace radixlm::models
