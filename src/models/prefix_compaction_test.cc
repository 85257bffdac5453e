// The RadixMLP index maps (mirroring the reference suite), and the forward with compaction
// against the forward without it.
#include "models/prefix_compaction.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "cache/block_pool.h"
#include "core/random.h"
#include "models/forward_test.h"
#include "models/loader.h"
#include "models/transformer.h"

namespace radixlm::models {
namespace {

using V = std::vector<int32_t>;

CompactionPlan Plan(const V& ids, const V& pos, const std::vector<int64_t>& cu, int pad = 0) {
  return BuildCompactionPlan(ids, pos, cu, pad);
}

// Every original row reads back its own token and position through scatter, and every compact
// row's gather points at a row holding it.
void ExpectReconstructs(const CompactionPlan& p, const V& ids, const V& pos) {
  ASSERT_EQ(p.scatter.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(p.compact_ids[p.scatter[i]], ids[i]);
    EXPECT_EQ(p.compact_positions[p.scatter[i]], pos[i]);
  }
  for (size_t j = 0; j < p.gather.size(); ++j) {
    if (j >= static_cast<size_t>(*std::max_element(p.scatter.begin(), p.scatter.end())) + 1) break;  // padding
    EXPECT_EQ(ids[p.gather[j]], p.compact_ids[j]);
    EXPECT_EQ(p.scatter[p.gather[j]], static_cast<int32_t>(j)) << "gather points at the first occurrence";
  }
}

TEST(CompactionPlan, EmptyAndSingleSequenceAreTrivial) {
  EXPECT_EQ(Plan({}, {}, {0}).compact_rows(), 0);
  const CompactionPlan p = Plan({5, 6, 7}, {0, 1, 2}, {0, 3});
  EXPECT_EQ(p.scatter, (V{0, 1, 2}));
  EXPECT_EQ(p.gather, (V{0, 1, 2}));
}

TEST(CompactionPlan, ReferenceExampleFromComments) {
  // a..g at 0..6, then a,b,c at 0..2, then e,f,g,h,i at 3..7.
  const V ids = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9};
  const V pos = {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7};
  const CompactionPlan p = Plan(ids, pos, {0, 7, 10, 15});
  EXPECT_EQ(p.compact_rows(), 12);
  ExpectReconstructs(p, ids, pos);
}

TEST(CompactionPlan, IdenticalNoOverlapPartialOverlapAndPositions) {
  CompactionPlan p = Plan({1, 2, 3, 1, 2, 3}, {0, 1, 2, 0, 1, 2}, {0, 3, 6});
  EXPECT_EQ(p.compact_ids, (V{1, 2, 3}));
  EXPECT_EQ(p.scatter, (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(p.gather, (V{0, 1, 2}));
  p = Plan({1, 2, 3, 4, 5, 6}, {0, 1, 2, 0, 1, 2}, {0, 3, 6});
  EXPECT_EQ(p.scatter, (V{0, 1, 2, 3, 4, 5}));  // identity
  p = Plan({1, 2, 3, 1, 2, 4}, {0, 1, 2, 0, 1, 2}, {0, 3, 6});
  EXPECT_EQ(p.compact_rows(), 4);
  // The same tokens at different positions are different rows.
  p = Plan({1, 2, 1, 2}, {0, 1, 5, 6}, {0, 2, 4});
  EXPECT_EQ(p.compact_rows(), 4);
  // The same (token, position) after a different prefix is not merged either.
  p = Plan({1, 9, 2, 9}, {0, 1, 0, 1}, {0, 2, 4});
  EXPECT_EQ(p.compact_rows(), 4);
  // Single-token sequences.
  p = Plan({7, 8, 7}, {0, 0, 0}, {0, 1, 2, 3});
  EXPECT_EQ(p.scatter, (V{0, 1, 0}));
}

TEST(CompactionPlan, PaddingPadsOnlyTheCompactSide) {
  CompactionPlan p = Plan({1, 2, 3, 1}, {0, 1, 2, 0}, {0, 3, 4}, 8);
  EXPECT_EQ(p.compact_rows(), 8);
  EXPECT_EQ(p.scatter.size(), 4u);
  EXPECT_EQ(p.gather[7], 0);
  p = Plan({1, 2, 3, 4, 5, 6, 7, 8}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 8}, 8);
  EXPECT_EQ(p.compact_rows(), 8);  // already aligned: unchanged
}

TEST(CompactionPlan, DeterministicAndExactOnRandomBatches) {
  core::Rng rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    V ids, pos;
    std::vector<int64_t> cu = {0};
    V shared(rng.Below(30));
    for (auto& t : shared) t = static_cast<int32_t>(rng.Below(5));
    const int b = 1 + static_cast<int>(rng.Below(8));
    for (int s = 0; s < b; ++s) {
      const int keep = static_cast<int>(rng.Below(shared.size() + 1));
      const int extra = static_cast<int>(rng.Below(10)) + (keep == 0);
      for (int i = 0; i < keep + extra; ++i) {
        ids.push_back(i < keep ? shared[i] : static_cast<int32_t>(rng.Below(5)));
        pos.push_back(i);
      }
      cu.push_back(static_cast<int64_t>(ids.size()));
    }
    const CompactionPlan a = Plan(ids, pos, cu), c = Plan(ids, pos, cu);
    EXPECT_EQ(a.scatter, c.scatter);
    EXPECT_EQ(a.gather, c.gather);
    ExpectReconstructs(a, ids, pos);
    EXPECT_LE(a.compact_rows(), a.original_rows());
  }
}

TEST(CompactionPlan, ContextGroupsNeverShareRows) {
  // Two step chunks with the same tokens at the same positions, continuing different cached
  // prefixes (groups 1 and 2), stay apart; a third in group 1 shares with the first.
  const V ids = {4, 5, 6, 4, 5, 6, 4, 5, 7};
  const V pos = {10, 11, 12, 10, 11, 12, 10, 11, 12};
  const std::vector<int64_t> cu = {0, 3, 6, 9}, groups = {1, 2, 1};
  const CompactionPlan p = BuildCompactionPlan(ids, pos, cu, 0, groups);
  EXPECT_EQ(p.compact_rows(), 7);
  EXPECT_EQ(p.scatter, (V{0, 1, 2, 3, 4, 5, 0, 1, 6}));
  ExpectReconstructs(p, ids, pos);
}

TEST(CompactionPlan, BuilderCountsNewRowsBeforeAdding) {
  CompactionPlanBuilder b;
  const V a = {1, 2, 3, 4}, c = {1, 2, 9}, pa = {0, 1, 2, 3}, pc = {0, 1, 2};
  EXPECT_EQ(b.NewRows(a, pa), 4);
  EXPECT_EQ(b.AddSequence(a, pa), 4);
  EXPECT_EQ(b.NewRows(c, pc), 1);
  EXPECT_EQ(b.NewRows(c, pc, /*group=*/7), 3);
  EXPECT_EQ(b.AddSequence(c, pc), 1);
  EXPECT_EQ(b.compact_rows(), 5);
  const CompactionPlan p = std::move(b).Finish();
  EXPECT_EQ(p.seq_compact_begin, (std::vector<int64_t>{0, 4, 5}));
  EXPECT_EQ(p.gather, (V{0, 1, 2, 3, 6}));
}

// ---- The forward with compaction equals the forward without it, bit for bit (every kernel
// computes rows independently and attention runs on the same original rows).

// Sequences end to end (cu: where each starts), each on its own block table, with the logits
// of every row asked for.
struct RowBatch {
  std::vector<int32_t> ids, pos, rows;
  std::vector<int64_t> cu = {0};
  std::vector<std::vector<int32_t>> tables;

