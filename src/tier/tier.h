// The byte side of a memory tier under the KV block pool, one interface for every medium (a
// disk folder, a Redis server), and the registry that opens the tiers a setup asks for.
//
// cache::BlockTier is what the cache sees (keys, probes, reports); Tier adds what the executor
// needs to move a block's bytes between the pool and the medium. Nothing outside src/tier/ names
// a concrete medium: the runner fills a TierSetup and calls OpenTiers, and holds a Tier.
//
// Stacking: OpenTiers returns the tiers in the registry's order (fastest first) as one Tier; with
// more than one it is a TierStack (tier_stack.h), which loads from the first tier that holds a
// block and writes through to every tier.
//
// A new medium: one file in src/tier/ with a Tier subclass, plus one row in kTierMedia
// (tiers.cc) saying when a setup wants it and how to open it.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/block_tier.h"
#include "core/status.h"

namespace radixlm::tier {

class Tier : public cache::BlockTier {
 public:
  // Reads block `key` into dst (the pool's segments of one block); true when it arrived whole
  // and verified. A false load is recomputed by the engine, never used.
  virtual bool Load(const cache::TierKey& key, std::span<const iovec> dst) = 0;
  // Loads several blocks: ok[i] says whether keys[i] arrived in dst[i]. A medium with round trips
  // overlaps them (the remote tier pipelines); by default, one Load after another.
  virtual void LoadMany(std::span<const cache::TierKey> keys, std::span<const std::vector<iovec>> dst, std::span<char> ok) {
    for (size_t i = 0; i < keys.size(); ++i) ok[i] = Load(keys[i], dst[i]);
  }
  // Copies the block's bytes now and writes them behind (a medium may skip a store; it counts it).
  virtual void Store(const cache::TierKey& key, std::span<const iovec> segments) = 0;
  // Hybrid models: a recurrent state after `tail` tokens past block `parent` (with the KV block
  // of those tokens when tail > 0), found by StatesAfter(parent), loaded whole by LoadState.
  virtual void StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                          std::span<const iovec> segments) = 0;
  virtual bool LoadState(const cache::TierKey& key, std::span<const iovec> dst) = 0;
  // Waits until every store made so far is on the medium (tests, shutdown).
  virtual void Flush() = 0;
};

// What any medium may need to open; a medium's row decides from it whether it is wanted.
struct TierSetup {
  std::string fingerprint;        // the model fingerprint's canonical text (runner/tier_setup.h)
  int32_t block_tokens = 16;
  uint64_t block_bytes = 0;       // payload bytes of one KV block (KvStore::BytesPerBlock)
  uint64_t state_bytes = 0;       // hybrid models: one recurrent state's bytes (0: none stored)
  // The disk medium (--cache-dir, --cache-disk-gb, --cache-fsync).
  std::string disk_dir;
  int64_t disk_capacity_bytes = 0;
  bool disk_fsync = false;
  // The remote medium (--cache-remote, --cache-remote-password-file): a Redis server.
  std::string remote_url;
  std::string remote_password_file;  // its first line is the password ("" none)
};

// The tiers the setup wants, fastest first, as one Tier (null: none wanted). Errors: a medium
// that cannot be opened (its own message).
core::StatusOr<std::unique_ptr<Tier>> OpenTiers(const TierSetup& setup);

}  // namespace radixlm::tier
