#include "cache/memory.h"
#include "cache/hybrid_radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

#include "cache/cost_model.h"

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
  mem.Publish(a, 10, sa);

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

}  // namespace
}  // namespace radixlm::cache
