#include "scheduler/batch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace radixlm::scheduler {
namespace {

using Prompts = std::vector<std::vector<int32_t>>;

// Tokens [base, base + n): distinct runs for distinct nodes of a hand-built tree.
std::vector<int32_t> Tokens(int32_t base, int n) {
  std::vector<int32_t> r(n);
  for (int i = 0; i < n; ++i) r[i] = base + i;
  return r;
}
std::vector<int32_t> Cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int64_t Lcp(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t l = 0;
  while (l < static_cast<int64_t>(std::min(a.size(), b.size())) && a[l] == b[l]) ++l;
  return l;
}

// The one-level objective by brute force over every partition of the prompts.
int64_t BruteForce(const Prompts& p) {
  std::vector<std::vector<int>> blocks;
  int64_t best = 0;
  std::function<void(size_t)> go = [&](size_t i) {
    if (i == p.size()) {
      int64_t s = 0;
      for (const auto& b : blocks) {
        int64_t l = static_cast<int64_t>(p[b[0]].size());
        for (int x : b) l = std::min(l, Lcp(p[b[0]], p[x]));
        s += (static_cast<int64_t>(b.size()) - 1) * l;
      }
      best = std::max(best, s);
      return;
    }
    for (size_t k = 0; k < blocks.size(); ++k) {  // by index: deeper calls grow `blocks`
      blocks[k].push_back(static_cast<int>(i));
      go(i + 1);
      blocks[k].pop_back();
    }
    blocks.push_back({static_cast<int>(i)});
    go(i + 1);
    blocks.pop_back();
  };
  go(0);
  return best;
}

// The raw first level: prompts clustered by their first token, each cluster's common prefix.
int64_t RawLevelOne(const Prompts& p) {
  std::map<int32_t, std::vector<int>> by_first;
  for (size_t i = 0; i < p.size(); ++i)
    if (!p[i].empty()) by_first[p[i][0]].push_back(static_cast<int>(i));
  int64_t s = 0;
  for (const auto& [first, members] : by_first) {
    int64_t l = static_cast<int64_t>(p[members[0]].size());
    for (int x : members) l = std::min(l, Lcp(p[members[0]], p[x]));
    s += (static_cast<int64_t>(members.size()) - 1) * l;
  }
  return s;
}

// The spec's worked example: root -> I(2) -> {D1(100) -> 3 queries of 10, D2(50) -> 2 queries}:
// both documents are lifted, 256 of 460 tokens saved; the raw first level saves 8.
TEST(BatchPlanTest, WorkedExampleLiftsBothDocuments) {
  const auto I = Tokens(1, 2), D1 = Tokens(100, 100), D2 = Tokens(300, 50);
  Prompts p;
  for (int q = 0; q < 3; ++q) p.push_back(Cat({I, D1, Tokens(1000 + 10 * q, 10)}));
  for (int q = 0; q < 2; ++q) p.push_back(Cat({I, D2, Tokens(2000 + 10 * q, 10)}));
  EXPECT_EQ(RawLevelOne(p), 8);
  EXPECT_EQ(GroupingSaving(p, Grouping::kPaper), 256);
  EXPECT_EQ(GroupingSaving(p, Grouping::kExact), 256);
  const BatchPlan plan = PlanBatch(p, Grouping::kPaper);
  EXPECT_EQ(plan.stats.prompt_tokens, 460);
  EXPECT_EQ(plan.stats.planned_tokens, 460 - 256);
  EXPECT_EQ(plan.stats.ideal_tokens, 460 - 258);  // every level shared: I once more
  ASSERT_EQ(plan.groups.size(), 2u);
  // Eq. 3: ascending total prefill tokens: I+D2's group (52 + 20) before I+D1's (102 + 30).
  EXPECT_EQ(plan.groups[0].prefix_tokens, 52);
  EXPECT_EQ(plan.groups[0].members, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(plan.groups[1].prefix_tokens, 102);
  EXPECT_EQ(plan.groups[1].members, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_NEAR(plan.stats.saving(), 256.0 / 460, 1e-12);
}

// Algorithm 1 is greedy: a joint decision at one level (root -> A(5) -> {B(4) -> 2, C(4) -> 2})
// and one across levels (root -> A(7) -> {B(8) -> {x, y, E(11) -> {u, v}}, z}).
TEST(BatchPlanTest, PaperModeMissesTheSpecsCounterexamplesTheExactDpFindsThem) {
  const auto A = Tokens(1, 5), B = Tokens(10, 4), C = Tokens(20, 4);
  const Prompts one = {Cat({A, B, {100}}), Cat({A, B, {101}}), Cat({A, C, {102}}), Cat({A, C, {103}})};
  EXPECT_EQ(GroupingSaving(one, Grouping::kPaper), 15);
  EXPECT_EQ(GroupingSaving(one, Grouping::kExact), 18);
  EXPECT_EQ(BruteForce(one), 18);
  const auto A2 = Tokens(1, 7), B2 = Tokens(10, 8), E = Tokens(30, 11);
  const Prompts two = {Cat({A2, B2, {100}}), Cat({A2, B2, {101}}), Cat({A2, B2, E, {102}}), Cat({A2, B2, E, {103}}),
                       Cat({A2, {104}})};
  EXPECT_EQ(GroupingSaving(two, Grouping::kPaper), 41);
  EXPECT_EQ(GroupingSaving(two, Grouping::kExact), 45);
  EXPECT_EQ(BruteForce(two), 45);
}

// Random small jobs (duplicates and prompts that others extend included): the exact DP equals
// brute force over all partitions; Algorithm 1 never beats it and never falls below the raw
// first level; every plan conserves the prompts and keeps one own token per member; planning
// twice gives the same plan.
TEST(BatchPlanTest, ExactDpEqualsBruteForceAndPlansConserveEveryPrompt) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 8);
    Prompts p;
    for (int i = 0; i < n; ++i) {
      if (!p.empty() && rng() % 4 == 0) {  // extend, cut or repeat an earlier prompt
        std::vector<int32_t> q = p[rng() % p.size()];
        const size_t cut = rng() % 3;
        q.resize(q.size() > cut ? q.size() - cut : 1);
        for (int k = rng() % 4; k > 0; --k) q.push_back(static_cast<int32_t>(rng() % 3));
        p.push_back(q);
        continue;
      }
      std::vector<int32_t> q(1 + rng() % 12);
      for (auto& t : q) t = static_cast<int32_t>(rng() % 3);  // a small alphabet: deep sharing
      p.push_back(q);
    }
    const int64_t exact = GroupingSaving(p, Grouping::kExact), paper = GroupingSaving(p, Grouping::kPaper);
    ASSERT_EQ(exact, BruteForce(p)) << "trial " << trial;
    ASSERT_LE(paper, exact) << "trial " << trial;
    ASSERT_GE(paper, RawLevelOne(p)) << "trial " << trial;
    for (Grouping g : {Grouping::kNone, Grouping::kPaper, Grouping::kExact}) {
      const BatchPlan plan = PlanBatch(p, g);
      std::vector<int> seen(n, 0);
      int64_t planned = 0;
      for (const PrefixGroup& grp : plan.groups) {
        ASSERT_FALSE(grp.members.empty());
        ASSERT_TRUE(std::is_sorted(grp.members.begin(), grp.members.end()));
        if (grp.members.size() == 1) {
          ASSERT_EQ(grp.prefix_tokens, 0);
        }
        planned += grp.prefix_tokens;
        for (int64_t m : grp.members) {
          ++seen[m];
          ASSERT_LT(grp.prefix_tokens, static_cast<int64_t>(p[m].size()));
          ASSERT_GE(Lcp(p[grp.members[0]], p[m]), grp.prefix_tokens);
          planned += static_cast<int64_t>(p[m].size()) - grp.prefix_tokens;
        }
      }
      ASSERT_EQ(seen, std::vector<int>(n, 1)) << "trial " << trial;
      ASSERT_EQ(planned, plan.stats.planned_tokens);
      ASSERT_LE(plan.stats.ideal_tokens, plan.stats.planned_tokens);
      const BatchPlan again = PlanBatch(p, g);
      ASSERT_EQ(again.groups.size(), plan.groups.size());
      for (size_t i = 0; i < plan.groups.size(); ++i) {
        ASSERT_EQ(again.groups[i].members, plan.groups[i].members);
        ASSERT_EQ(again.groups[i].prefix_tokens, plan.groups[i].prefix_tokens);
      }
      if (g == Grouping::kNone) {
        ASSERT_EQ(plan.stats.planned_tokens, plan.stats.prompt_tokens);
      }
    }
  }
}

