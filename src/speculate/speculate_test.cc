#include <gtest/gtest.h>

#include <random>

#include "cache/block_pool.h"
#include "cache/radix_tree.h"
#include "speculate/draft_source.h"
#include "speculate/suffix_index.h"

namespace radixlm::speculate {
namespace {

Draft Propose(DraftSource& s, const std::vector<int32_t>& tokens, int max, int min_match = 2, int64_t ns = 0) {
  Draft d;
  s.Propose({.tokens = tokens, .prompt_len = 1, .ns = ns, .max_tokens = max, .min_match = min_match}, &d);
  return d;
}

TEST(SpeculateTest, NgramDraftsWhatFollowedTheLongestLatestMatch) {
  auto src = MakeSource("ngram", {});
  ASSERT_TRUE(src.ok());
  // "5 6 7" occurred twice; the later one (followed by 30 31) wins at equal match length, a
  // longer match ("4 5 6 7", followed by 8 9) wins over a later shorter one.
  EXPECT_EQ(Propose(**src, {1, 5, 6, 7, 20, 21, 9, 5, 6, 7, 30, 31, 2, 5, 6, 7}, 3).tokens, (std::vector<int32_t>{30, 31, 2}));
  const Draft d = Propose(**src, {4, 5, 6, 7, 8, 9, 1, 5, 6, 7, 30, 31, 4, 5, 6, 7}, 8);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{8, 9, 1, 5, 6, 7, 30, 31}));
  EXPECT_EQ(d.match, 4);
  EXPECT_EQ(d.origin, Origin::kContext);
  EXPECT_TRUE(Propose(**src, {1, 2, 3, 4}, 4).tokens.empty());              // nothing repeats
  EXPECT_TRUE(Propose(**src, {1, 2, 3, 9, 3}, 4, /*min_match=*/2).tokens.empty());  // "9 3" never seen
  // A continuation that runs into the end goes on with itself: loops draft whole periods.
  EXPECT_EQ(Propose(**src, {1, 2, 3, 9, 3}, 4, /*min_match=*/1).tokens, (std::vector<int32_t>{9, 3, 9, 3}));
  EXPECT_EQ(Propose(**src, {7, 8, 8, 8, 8}, 5).tokens, (std::vector<int32_t>{8, 8, 8, 8, 8}));
  EXPECT_EQ(Propose(**src, {4, 1, 2, 3, 1, 2, 3, 1, 2}, 5).tokens, (std::vector<int32_t>{3, 1, 2, 3, 1}));
}

TEST(SpeculateTest, FindPlacesAgreesWithABruteForceScan) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> t(1 + rng() % 200);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 4);
    const int min_match = 1 + static_cast<int>(rng() % 4), max_match = min_match + static_cast<int>(rng() % 6);
    std::vector<Place> got;
    FindPlaces(t, t, static_cast<int64_t>(t.size()) - 1, min_match, max_match, 1000, &got);
    std::vector<std::pair<int, int64_t>> want;  // (match, next)
    const int64_t n = static_cast<int64_t>(t.size());
    for (int64_t j = n - 2; j >= 0; --j) {
      int m = 0;
      while (m < max_match && m <= j && t[j - m] == t[n - 1 - m]) ++m;
      if (m >= min_match) want.push_back({m, j + 1});
    }
    std::stable_sort(want.begin(), want.end(), [](auto& a, auto& b) { return a.first > b.first; });
    ASSERT_EQ(got.size(), want.size()) << trial;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].match, want[i].first) << trial;
      EXPECT_EQ(got[i].next, want[i].second) << trial;
    }
  }
}

TEST(SpeculateTest, FrequentPathFollowsTheMajorityWhileItsScoreHolds) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {1, 2, 3, 4, 6}, c = {1, 2, 3, 7, 8};
  std::vector<Place> places = {{a, 1, 3}, {b, 1, 3}, {c, 1, 3}};
  std::vector<int32_t> out;
  FrequentPath(places, 8, 0.3, &out);
  // 2, 3 (3/3), then 4 (2/3: score 0.67), then 5 or 6 (1/2: 0.33, the first place's).
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3, 4, 5}));
  out.clear();
  FrequentPath(places, 8, 0.5, &out);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3, 4}));
  // Places with a shorter match take no part.
  places.push_back({c, 3, 1});
  out.clear();
  FrequentPath(places, 2, 0.3, &out);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3}));
}

TEST(SpeculateTest, SuffixIndexFindsPlacesPerNamespaceAndDropsTheOldest) {
  SuffixIndex index(40);
  index.Add(std::vector<int32_t>{10, 11, 12, 13, 14, 15}, 0);
  index.Add(std::vector<int32_t>{10, 11, 12, 13, 99}, 7);
  std::vector<Place> places;
  index.Find(std::vector<int32_t>{5, 11, 12, 13}, 0, 2, 24, 8, &places);
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].text[static_cast<size_t>(places[0].next)], 14);
  EXPECT_EQ(places[0].match, 3);
  places.clear();
  index.Find(std::vector<int32_t>{10, 11, 12, 13}, 7, 2, 24, 8, &places);
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].text[static_cast<size_t>(places[0].next)], 99);
  EXPECT_EQ(places[0].match, 4);
  places.clear();
  index.Find(std::vector<int32_t>{10, 11, 12, 13}, 7, 5, 24, 8, &places);  // needs 5 matched
  EXPECT_TRUE(places.empty());
  // Past the bound the oldest text goes, and with it its places.
  for (int i = 0; i < 4; ++i) index.Add(std::vector<int32_t>{50, 51, 52, 53, 54, 55, 56, 57, 58, 59}, 0);
  EXPECT_LE(index.tokens_held(), 40);
  places.clear();
  index.Find(std::vector<int32_t>{11, 12, 13}, 0, 2, 24, 8, &places);
  EXPECT_TRUE(places.empty());
  index.Find(std::vector<int32_t>{51, 52, 53}, 0, 2, 24, 8, &places);
  EXPECT_EQ(places.size(), 4u);  // the four texts held (40 tokens), most recent first
}

