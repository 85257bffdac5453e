#include "cache/memory.h"
#include "cache/hybrid_radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "cache/cost_model.h"
#include "cache/kv_events.h"

namespace radixlm::cache {
namespace {

using Tokens = std::vector<int32_t>;

Tokens Seq(int32_t start, int n) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Attention-only: a prompt computed and published is served to the next sequence (with a
// copy-on-write of its partial last block), a cancelled sequence leaves no KV behind, and once
// every sequence is released only the tree holds blocks.
TEST(Memory, ServesPublishedPrefixesAndReleasesEverything) {
  Memory mem({.num_blocks = 16, .block_tokens = 4, .prefix_cache = true, .max_running = 4}, nullptr);
  EXPECT_EQ(Memory::StateSlots(mem.config(), false), 0);
  const Tokens a = Seq(1, 10);
  MemorySeq sa;
  Memory::Admitted got;
  ASSERT_TRUE(mem.Admit(a, 10, /*alone=*/true, &sa, &got));
  EXPECT_EQ(got.cached_tokens, 0);
  EXPECT_EQ(sa.block_table.size(), 3u);  // 10 tokens in blocks of 4
  EXPECT_EQ(mem.CheckInvariants(), "");
  mem.Publish(a, 10, &sa);

  Tokens b = Seq(1, 6);
  b.push_back(99);  // shares 6 tokens: one whole block and half of the next
  MemorySeq sb;
  ASSERT_TRUE(mem.Admit(b, 7, false, &sb, &got));
  EXPECT_EQ(got.cached_tokens, 6);
  ASSERT_EQ(got.copies.size(), 1u);  // the partial block is copied, not shared
  EXPECT_EQ(got.copies[0].tokens, 2);
  EXPECT_EQ(sb.block_table[0], sa.block_table[0]);
  EXPECT_EQ(mem.CheckInvariants(), "");

  const int64_t cached_before = mem.tree()->cached_tokens();
  EXPECT_TRUE(mem.Release(b, 7, ReleaseMode::kCancel, &sb).empty());
  EXPECT_EQ(mem.tree()->cached_tokens(), cached_before) << "a cancelled sequence adds nothing";
  EXPECT_FALSE(sb.holds_memory());
  mem.Release(a, 10, ReleaseMode::kFinish, &sa);
  EXPECT_EQ(mem.CheckInvariants(), "");
  EXPECT_EQ(mem.pool().blocks_in_use(), 3) << "only the tree's blocks remain";
}

// A tier under the pool (a key set standing in for a disk): full blocks entering the tree are
// offered to it once; a prefix evicted from the pool is found there and planned as loads into
// the sequence's fresh blocks (a loaded block supersedes the copy-on-write of its matched part);
// a failed load ends the hit at the blocks that arrived; KV events name each block's medium.
class FakeTier : public BlockTier {
 public:
  FakeTier() : hasher_(4, "fake") {}
  std::string medium() const override { return "disk"; }
  const BlockHasher& hasher() const override { return hasher_; }
  bool Contains(const TierKey& key) const override { return keys_.count(key) > 0; }
  std::set<TierKey> keys_;

 private:
  BlockHasher hasher_;
};

TEST(Memory, ATierUnderThePoolTakesInsertedBlocksAndServesEvictedOnes) {
  FakeTier tier;
  PrefixCaches caches;
  caches.tier = &tier;
  Memory mem({.num_blocks = 6, .block_tokens = 4, .prefix_cache = true, .max_running = 2}, caches);
  KvEventLog log(BlockHasher(4, "events"));
  log.set_pool_medium("cpu");
  ASSERT_TRUE(mem.SetBlockObserver(&log));
  const Tokens a = Seq(1, 14);  // 3 full blocks and 2 tokens
  MemorySeq sa;
  Memory::Admitted got;
  ASSERT_TRUE(mem.Admit(a, 14, true, &sa, &got));
  EXPECT_TRUE(got.loads.empty());
  mem.Publish(a, 14, &sa);
  std::vector<TierTransfer> stores = mem.TakeStores();
  ASSERT_EQ(stores.size(), 3u) << "its full blocks, once";
  for (const TierTransfer& t : stores) tier.keys_.insert(t.key);
  mem.Release(a, 14, ReleaseMode::kFinish, &sa);
  EXPECT_TRUE(mem.TakeStores().empty()) << "blocks the tier holds are not offered again";
  std::vector<KvEvent> ev = log.Take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].medium, "cpu");
  EXPECT_EQ(ev[1].medium, "disk");
  EXPECT_EQ(ev[0].block_keys, ev[1].block_keys) << "the same blocks, by the same keys, in two media";