// The spec's closed forms: prefix 2000 / distinct 200 / 16 members saves 85.2%; 16000 / 200 /
// 16 saves 92.6% (groups shuffled through the job).
TEST(BatchPlanTest, SavingMatchesThePapersClosedForms) {
  for (auto [prefix, want] : {std::pair{2000, 0.852}, std::pair{16000, 0.926}}) {
    Prompts p;
    std::mt19937 rng(1);
    for (int g = 0; g < 4; ++g)
      for (int m = 0; m < 16; ++m) p.push_back(Cat({Tokens(100000 * (g + 1), prefix), Tokens(1000000 + 1000 * (16 * g + m), 200)}));
    std::shuffle(p.begin(), p.end(), rng);
    const BatchPlan plan = PlanBatch(p);
    EXPECT_EQ(plan.stats.shared_groups, 4);
    EXPECT_NEAR(plan.stats.saving(), want, 5e-4) << prefix;
    EXPECT_NEAR(plan.stats.ideal_saving(), want, 5e-4) << prefix;
  }
}

TEST(BatchPlanTest, ShardsWholeGroupsLongestFirstToTheLeastLoaded) {
  // Groups of costs 10, 7, 6, 5, 4 (one member each, nothing generated) over 2 workers:
  // LPT puts 10 | 7, then 6 -> the 7 side (13), 5 -> 10 side (15), 4 -> 13 side (17).
  const Prompts p = {Tokens(0, 10), Tokens(100, 7), Tokens(200, 6), Tokens(300, 5), Tokens(400, 4)};
  const std::vector<int64_t> gen(p.size(), 0);
  const BatchPlan plan = PlanBatch(p, Grouping::kExact, GroupOrder::kFile);
  const std::vector<int> w = ShardGroups(plan, p, gen, 2);
  EXPECT_EQ(w, (std::vector<int>{0, 1, 1, 0, 1}));
  EXPECT_NEAR(ShardImbalance(plan, p, gen, 2), 17.0 / 16.0, 1e-12);
  EXPECT_EQ(ShardGroups(plan, p, gen, 1), std::vector<int>(5, 0));
  EXPECT_NEAR(ShardImbalance(plan, p, gen, 1), 1.0, 1e-12);
}