TEST(SpeculateTest, TreeSourceDraftsTheRadixContinuationThenTheSuffixIndex) {
  cache::BlockPool pool({.num_blocks = 16, .block_tokens = 4});
  cache::RadixTree tree(pool);
  const std::vector<int32_t> path = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  auto blocks = pool.Allocate(3);
  ASSERT_TRUE(blocks.has_value());
  tree.Insert(path, 12, *blocks);
  auto src = MakeSource("tree", {.tree = &tree});
  ASSERT_TRUE(src.ok());
  Draft d = Propose(**src, {1, 2, 3, 4, 5, 6}, 4);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(d.origin, Origin::kRadix);
  EXPECT_TRUE(Propose(**src, {1, 2, 3, 4, 5, 6}, 4, 2, /*ns=*/5).tokens.empty());  // another tenant
  // Not a cached path: finished sequences (other requests) give the draft.
  (*src)->Finished(std::vector<int32_t>{40, 41, 42, 43, 44, 45, 46}, 0);
  (*src)->Finished(std::vector<int32_t>{40, 41, 42, 43, 44, 45, 47}, 0);
  (*src)->Finished(std::vector<int32_t>{30, 41, 42, 43, 44, 45, 46}, 0);
  d = Propose(**src, {9, 9, 41, 42, 43}, 8);
  EXPECT_EQ(d.origin, Origin::kSuffix);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{44, 45, 46}));  // 46 holds 2 of 3 places
  EXPECT_TRUE(Propose(**src, {9, 9, 41, 42, 43}, 8, 2, /*ns=*/3).tokens.empty());
}

TEST(SpeculateTest, DraftPolicyFollowsAcceptance) {
  DraftPolicy policy(2, 0.6);
  for (int i = 0; i < 20; ++i) policy.Verified(4, 4);
  EXPECT_GT(policy.acceptance(), 0.95);
  EXPECT_EQ(policy.min_match(), 2);
  for (int i = 0; i < 20; ++i) policy.Verified(4, 0);
  EXPECT_LT(policy.acceptance(), 0.1);
  EXPECT_EQ(policy.min_match(), 8);  // raised per fruitless draft, at most 8
  for (int i = 0; i < 200; ++i) policy.Skipped();
  EXPECT_GT(policy.acceptance(), 0.55);  // back towards the prior
  policy.Verified(2, 1);
  EXPECT_EQ(policy.min_match(), 7);
}

TEST(SpeculateTest, ExpectedTokensIsTheGeometricSum) {
  EXPECT_DOUBLE_EQ(ExpectedTokens(0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokens(0.5, 3), 1.875);
  EXPECT_DOUBLE_EQ(ExpectedTokens(1.0, 4), 5.0);
}

TEST(SpeculateTest, TheDraftLengthPaysForItsRows) {
  StepCost cost;
  EXPECT_EQ(BestDraftLength(0.9, 8, 1, 1, cost), 8);  // nothing measured yet: try the longest
  // A memory-bound step: rows up to 4 cost nearly nothing more, then each costs a full row.
  for (int r = 1; r <= 12; ++r) cost.Observe(r, r <= 4 ? 1.0 + 0.02 * r : 1.0 * (r - 3));
  EXPECT_NEAR(cost.Seconds(3), 1.06, 1e-12);
  EXPECT_EQ(BestDraftLength(0.9, 8, 1, 1, cost), 3);   // 1 + 3 drafts: the free rows
  EXPECT_EQ(BestDraftLength(0.02, 8, 1, 1, cost), 0);  // text that does not repeat: no draft
  EXPECT_EQ(BestDraftLength(0.9, 8, 4, 4, cost), 0);   // a batch of 4 already fills the free rows
  // Interpolated between measured row counts, extrapolated past the largest.
  StepCost sparse;
  sparse.Observe(1, 1.0);
  sparse.Observe(5, 3.0);
  EXPECT_NEAR(sparse.Seconds(3), 1.2, 1e-12);  // the prior slope: cheaper than the line (2.0)
  EXPECT_NEAR(sparse.Seconds(7), 3.2, 1e-12);
  sparse.Observe(2, 1.01);
  EXPECT_NEAR(sparse.Seconds(4), 1.01 + 0.2, 1e-12);
  sparse.Observe(9, 3.4);
  EXPECT_NEAR(sparse.Seconds(7), std::min(3.0 + 0.2, 3.0 + 0.4 * 2 / 4), 1e-12);
}

TEST(SpeculateTest, UnknownSourcesAreRefusedWithTheChoices) {
  auto off = MakeSource("off", {});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
  auto bad = MakeSource("medusa", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("off, ngram, tree"), std::string::npos);
}

}  // namespace
}  // namespace radixlm::speculate
