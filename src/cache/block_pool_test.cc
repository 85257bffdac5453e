#include "cache/block_pool.h"

#include <gtest/gtest.h>

#include <map>

#include "core/random.h"

namespace radixlm::cache {
namespace {

TEST(BlockPoolTest, AllocatesDistinctBlocksAndRefusesWhenShort) {
  BlockPool pool({.num_blocks = 4, .block_tokens = 16});
  auto a = pool.Allocate(3);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.blocks_in_use(), 3);
  EXPECT_FALSE(pool.Allocate(2));           // only one free: no partial allocation
  EXPECT_EQ(pool.blocks_in_use(), 3);
  for (int32_t b : *a) pool.Release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
  EXPECT_EQ(pool.CheckInvariants(), "");
}

TEST(BlockPoolTest, SharedBlockIsFreedByItsLastReference) {
  BlockPool pool({.num_blocks = 2, .block_tokens = 16});
  const int32_t b = (*pool.Allocate(1))[0];
  pool.Ref(b);
  pool.Release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.blocks_in_use(), 1);
  pool.Release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPoolTest, RandomOperationsMatchANaiveModel) {
  BlockPool pool({.num_blocks = 32, .block_tokens = 16});
  std::map<int32_t, int> model;  // block -> references
  core::Rng rng(7);
  for (int step = 0; step < 5000; ++step) {
    const int op = static_cast<int>(rng.Below(3));
    if (op == 0) {
      const int32_t n = static_cast<int32_t>(rng.Below(5));
      auto got = pool.Allocate(n);
      ASSERT_EQ(got.has_value(), n <= 32 - static_cast<int>(model.size()));
      if (got)
        for (int32_t b : *got) {
          ASSERT_EQ(model.count(b), 0u);
          model[b] = 1;
        }
    } else if (!model.empty()) {
      auto it = std::next(model.begin(), rng.Below(model.size()));
      if (op == 1) {
        pool.Ref(it->first);
        ++it->second;
      } else {
        pool.Release(it->first);
        if (--it->second == 0) model.erase(it);
      }
    }
    ASSERT_EQ(pool.blocks_in_use(), static_cast<int32_t>(model.size()));
    ASSERT_EQ(pool.CheckInvariants(), "");
  }
}

}  // namespace
}  // namespace radixlm::cache