// One group shared by the whole job cannot be balanced whole: cut into pieces of about a
// worker's share (each computing the prefix once more), it can.
TEST(BatchPlanTest, SplitsAGroupLargerThanAWorkersShare) {
  Prompts p;
  for (int m = 0; m < 80; ++m) p.push_back(Cat({Tokens(1, 200), Tokens(1000 + 100 * m, 50)}));
  p.push_back(Tokens(50000, 30));
  const std::vector<int64_t> gen(p.size(), 10);
  const BatchPlan plan = PlanBatch(p);
  EXPECT_NEAR(ShardImbalance(plan, p, gen, 4), 4.0, 0.1);  // the big group on one worker
  const BatchPlan split = SplitLargeGroups(plan, p, gen, 4);
  EXPECT_LT(ShardImbalance(split, p, gen, 4), 1.1);
  EXPECT_EQ(split.stats.shared_groups, 4);
  EXPECT_EQ(split.stats.planned_tokens, plan.stats.planned_tokens + 3 * 200);  // the prefix thrice more
  std::vector<int> seen(p.size(), 0);
  for (const PrefixGroup& g : split.groups)
    for (int64_t m : g.members) ++seen[m];
  EXPECT_EQ(seen, std::vector<int>(p.size(), 1));
  EXPECT_EQ(SplitLargeGroups(plan, p, gen, 1).groups.size(), plan.groups.size());
}

}  // namespace
}  // namespace radixlm::scheduler
