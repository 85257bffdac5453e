#include "cache/radix_tree.h"

#include <gtest/gtest.h>

#include <map>

#include "cache/random_requests_test.h"
#include "core/random.h"

namespace radixlm::cache {
namespace {

// A stand-in for KV memory: each block slot holds a fingerprint of the token prefix whose KV
// it stores, so a test can check that a block table really holds the matched prefix.
class FakeKv {
 public:
  FakeKv(int blocks, int bs) : bs_(bs), slots_(size_t(blocks) * bs, 0) {}
  static uint64_t Prefix(const std::vector<int32_t>& t, int64_t p) {  // fingerprint of t[0..p]
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i <= p; ++i) h = (h ^ static_cast<uint32_t>(t[i])) * 1099511628211ull;
    return h;
  }
  void Write(const std::vector<int32_t>& table, const std::vector<int32_t>& t, int64_t from, int64_t to) {
    for (int64_t p = from; p < to; ++p) slots_[size_t(table[p / bs_]) * bs_ + p % bs_] = Prefix(t, p);
  }
  void Copy(int32_t src, int32_t dst, int n) {
    for (int i = 0; i < n; ++i) slots_[size_t(dst) * bs_ + i] = slots_[size_t(src) * bs_ + i];
  }
  bool Holds(const std::vector<int32_t>& table, const std::vector<int32_t>& t, int64_t n) const {
    for (int64_t p = 0; p < n; ++p)
      if (slots_[size_t(table[p / bs_]) * bs_ + p % bs_] != Prefix(t, p)) return false;
    return true;
  }

