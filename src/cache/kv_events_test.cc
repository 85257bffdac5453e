// KV cache events against the tree they describe: vLLM's block hashes, and a mirror rebuilt
// from the events alone that equals the tree's own set of full blocks after every mutation.
#include "cache/kv_events.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "cache/random_requests_test.h"
#include "core/random.h"

namespace radixlm::cache {
namespace {

std::string Hex(const BlockDigest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

// Vectors from vLLM's formula evaluated by Python's cbor2 (canonical) and hashlib:
//   NONE_HASH = sha256(cbor2.dumps("0")); d(b) = sha256(cbor2.dumps((parent, tuple(tokens), extra)))
TEST(BlockHasherTest, MatchesVllmSha256CborHashes) {
  const BlockHasher h(16, "0");
  EXPECT_EQ(Hex(h.none_hash()), "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
  std::vector<int32_t> tokens(32);
  std::iota(tokens.begin(), tokens.end(), 1);
  const std::vector<BlockDigest> chain = h.Chain(tokens, 0);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(BlockHasher::Key(chain[0]), 3236607068019569386ull);
  EXPECT_EQ(BlockHasher::Key(chain[1]), 2758186210834249151ull);
  // A namespace's first block carries it as its extra key: (12345,).
  EXPECT_EQ(BlockHasher::Key(h.Chain(tokens, 12345)[0]), 12560951217445976526ull);
  EXPECT_EQ(h.Chain(std::span<const int32_t>(tokens).first(15), 0).size(), 0u) << "a partial block has no hash";
}

// Random requests (shared prefixes, three namespaces), finishes and evictions on a small pool:
// applying the events in order gives exactly CachedBlockKeys(tree) every time, a stored key is
// never already held and a removed one always is.
TEST(KvEventLogTest, EventsRebuildTheTreesBlocksExactly) {
  for (int bs : {1, 4, 16}) {
    BlockPool pool({.num_blocks = 48, .block_tokens = bs});
    RadixTree tree(pool);
    KvEventLog log(BlockHasher(bs, "seed"));
    tree.set_observer(&log);
    std::set<uint64_t> mirror;
    std::vector<std::vector<int32_t>> finished;
    core::Rng rng(bs * 31 + 7);
    int64_t stored = 0, removed = 0;
    for (int step = 0; step < 600; ++step) {
      if (rng.Below(5) == 0) {
        tree.EvictUntilFree(static_cast<int32_t>(rng.Below(40)));
      } else {
        const std::vector<int32_t> t = RandomRequest(rng, finished, 3, 3 * bs + 3, 3);
        const int64_t ns = static_cast<int64_t>(rng.Below(3)) << 40;
        const Reservation r = tree.Reserve(t, static_cast<int64_t>(t.size()) - 1, t.size(), ns);
        if (!r.feasible) continue;
        const Admission a = tree.Commit(r, t.size());
        tree.Insert(t, t.size(), a.block_table, ns);
        if (a.cached_tokens > 0) tree.Unlock(a.locked_node);
        for (int32_t b : a.owned_blocks) pool.Release(b);
        finished.push_back(t);
      }
      for (const KvEvent& e : log.Take()) {
        for (size_t i = 0; i < e.block_keys.size(); ++i) {
          const uint64_t k = e.block_keys[i];
          if (e.kind == KvEvent::Kind::kStored) {
            ASSERT_TRUE(mirror.insert(k).second) << "stored twice, step " << step;
            ++stored;
          } else {
            ASSERT_EQ(mirror.erase(k), 1u) << "removed but not held, step " << step;
            ++removed;
          }
        }
        if (e.kind == KvEvent::Kind::kStored) {
          ASSERT_EQ(e.token_ids.size(), e.block_keys.size() * bs);
        }
      }
      const std::vector<uint64_t> held = CachedBlockKeys(tree, log.hasher());
      ASSERT_EQ(std::vector<uint64_t>(mirror.begin(), mirror.end()), held) << "bs " << bs << " step " << step;
    }
    EXPECT_GT(stored, 100);
    EXPECT_GT(removed, 50) << "the pool must be small enough to evict";
  }
}

// The SSM extension: a hybrid cache's checkpoints (branch points, ends of sequences, tombstones
// filled, victims deleted or merged away) announced as they change; the mirror equals the
// cache's own checkpoints after every admission, for the policies that serve.
TEST(KvEventLogTest, CheckpointEventsFollowTheHybridCacheExactly) {
  for (HybridPolicy policy : {HybridPolicy::kSglangPlus, HybridPolicy::kMarconi}) {
    auto cache = MakeSlotCheckpointCache(policy, 6, Marconi7BShape(16), 0.5, /*tune_in_background=*/false);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    KvEventLog log(BlockHasher(4));
    (*cache)->set_state_observer(&log);
    std::set<uint64_t> mirror;
    std::vector<std::vector<int32_t>> seen;
    core::Rng rng(static_cast<uint64_t>(policy) + 11);
    int64_t stored = 0, removed = 0;
    for (int step = 0; step < 400; ++step) {
      const std::vector<int32_t> t = RandomRequest(rng, seen, 3, 12, 3);
      (*cache)->Lookup(std::span<const int32_t>(t).first(t.size() - 1));
      (*cache)->Admit(t);
      seen.push_back(t);
      for (const KvEvent& e : log.Take()) {
        ASSERT_EQ(e.block_keys.size(), 1u);
        if (e.kind == KvEvent::Kind::kStateStored) {
          ASSERT_TRUE(mirror.insert(e.block_keys[0]).second) << "stored twice, step " << step;
          ++stored;
        } else {
          ASSERT_EQ(e.kind, KvEvent::Kind::kStateRemoved);
          ASSERT_EQ(mirror.erase(e.block_keys[0]), 1u) << "removed but not held, step " << step;
          ++removed;
        }
      }
      ASSERT_EQ(std::vector<uint64_t>(mirror.begin(), mirror.end()), CachedStateKeys(**cache, log.hasher())) << "step " << step;
    }
    EXPECT_GT(stored, 50);
    EXPECT_GT(removed, 20) << "six slots must evict";
  }
}

}  // namespace
}  // namespace radixlm::cache
