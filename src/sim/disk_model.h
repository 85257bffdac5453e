// The tiers under the KV pool as the simulator models them (radixlm simulate --disk-gb N
// --disk-gbps B; --remote-gb N --remote-gbps B, one store every replica of a fleet shares): the
// same cache::BlockTier seam the engine's memory probes for the real disk tier
// (tier/disk_tier.h), holding content keys only, no bytes and no files. What it models is the
// real tier's index: a set of block keys bounded by a capacity in blocks, evicting the least
// recently used (a store or a load is a use, a probe is not, as in the disk tier; a store of a held
// block refreshes it, which the disk tier does not, but cache::Memory never offers a held block), so
// a policy's hit rate with a disk under the pool can be sized on a trace. What the disk's bandwidth costs is the
// cost executor's (sim/cost_executor.h: a load is charged to the simulated clock).
//
// Differences from the real tier, on purpose: capacity is counted in whole blocks of
// block_bytes (the disk tier adds a 192-byte header per file and evicts down to 90% of its bound
// past it); every store is written at once (the disk tier queues writes behind the step loop and may
// skip one when its queue is full); nothing is ever lost between a probe and a load.
//
// ModelledStack: the list of tiers under one replica's pool, fastest first (its own disk, the
// fleet's remote store), as tier/tier_stack.h stacks the real ones: a load is taken from the first
// tier that holds the block, at that tier's bandwidth; a store is written through to every tier.
// A remote store is modelled as a disk is, at the bandwidth given (no round trips, no loss).
//
// Keys: the chained block digests of cache/kv_events.h with the engine's block size and a fixed
// seed (kSeed), so a run is deterministic and its keys mean nothing outside it.
// Contains / Load / Store: O(1) expected (a hash map and an LRU list). Single-threaded, as the
// engine loop that drives it (Report included: nothing reads it from another thread).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_tier.h"

namespace radixlm::sim {

struct DiskModelStats {
  int64_t capacity_blocks = 0, blocks = 0;  // the bound, and blocks held now
  int64_t block_bytes = 0;
  int64_t stores = 0, written_blocks = 0;   // Store calls; of those, keys not held before
  int64_t loads = 0, loaded_blocks = 0;     // Load calls; of those, keys held
  int64_t evicted_blocks = 0;
  int64_t bytes_read = 0, bytes_written = 0;
};

class ModelledTier final : public cache::BlockTier {
 public:
  static constexpr const char* kSeed = "radixlm-sim-tier";
  // REQUIRES: block_tokens > 0, block_bytes > 0, capacity_blocks >= 0, gbps > 0 (GB/s, 1e9 bytes).
  ModelledTier(int32_t block_tokens, int64_t block_bytes, int64_t capacity_blocks, std::string medium = "disk", double gbps = 2);

  std::string medium() const override { return medium_; }
  // The seconds reading `blocks` blocks takes at the tier's bandwidth.
  double ReadSeconds(int64_t blocks) const { return static_cast<double>(blocks * stats_.block_bytes) / (gbps_ * 1e9); }
  const cache::BlockHasher& hasher() const override { return hasher_; }
  bool Contains(const cache::TierKey& key) const override { return index_.count(key) > 0; }
  // What it holds and moved, in the real tier's terms (the simulator reads it on its own thread).
  cache::TierReport Report() const override;

  // Writes the block unless it is held (then it is only made the most recently used), evicting
  // the least recently used blocks past the capacity (a capacity of 0 holds nothing).
  void Store(const cache::TierKey& key);
  // Whether the block is held; a held block becomes the most recently used.
  bool Load(const cache::TierKey& key);

  const DiskModelStats& stats() const { return stats_; }

 private:
  struct KeyHash {
    size_t operator()(const cache::TierKey& k) const;
  };
  cache::BlockHasher hasher_;
  std::string medium_;
  double gbps_;
  std::list<cache::TierKey> lru_;  // least recently used first
  std::unordered_map<cache::TierKey, std::list<cache::TierKey>::iterator, KeyHash> index_;
  DiskModelStats stats_;
};

class ModelledStack final : public cache::BlockTier {
 public:
  // Borrowed, fastest first. REQUIRES: at least one; one block size.
  explicit ModelledStack(std::vector<ModelledTier*> tiers);

  std::string medium() const override { return tiers_.front()->medium(); }
  std::vector<std::string> media() const override;
  const cache::BlockHasher& hasher() const override { return tiers_.front()->hasher(); }
  bool Contains(const cache::TierKey& key) const override;
  std::vector<char> HeldByAll(std::span<const cache::TierKey> keys) const override;
  cache::TierReport Report() const override { return tiers_.front()->Report(); }
  std::vector<cache::TierReport> Reports() const override;

  // Loads the block from the first tier that holds it: that tier's read seconds (nullopt: none).
  std::optional<double> Load(const cache::TierKey& key);
  void Store(const cache::TierKey& key);

 private:
  std::vector<ModelledTier*> tiers_;
};

}  // namespace radixlm::sim