 private:
  int bs_;
  std::vector<uint64_t> slots_;
};

// One request's life against the tree: admit, compute, insert, release.
struct Running {
  std::vector<int32_t> tokens;
  Admission adm;
  int64_t ns = 0;
};

Running Admit(RadixTree& tree, FakeKv& kv, const std::vector<int32_t>& tokens) {
  const Reservation r = tree.Reserve(tokens, static_cast<int64_t>(tokens.size()) - 1, tokens.size());
  EXPECT_TRUE(r.feasible);
  Running run{tokens, tree.Commit(r, tokens.size())};
  if (run.adm.cow_src >= 0) kv.Copy(run.adm.cow_src, run.adm.cow_dst, run.adm.cow_tokens);
  EXPECT_TRUE(kv.Holds(run.adm.block_table, tokens, run.adm.cached_tokens)) << "cached prefix's KV is wrong";
  kv.Write(run.adm.block_table, tokens, run.adm.cached_tokens, tokens.size());
  return run;
}

void Finish(RadixTree& tree, BlockPool& pool, Running& run) {
  tree.Insert(run.tokens, run.tokens.size(), run.adm.block_table, run.ns);
  if (run.adm.cached_tokens > 0) tree.Unlock(run.adm.locked_node);
  for (int32_t b : run.adm.owned_blocks) pool.Release(b);
}

TEST(RadixTreeTest, MatchesLongestPrefixTokenByTokenAcrossSplits) {
  BlockPool pool({.num_blocks = 64, .block_tokens = 4});
  RadixTree tree(pool);
  FakeKv kv(64, 4);
  auto a = Admit(tree, kv, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Finish(tree, pool, a);
  EXPECT_EQ(tree.Match({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100).length, 10);
  EXPECT_EQ(tree.Match({1, 2, 3, 4, 5, 6, 99}, 100).length, 6);  // cut inside an edge and a block
  EXPECT_EQ(tree.Match({1, 2, 3, 4, 5, 6, 7}, 3).length, 3);     // limit respected
  EXPECT_EQ(tree.Match({2}, 100).length, 0);
  // A request diverging inside a block gets a copy of that block's valid prefix.
  auto b = Admit(tree, kv, {1, 2, 3, 4, 5, 6, 77, 88});
  EXPECT_EQ(b.adm.cached_tokens, 6);
  EXPECT_EQ(b.adm.cow_tokens, 2);
  Finish(tree, pool, b);
  EXPECT_EQ(tree.CheckInvariants(), "");
  // Both branches now match in full and their KV checks out.
  auto c = Admit(tree, kv, {1, 2, 3, 4, 5, 6, 77, 88, 5});
  EXPECT_EQ(c.adm.cached_tokens, 8);
  Finish(tree, pool, c);
  auto d = Admit(tree, kv, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(d.adm.cached_tokens, 10);
  Finish(tree, pool, d);
  EXPECT_EQ(tree.CheckInvariants(), "");
  EXPECT_EQ(tree.stats().matched_tokens, 6 + 8 + 10);
}

TEST(RadixTreeTest, EvictsLeastRecentlyUsedUnlockedLeavesOnly) {
  BlockPool pool({.num_blocks = 6, .block_tokens = 4});
  RadixTree tree(pool);
  FakeKv kv(6, 4);
  auto a = Admit(tree, kv, {1, 1, 1, 1, 1, 1, 1, 1});  // 2 blocks
  Finish(tree, pool, a);
  auto b = Admit(tree, kv, {2, 2, 2, 2, 2, 2, 2, 2});  // 2 blocks
  Finish(tree, pool, b);
  auto locked = Admit(tree, kv, {2, 2, 2, 2, 2, 2, 2, 2, 3});  // locks b's path, owns 1 fresh block... plus CoW
  EXPECT_EQ(locked.adm.cached_tokens, 8);
  // 1 block free: a request needing 3 fresh blocks must evict a (LRU, unlocked), never b.
  const Reservation r = tree.Reserve({4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, 9, 10);
  ASSERT_TRUE(r.feasible);
  ASSERT_EQ(r.evictions.size(), 1u);
  EXPECT_EQ(tree.Match({1, 1, 1, 1}, 4).length, 4);  // Reserve changed nothing
  auto c = tree.Commit(r, 10);
  EXPECT_EQ(tree.Match({1, 1, 1, 1}, 4).length, 0);
  EXPECT_EQ(tree.Match({2, 2, 2, 2, 2, 2, 2, 2}, 8).length, 8);
  // Nothing left to evict: the only other leaf is locked.
  EXPECT_FALSE(tree.Reserve({5, 5, 5, 5, 5, 5, 5, 5, 5}, 8, 9).feasible);
  for (int32_t blk : c.owned_blocks) pool.Release(blk);
  Finish(tree, pool, locked);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

// A marked prefix (cache_control) outlives a flood of unmarked ones while its mark lasts; within
// the share; a split keeps both parts marked; an expired mark is an ordinary LRU prefix again.
TEST(RadixTreeTest, MarkedPrefixesAreEvictedLastUntilTheirMarkEnds) {
  BlockPool pool({.num_blocks = 12, .block_tokens = 4});
  RadixTree tree(pool);
  FakeKv kv(12, 4);
  const std::vector<int32_t> system = {9, 9, 9, 9, 8, 8, 8, 8, 7, 7, 7, 7};  // 3 blocks
  auto a = Admit(tree, kv, system);
  Finish(tree, pool, a);
  EXPECT_EQ(tree.Mark(system, 12, 0, /*until=*/100.0, /*max_blocks=*/6), 12);
  EXPECT_EQ(tree.marked_blocks(), 3);
  // A second marked prompt of 4 blocks would pass the share of 6: its first 3 blocks are marked
  // (its node split there), the last one is not.
  const std::vector<int32_t> second(16, 5);
  auto b = Admit(tree, kv, second);
  Finish(tree, pool, b);
  EXPECT_EQ(tree.Mark(second, 16, 0, 100.0, 6), 12);
  EXPECT_EQ(tree.marked_blocks(), 6);
  EXPECT_EQ(tree.CheckInvariants(), "");
  // A flood of unmarked prompts, each needing every block the marks leave: the marked ones stay.
  for (int32_t t = 20; t < 30; ++t) {
    auto f = Admit(tree, kv, std::vector<int32_t>(24, t));  // 6 blocks of 12, 6 held by the marks
    Finish(tree, pool, f);
    ASSERT_EQ(tree.Match(system, 12).length, 12) << "flood " << t;
    ASSERT_EQ(tree.Match(second, 16).length, 12) << "flood " << t;
    ASSERT_EQ(tree.CheckInvariants(), "");
  }
  // A hit that splits the marked path: both parts stay marked.
  auto c = Admit(tree, kv, {9, 9, 9, 9, 8, 8, 1, 1});
  Finish(tree, pool, c);
  EXPECT_EQ(tree.CheckInvariants(), "");
  EXPECT_EQ(tree.marked_blocks(), 7);  // the boundary block counts in both parts
  // A request needing every block: the mark is a preference, not a lock.
  auto big = Admit(tree, kv, std::vector<int32_t>(45, 40));
  EXPECT_EQ(tree.Match(system, 12).length, 0);
  Finish(tree, pool, big);
  EXPECT_EQ(tree.marked_blocks(), 0);
  // Marked again, then expired: an ordinary LRU prefix, the first to go under the next flood.
  auto d = Admit(tree, kv, system);
  Finish(tree, pool, d);
  tree.Mark(system, 12, 0, 50.0, 6);
  tree.ExpireMarks(49.0);
  EXPECT_EQ(tree.marked_blocks(), 3);
  tree.ExpireMarks(50.0);
  EXPECT_EQ(tree.marked_blocks(), 0);
  auto e = Admit(tree, kv, std::vector<int32_t>(40, 60));  // 10 blocks: 9 are free
  Finish(tree, pool, e);
  EXPECT_EQ(tree.Match(system, 12).length, 0);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, LfuEvictsTheLeastHitLeafFirstLruTheOldest) {
  for (const char* policy : {"lru", "lfu"}) {
    BlockPool pool({.num_blocks = 5, .block_tokens = 4});
    RadixTree tree(pool, *KvEvictionPolicy::Make(policy));
    FakeKv kv(5, 4);
    auto a = Admit(tree, kv, {1, 1, 1, 1});  // a: inserted first, then hit twice
    Finish(tree, pool, a);
    for (int i = 0; i < 2; ++i) {
      auto hit = Admit(tree, kv, {1, 1, 1, 1, 1});
      EXPECT_EQ(hit.adm.cached_tokens, 4);
      tree.Unlock(hit.adm.locked_node);
      for (int32_t blk : hit.adm.owned_blocks) pool.Release(blk);
    }
    auto b = Admit(tree, kv, {2, 2, 2, 2});  // b: newer, never hit
    Finish(tree, pool, b);
    // 3 blocks free; 4 needed: one leaf goes.
    const Reservation r = tree.Reserve({3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, 0, 16);
    ASSERT_TRUE(r.feasible);
    tree.Commit(r, 16);
    const bool lfu = std::string(policy) == "lfu";
    EXPECT_EQ(tree.Match({1, 1, 1, 1}, 4).length, lfu ? 4 : 0) << policy;
    EXPECT_EQ(tree.Match({2, 2, 2, 2}, 4).length, lfu ? 0 : 4) << policy;
    EXPECT_EQ(tree.CheckInvariants(), "");
  }
  EXPECT_FALSE(KvEvictionPolicy::Make("mru").ok());
}

TEST(RadixTreeTest, AnEvictedNamespaceLeavesNothingBehind) {
  BlockPool pool({.num_blocks = 8, .block_tokens = 4});
  RadixTree tree(pool);
  FakeKv kv(8, 4);
  for (int64_t salt = 1; salt <= 50; ++salt) {  // 50 tenants, room for two at a time
    const std::vector<int32_t> tokens(8, static_cast<int32_t>(salt));
    const Reservation r = tree.Reserve(tokens, 7, 8, salt << 40);
    ASSERT_TRUE(r.feasible) << salt;
    Running run{tokens, tree.Commit(r, 8), salt << 40};
    kv.Write(run.adm.block_table, tokens, 0, 8);
    Finish(tree, pool, run);
    EXPECT_LE(tree.namespaces_held(), 4u);
    EXPECT_EQ(tree.CheckInvariants(), "");
  }
  EXPECT_EQ(tree.Match(std::vector<int32_t>(8, 50), 8, int64_t{50} << 40).length, 8);
  EXPECT_EQ(tree.Match(std::vector<int32_t>(8, 50), 8, int64_t{49} << 40).length, 0);
  tree.EvictUntilFree(8);
  EXPECT_EQ(tree.namespaces_held(), 0u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

// Namespaces (cache_salt) ride along: each request picks one of three, and a match may only come
// from sequences of its own namespace, while eviction stays one LRU over all of them.
TEST(RadixTreeTest, RandomWorkloadKeepsInvariantsAndMatchesANaiveModel) {
  for (const std::string& policy : KvEvictionPolicy::Names()) {
  SCOPED_TRACE(policy);
  for (int bs : {1, 4, 16}) {
    for (int blocks : {40, 4000}) {  // contended and unbounded
      BlockPool pool({.num_blocks = blocks, .block_tokens = bs});
      RadixTree tree(pool, *KvEvictionPolicy::Make(policy));
      FakeKv kv(blocks, bs);
      std::vector<std::vector<int32_t>> inserted;
      std::vector<int64_t> inserted_ns;
      std::vector<Running> running;
      core::Rng rng(bs * 7919 + blocks);
      bool evicted = false;
      for (int step = 0; step < 1500; ++step) {
        const int op = static_cast<int>(rng.Below(10));
        if (op < 5) {  // a new request: extends a previous sequence, or a fresh one
          const std::vector<int32_t> t = RandomRequest(rng, inserted, 4, 12, 4);
          const int64_t ns = static_cast<int64_t>(rng.Below(3)) << 40;  // 62-bit ids, as salts hash to
          const Reservation r = tree.Reserve(t, static_cast<int64_t>(t.size()) - 1, t.size(), ns);
          if (!r.feasible) continue;
          evicted |= !r.evictions.empty();
          // Without evictions so far, the match is the longest common prefix with any insert.
          if (!evicted) {
            int64_t best = 0;
            for (size_t i = 0; i < inserted.size(); ++i) {
              if (inserted_ns[i] != ns) continue;
              const auto& s = inserted[i];
              int64_t k = 0;
              while (k < static_cast<int64_t>(std::min(s.size(), t.size())) - 0 && k < static_cast<int64_t>(t.size()) - 1 && s[k] == t[k]) ++k;
              best = std::max(best, k);
            }
            ASSERT_EQ(r.match.length, best);
          }
          Running run{t, tree.Commit(r, t.size()), ns};
          if (run.adm.cow_src >= 0) kv.Copy(run.adm.cow_src, run.adm.cow_dst, run.adm.cow_tokens);
          ASSERT_TRUE(kv.Holds(run.adm.block_table, t, run.adm.cached_tokens)) << "step " << step;
          kv.Write(run.adm.block_table, t, run.adm.cached_tokens, t.size());
          running.push_back(std::move(run));
        } else if (op < 9 && !running.empty()) {  // a request finishes
          const size_t i = rng.Below(running.size());
          Finish(tree, pool, running[i]);
          inserted.push_back(running[i].tokens);
          inserted_ns.push_back(running[i].ns);
          running.erase(running.begin() + i);
        } else if (op == 9) {
          const int32_t want = static_cast<int32_t>(rng.Below(blocks / 2 + 1));
          evicted |= tree.EvictUntilFree(want) > 0;
        }
        ASSERT_EQ(tree.CheckInvariants(), "") << "step " << step;
        ASSERT_LE(pool.blocks_in_use(), blocks);
        for (const Running& r : running)  // locked prefixes are never evicted
          ASSERT_GE(tree.Match(r.tokens, r.adm.cached_tokens, r.ns).length, r.adm.cached_tokens);
      }
      EXPECT_GT(tree.stats().matched_tokens, 0) << "the workload must exercise hits";
      if (bs > 1) {
        EXPECT_GT(tree.stats().cow_copies, 0);
      }
      if (blocks == 40) {
        EXPECT_TRUE(evicted) << "the contended case must exercise eviction";
      }
      for (Running& r : running) Finish(tree, pool, r);
      tree.EvictUntilFree(blocks);
      EXPECT_EQ(pool.blocks_in_use(), 0) << "all blocks return once nothing holds them";
      EXPECT_EQ(tree.cached_tokens(), 0);
      EXPECT_EQ(tree.CheckInvariants(), "");
    }
  }
}  // policies
}

}  // namespace
}  // namespace radixlm::cache