  // Appends a sequence of tokens at positions 0, 1, ... on the block table `table`.
  void Add(const std::vector<int32_t>& tokens, std::vector<int32_t> table) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      ids.push_back(tokens[i]);
      pos.push_back(static_cast<int32_t>(i));
      rows.push_back(static_cast<int32_t>(ids.size() - 1));
    }
    cu.push_back(static_cast<int64_t>(ids.size()));
    tables.push_back(std::move(table));
  }
  // The logits of every row, compacted by `plan` (nullptr: not compacted), with or without
  // trie-space attention.
  std::vector<float> Forward(Transformer& model, core::ThreadPool& pool, KvStore& kv, const CompactionPlan* plan,
                             bool trie) const {
    ForwardBatch fb;
    fb.token_ids = ids;
    fb.positions = pos;
    for (size_t s = 0; s < tables.size(); ++s) fb.seqs.push_back({cu[s], cu[s + 1] - cu[s], tables[s]});
    fb.logit_rows = rows;
    fb.compaction = plan;
    fb.trie_attention = trie;
    return ForwardLogits(model, pool, fb, kv);
  }
};

TEST(CompactedForward, LogitsAreBitwiseEqualToTheUncompactedBatch) {
  for (const char* spec : {"random:tiny", "random:qwen2-tiny", "random:llama3-tiny"}) {
    auto model = LoadModel(spec).value();
    const int64_t V_ = model->config().vocab_size;
    core::ThreadPool pool(2);
    KvStore kv(model->config(), {128, 16});
    cache::BlockPool blocks({128, 16});
    core::Rng rng(11);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<int32_t> shared(10 + rng.Below(30));
      for (auto& t : shared) t = static_cast<int32_t>(rng.Below(V_));
      RowBatch batch;
      const int b = 2 + static_cast<int>(rng.Below(4));
      for (int s = 0; s < b; ++s) {
        const int keep = static_cast<int>(rng.Below(shared.size() + 1));
        const int len = keep + 1 + static_cast<int>(rng.Below(12));
        std::vector<int32_t> tokens(len);
        for (int i = 0; i < len; ++i) tokens[i] = i < keep ? shared[i] : static_cast<int32_t>(rng.Below(V_));
        batch.Add(tokens, *blocks.Allocate((len + 15) / 16));
      }
      const std::vector<float> plain = batch.Forward(*model, pool, kv, nullptr, false);
      const CompactionPlan plan = BuildCompactionPlan(batch.ids, batch.pos, batch.cu);
      EXPECT_LT(plan.ratio(), 1.0);
      const std::vector<float> compact = batch.Forward(*model, pool, kv, &plan, false);
      EXPECT_EQ(compact, plain) << spec << " trial " << trial;
      // Attention on compact rows too (separate tables: shared rows copied).
      EXPECT_EQ(batch.Forward(*model, pool, kv, &plan, true), plain) << spec << " trie attention, trial " << trial;
      for (auto& t : batch.tables) for (int32_t blk : t) blocks.Release(blk);
    }
  }
}

