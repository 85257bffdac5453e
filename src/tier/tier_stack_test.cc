#include "tier/tier_stack.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/temp_dir_test.h"
#include "tier/test_block_test.h"
#include "tier/disk_tier.h"

namespace radixlm::tier {
namespace {

namespace fs = std::filesystem;

using Block = TestBlock;
Block Random(uint64_t seed) { return TestBlock::Random(seed); }

TierSetup DiskSetup(const std::string& dir) {
  return {.fingerprint = "model=a", .block_tokens = 4, .block_bytes = 3000, .disk_dir = dir, .disk_capacity_bytes = 1 << 20};
}

// Two disk tiers (two folders) as a stack: the registry's seam with a medium it knows.
std::unique_ptr<TierStack> TwoFolders(const std::string& a, const std::string& b, DiskTier** first, DiskTier** second) {
  std::vector<std::unique_ptr<Tier>> tiers;
  for (const std::string& dir : {a, b}) {
    auto t = DiskTier::Open({.dir = dir, .capacity_bytes = 1 << 20, .fingerprint = "model=a", .block_tokens = 4, .block_bytes = 3000});
    EXPECT_TRUE(t.ok()) << t.status().message();
    (tiers.empty() ? *first : *second) = t->get();
    tiers.push_back(std::move(t).value());
  }
  return std::make_unique<TierStack>(std::move(tiers));
}

TEST(OpenTiers, OpensWhatTheSetupAsksForAndNothingElse) {
  const core::TempDir tmp("radixlm_tiers");
  auto none = OpenTiers(DiskSetup(""));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->get(), nullptr);
  auto disk = OpenTiers(DiskSetup(tmp.path()));
  ASSERT_TRUE(disk.ok()) << disk.status().message();
  ASSERT_NE(disk->get(), nullptr);
  EXPECT_EQ((*disk)->medium(), "disk");
  EXPECT_EQ((*disk)->Reports().size(), 1u);
  EXPECT_NE(dynamic_cast<DiskTier*>(disk->get()), nullptr);  // one medium: the tier itself, not a stack
  TierSetup bad = DiskSetup(tmp.path());
  bad.disk_capacity_bytes = 0;
  EXPECT_FALSE(OpenTiers(bad).ok());  // a medium's own error
}

TEST(TierStack, StoresToEveryTierAndLoadsFromTheFirstThatHoldsAVerifiedBlock) {
  const core::TempDir a("radixlm_stack_a"), b("radixlm_stack_b");
  DiskTier *fast = nullptr, *slow = nullptr;
  auto stack = TwoFolders(a.path(), b.path(), &fast, &slow);
  EXPECT_EQ(stack->media(), (std::vector<std::string>{"disk", "disk"}));
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const cache::TierKey key = stack->hasher().Next(nullptr, tokens, 0);
  Block block = Random(7);
  EXPECT_FALSE(stack->Contains(key));
  stack->Store(key, block.Segments());
  stack->Flush();
  EXPECT_TRUE(fast->Contains(key));
  EXPECT_TRUE(slow->Contains(key));
  Block in;
  ASSERT_TRUE(stack->Load(key, in.Segments()));
  EXPECT_EQ(in.bytes, block.bytes);
  EXPECT_EQ(fast->stats().loaded_blocks, 1);
  EXPECT_EQ(slow->stats().loaded_blocks, 0);

  // The first tier's copy corrupt: it fails its check there and the next tier serves it.
  {
    std::fstream f(fast->BlockPath(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('\x5a');
    f.seekp(501);
    f.put('\xa5');
  }
  Block again;
  ASSERT_TRUE(stack->Load(key, again.Segments()));
  EXPECT_EQ(again.bytes, block.bytes);
  EXPECT_EQ(fast->stats().failed_corrupt, 1);
  EXPECT_EQ(slow->stats().loaded_blocks, 1);
  EXPECT_FALSE(fast->Contains(key));  // the corrupt file is gone
  EXPECT_TRUE(stack->Contains(key));

  // Held by one tier only: the stack says "contains" but not "held by all" (a store goes on).
  EXPECT_EQ(stack->HeldByAll(std::vector<cache::TierKey>{key}), std::vector<char>{0});
  EXPECT_EQ(stack->ContainsMany(std::vector<cache::TierKey>{key}), std::vector<char>{1});

  // Gone from both: the load fails (the engine recomputes).
  fs::remove(slow->BlockPath(key));
  Block none;
  EXPECT_FALSE(stack->Load(key, none.Segments()));

  const std::vector<cache::TierReport> reports = stack->Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].path, fast->path());
  EXPECT_EQ(reports[1].path, slow->path());
  EXPECT_EQ(reports[0].failed_loads, 1);
}

TEST(TierStack, ReportsEachMediumsDrops) {
  const core::TempDir a("radixlm_stack_a"), b("radixlm_stack_b");
  DiskTier *fast = nullptr, *slow = nullptr;
  auto stack = TwoFolders(a.path(), b.path(), &fast, &slow);
  stack->ReportDrops();
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  const cache::TierKey key = stack->hasher().Next(nullptr, tokens, 0);
  Block block = Random(8);
  stack->Store(key, block.Segments());
  stack->Flush();
  fs::remove(fast->BlockPath(key));  // lost by the first tier behind its back
  Block in;
  ASSERT_TRUE(fast->Contains(key));   // its index still says so
  EXPECT_FALSE(fast->Load(key, in.Segments()));
  const std::vector<cache::TierDrops> drops = stack->TakeDropped();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].medium, "disk");
  EXPECT_EQ(drops[0].keys, std::vector<cache::TierKey>{key});
  EXPECT_TRUE(stack->TakeDropped().empty());
}

}  // namespace
}  // namespace radixlm::tier