  // Another prompt fills the pool: a's blocks leave it.
  const Tokens other = Seq(500, 20);
  MemorySeq so;
  ASSERT_TRUE(mem.Admit(other, 20, true, &so, &got));
  mem.Release(other, 20, ReleaseMode::kCancel, &so);
  EXPECT_EQ(mem.CachedPrefix(a, sa), 0) << "evicted from the pool";

  // a again, extended: the tier serves its three full blocks (the limit is 14, one token computed).
  Tokens a2 = a;
  a2.push_back(77);
  MemorySeq s2;
  ASSERT_TRUE(mem.Admit(a2, 15, true, &s2, &got));
  EXPECT_EQ(got.cached_tokens, 0);
  ASSERT_EQ(got.loads.size(), 3u);
  EXPECT_EQ(got.load_from, 0);
  EXPECT_EQ(got.loads[1].block, s2.block_table[1]);
  mem.Loaded(&s2, 2, &got);  // the third load fails
  EXPECT_EQ(got.cached_tokens, 8);
  EXPECT_EQ(got.hit_tokens, 8);
  EXPECT_EQ(mem.tier_stats().failed_loads, 1);
  EXPECT_EQ(mem.tier_stats().hit_tokens, 8);
  mem.Release(a2, 15, ReleaseMode::kFinish, &s2);
  EXPECT_EQ(mem.CheckInvariants(), "");
}

// Growing past the free blocks evicts cached prefixes; with nothing evictable it refuses.
TEST(Memory, GrowEvictsCachedPrefixesThenRefuses) {
  Memory mem({.num_blocks = 4, .block_tokens = 4, .prefix_cache = true, .max_running = 2}, nullptr);
  MemorySeq s1, s2;
  Memory::Admitted got;
  const Tokens a = Seq(1, 8), b = Seq(100, 8);
  ASSERT_TRUE(mem.Admit(a, 8, true, &s1, &got));
  mem.Release(a, 8, ReleaseMode::kFinish, &s1);  // 2 blocks cached, unlocked
  ASSERT_TRUE(mem.Admit(b, 8, true, &s2, &got));
  EXPECT_EQ(mem.pool().num_free(), 0);
  EXPECT_TRUE(mem.Grow(&s2, 16)) << "the cached prefix is evicted for the running sequence";
  EXPECT_EQ(mem.tree()->cached_tokens(), 0);
  EXPECT_FALSE(mem.Grow(&s2, 20)) << "nothing left to evict";
  EXPECT_EQ(s2.block_table.size(), 4u) << "a refused Grow changes nothing";
  EXPECT_EQ(mem.CheckInvariants(), "");
}

// A recurrent model without a hybrid cache reuses nothing, and a sequence needs one of
// max_running working slots.
TEST(Memory, RecurrentWithoutACheckpointCacheHasWorkingSlotsOnly) {
  Memory mem({.num_blocks = 64, .block_tokens = 4, .prefix_cache = true, .max_running = 2, .recurrent = true}, nullptr);
  EXPECT_FALSE(mem.prefix_cache()) << "a state cannot be rolled back to a KV hit";
  EXPECT_EQ(Memory::StateSlots(mem.config(), false), 2);
  MemorySeq s[3];
  Memory::Admitted got;
  const Tokens t = Seq(1, 5);
  ASSERT_TRUE(mem.Admit(t, 5, true, &s[0], &got));
  ASSERT_TRUE(mem.Admit(t, 5, false, &s[1], &got));
  EXPECT_NE(s[0].state_slot, s[1].state_slot);
  EXPECT_FALSE(mem.Admit(t, 5, false, &s[2], &got)) << "no working slot left";
  EXPECT_FALSE(s[2].holds_memory());
  const StepState st = mem.StateFor(&s[0], 0, 5);
  EXPECT_TRUE(st.reset);
  EXPECT_EQ(st.restore_from, -1);
  mem.Release(t, 5, ReleaseMode::kFinish, &s[0]);
  EXPECT_TRUE(mem.Admit(t, 5, false, &s[2], &got));
  EXPECT_EQ(mem.CheckInvariants(), "");
}

// With a hybrid cache: a finished sequence's final state goes into a checkpoint slot (a copy
// for the executor), the same prompt again restores it, and a prompt that splits a cached edge
// captures the state at the branch point.
TEST(Memory, HybridCheckpointsAreCopiedRestoredAndCapturedAtBranchPoints) {
  HybridShape shape = Marconi7BShape(16);
  shape.kv_elem_bytes = 0;  // KV is the block tree's
  const CostModel cost(shape, Accounting::kCorrected);
  HybridCacheConfig hc;
  hc.policy = HybridPolicy::kSglangPlus;
  const int32_t checkpoints = 4;
  hc.capacity_bytes = (checkpoints + 0.5) * static_cast<double>(cost.CheckpointBytes());
  auto cache = MakeRadixHybridCache(hc, cost);
  Memory mem({.num_blocks = 64, .block_tokens = 4, .prefix_cache = true, .max_running = 2, .recurrent = true,
              .checkpoint_slots = checkpoints},
             cache.get());
  EXPECT_EQ(Memory::StateSlots(mem.config(), true), 2 * 2 + checkpoints + 2);
  Memory::Admitted got;
  const Tokens a = Seq(1, 12);
  MemorySeq sa;
  ASSERT_TRUE(mem.Admit(a, 12, true, &sa, &got));
  const std::vector<StateCopy> copies = mem.Release(a, 12, ReleaseMode::kFinish, &sa);
  ASSERT_EQ(copies.size(), 1u) << "the leaf state, after the last computed token";
  EXPECT_GE(copies[0].dst, 2 * 2) << "into a checkpoint slot";

  Tokens again = a;
  again.push_back(50);  // the same prompt and one more token: a hit up to the checkpoint
  MemorySeq s2;
  ASSERT_TRUE(mem.Admit(again, 13, true, &s2, &got));
  EXPECT_EQ(got.cached_tokens, 12);
  StepState st = mem.StateFor(&s2, 12, 1);
  EXPECT_EQ(st.restore_from, copies[0].dst);
  EXPECT_FALSE(st.reset);
  mem.Release(again, 13, ReleaseMode::kCancel, &s2);

  Tokens branch = Seq(1, 6);
  for (int i = 0; i < 6; ++i) branch.push_back(200 + i);  // splits the cached 12-token edge at 6
  MemorySeq s3;
  ASSERT_TRUE(mem.Admit(branch, 12, true, &s3, &got));
  EXPECT_EQ(got.cached_tokens, 0) << "no checkpoint at 6 yet";
  st = mem.StateFor(&s3, 0, 12);
  ASSERT_EQ(st.captures.size(), 1u);
  EXPECT_EQ(st.captures[0].after_tokens, 6);
  const std::vector<StateCopy> c3 = mem.Release(branch, 12, ReleaseMode::kFinish, &s3);
  EXPECT_EQ(c3.size(), 2u) << "leaf and branch-point states";
  EXPECT_EQ(mem.CheckInvariants(), "");
  cache->CheckInvariants();
}

// A prompt sent again verbatim: with prompt-end checkpoints the state after all but its last
// token is captured during prefill and cached at finish, so the repeat reuses n - 1 tokens (in
// both modes); without, the first repeat reuses nothing.
TEST(Memory, PromptEndCheckpointsServeAnExactRepeat) {
  HybridShape shape = Marconi7BShape(16);
  shape.kv_elem_bytes = 0;
  const CostModel cost(shape, Accounting::kCorrected);
  for (bool keep : {false, true}) {
    HybridCacheConfig hc;
    hc.policy = HybridPolicy::kMarconiStatic;
    hc.capacity_bytes = 6.5 * static_cast<double>(cost.CheckpointBytes());
    auto cache = MakeRadixHybridCache(hc, cost);
    const MemoryConfig config{.num_blocks = 64, .block_tokens = 4, .prefix_cache = true, .max_running = 2,
                              .recurrent = true, .checkpoint_slots = 6, .prompt_end_checkpoints = keep};
    Memory mem(config, cache.get());
    EXPECT_EQ(Memory::StateSlots(config, true), keep ? 3 * 2 + 6 + 3 : 2 * 2 + 6 + 2);
    const Tokens prompt = Seq(1, 10);
    Tokens served = prompt;
    Memory::Admitted got;
    MemorySeq s1;
    ASSERT_TRUE(mem.Admit(served, 10, true, &s1, &got));
    StepState st = mem.StateFor(&s1, 0, 10);  // the prefill, in one step
    ASSERT_EQ(st.captures.size(), keep ? 1u : 0u);
    if (keep) {
      EXPECT_EQ(st.captures[0].after_tokens, 9);
    }
    for (int32_t t : {500, 501, 502}) served.push_back(t);  // three generated tokens
    const std::vector<StateCopy> copies = mem.Release(served, 12, ReleaseMode::kFinish, &s1);
    EXPECT_EQ(copies.size(), keep ? 2u : 1u) << "the leaf, and the prompt end";
    MemorySeq s2;
    ASSERT_TRUE(mem.Admit(prompt, 10, true, &s2, &got));
    EXPECT_EQ(got.cached_tokens, keep ? 9 : 0);
    if (keep) {
      EXPECT_EQ(mem.StateFor(&s2, 9, 1).restore_from, copies[1].dst);
    }
    mem.Release(prompt, 10, ReleaseMode::kCancel, &s2);
    EXPECT_EQ(mem.CheckInvariants(), "");
    cache->CheckInvariants();
    EXPECT_EQ(cache->Stats().prompt_end_checkpoints, keep ? 1 : 0);
  }
  // The byte-budget mode: the policy places it at admission of the whole sequence.
  HybridCacheConfig hc;
  hc.policy = HybridPolicy::kSglangPlus;
  hc.capacity_bytes = 1e12;
  auto budget = MakeRadixHybridCache(hc, CostModel(Marconi7BShape(16), Accounting::kCorrected));
  PrefixCaches caches;
  caches.budget = budget.get();
  Memory mem({.mode = MemoryMode::kByteBudget, .prefix_cache = true, .prompt_end_checkpoints = true}, caches);
  Tokens all = Seq(1, 10);
  Memory::Admitted got;
  MemorySeq s1;
  ASSERT_TRUE(mem.Admit(all, 10, true, &s1, &got));
  all.push_back(77);
  mem.Release(all, 10, ReleaseMode::kFinish, &s1);
  MemorySeq s2;
  ASSERT_TRUE(mem.Admit(Seq(1, 10), 10, true, &s2, &got));
  EXPECT_EQ(got.hit_tokens, 9);
}

// Where it pays: a prompt that ends just past a cached state (a chat turn's short message) keeps
// no prompt-end state; one that ends far past it does.
TEST(Memory, PromptEndStateOnlyWhereTheRepeatWouldRecomputeMuch) {
  HybridShape shape = Marconi7BShape(16);
  shape.kv_elem_bytes = 0;
  const CostModel cost(shape, Accounting::kCorrected);
  HybridCacheConfig hc;
  hc.policy = HybridPolicy::kSglangPlus;
  hc.capacity_bytes = 8.5 * static_cast<double>(cost.CheckpointBytes());
  auto cache = MakeRadixHybridCache(hc, cost);
  Memory mem({.num_blocks = 64, .block_tokens = 4, .prefix_cache = true, .max_running = 2, .recurrent = true,
              .checkpoint_slots = 8, .prompt_end_checkpoints = true, .prompt_end_min_gap = 6},
             cache.get());
  Memory::Admitted got;
  const Tokens first = Seq(1, 20);
  MemorySeq s1;
  ASSERT_TRUE(mem.Admit(first, 20, true, &s1, &got));
  EXPECT_EQ(mem.StateFor(&s1, 0, 20).captures.size(), 1u) << "19 tokens past the empty state";
  mem.Release(first, 20, ReleaseMode::kFinish, &s1);
  Tokens turn = first;
  for (int32_t t : {90, 91, 92}) turn.push_back(t);  // a short next message: 3 tokens past the leaf
  MemorySeq s2;
  ASSERT_TRUE(mem.Admit(turn, 23, true, &s2, &got));
  EXPECT_EQ(got.cached_tokens, 20);
  EXPECT_TRUE(mem.StateFor(&s2, 20, 3).captures.empty());
  mem.Release(turn, 23, ReleaseMode::kFinish, &s2);
  EXPECT_EQ(mem.CheckInvariants(), "");
}

}  // namespace
}  // namespace radixlm::cache