// Sequences sharing a 40-token prefix whose two full KV blocks are shared physically (as the
// radix cache shares them): trie-space attention writes each shared row once.
TEST(CompactedForward, TrieAttentionOverSharedPrefixBlocksMatchesThePlainBatch) {
  auto model = LoadModel("random:tiny").value();
  const int64_t V_ = model->config().vocab_size;
  core::ThreadPool pool(2);
  KvStore kv(model->config(), {64, 16});
  cache::BlockPool blocks({64, 16});
  core::Rng rng(4);
  std::vector<int32_t> prefix(40);
  for (auto& t : prefix) t = static_cast<int32_t>(rng.Below(V_));
  const std::vector<int32_t> shared_blocks = *blocks.Allocate(2);  // positions 0..31
  RowBatch batch;
  for (int s = 0; s < 4; ++s) {
    const int len = 40 + 3 + 5 * s;
    std::vector<int32_t> tokens(len);
    for (int i = 0; i < len; ++i) tokens[i] = i < 40 ? prefix[i] : static_cast<int32_t>(rng.Below(V_));
    std::vector<int32_t> t = shared_blocks;
    const auto own = *blocks.Allocate((len + 15) / 16 - 2);
    t.insert(t.end(), own.begin(), own.end());
    batch.Add(tokens, t);
  }
  const auto plain = batch.Forward(*model, pool, kv, nullptr, false);
  const CompactionPlan plan = BuildCompactionPlan(batch.ids, batch.pos, batch.cu);
  EXPECT_EQ(batch.Forward(*model, pool, kv, &plan, true), plain);
  EXPECT_EQ(batch.Forward(*model, pool, kv, &plan, false), plain);
}

}  // namespace
}  // namespace radixlm::models
