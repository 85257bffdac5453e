// A memory tier under the KV block pool (a disk folder; a stack of media; a simulated one), as
// the cache sees it:
// a set of blocks' KV named by content keys. The cache never touches bytes; it asks whether the
// tier holds a key, plans loads of the blocks a match reaches beyond the pool into the fresh
// blocks the request would otherwise compute, and plans stores of the full blocks it inserts
// (written through, so that a block evicted from the pool is still found on the tier: eviction
// from the pool demotes). The executor moves the bytes (engine/executor.h: LoadBlocks,
// StoreBlocks).
//
// Keys are the chained block digests of cache/kv_events.h (vLLM's sha256_cbor), seeded by
// the tier's model fingerprint rather than a hash seed: block b's key names its tokens and every
// token before it, in its cache namespace, under one model's numerics. A tier's keys therefore
// mean the same thing in every process and after every restart of the same model, and nothing
// under any other (the fingerprint is in the seed, so it enters every key).
//
// Contains() is a hint: the tier may lose a block between the probe and the load (its own
// eviction, another process's, a corrupt file); a load that fails is recomputed, never used.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_events.h"

namespace radixlm::cache {

using TierKey = BlockDigest;

// What a tier holds and has moved, for /server_info and /metrics (cumulative counters).
struct TierReport {
  std::string medium, path, fingerprint;  // path, fingerprint: where applicable ("" else)
  std::string io;                         // how bytes move ("pread")
  bool shared = false;                    // other processes read and write it too
  int64_t blocks = 0, used_bytes = 0, capacity_bytes = 0;
  int64_t loaded_blocks = 0, bytes_read = 0, written_blocks = 0, bytes_written = 0;
  int64_t failed_loads = 0, skipped_stores = 0, evicted_blocks = 0;
  double load_seconds = 0;
};

// What the executor moves (ids and keys, as BlockCopyPlan).
struct TierTransfer {
  int32_t block = -1;   // the pool block
  TierKey key{};
};

// A hybrid model's recurrent state after a position, with the KV of the tokens after the last
// full block (they live in a partial block the block files do not hold): the state slot, the
// pool block of those tokens (-1: the position is block-aligned), the last full block's key
// (the hasher's none_hash() at block 0), the tokens after it, and the state's key
// (BlockHasher::StateAfter).
struct StateTransfer {
  int32_t slot = -1, block = -1, tail = 0;
  TierKey parent{}, key{};
};

// The blocks a medium no longer holds (its eviction, a failed load), for KV events.
struct TierDrops {
  std::string medium;
  std::vector<TierKey> keys;
};

// A state the tier holds after a parent block: `tail` tokens past it, named `key`.
struct TierState {
  int32_t tail = 0;
  TierKey key{};
};

class BlockTier {
 public:
  virtual ~BlockTier() = default;
  // The tier's name in events and metrics: "disk"; a stack of tiers: its first medium's.
  virtual std::string medium() const = 0;
  // Every medium a stored block is offered to, fastest first (one, unless a stack).
  virtual std::vector<std::string> media() const { return {medium()}; }
  // The hasher whose chain names this tier's blocks (block size and fingerprint seed).
  virtual const BlockHasher& hasher() const = 0;
  // Whether the tier (probably) holds the block; cheap (an index lookup; maybe one syscall).
  virtual bool Contains(const TierKey& key) const = 0;
  // Contains for each key at once (a remote tier pipelines the probes); by default one by one.
  virtual std::vector<char> ContainsMany(std::span<const TierKey> keys) const {
    std::vector<char> held(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) held[i] = Contains(keys[i]);
    return held;
  }
  // Whether every medium holds each key (what a store can skip); one medium: ContainsMany.
  virtual std::vector<char> HeldByAll(std::span<const TierKey> keys) const { return ContainsMany(keys); }
  // Hybrid models: the states it holds after the block `parent` (none: it stores no states).
  virtual std::vector<TierState> StatesAfter(const TierKey& parent) const { return {}; }
  // Thread-safe (a server reads it while the engine runs).
  virtual TierReport Report() const { return {.medium = medium()}; }
  // Each medium's report, fastest first (one, unless a stack).
  virtual std::vector<TierReport> Reports() const { return {Report()}; }
  // The blocks each medium no longer holds since the last call, once someone asked
  // (ReportDrops): for KV events.
  virtual void ReportDrops() {}
  virtual std::vector<TierDrops> TakeDropped() { return {}; }

  // Attach across replicas sharing a medium: a replica computing blocks marks their keys for
  // `ttl_seconds` (marking again refreshes), saying how fast it computes, and clears the marks
  // once its blocks are stored (after them, in the order its stores reach the medium); another
  // replica that finds a mark on the first block it lacks may wait for the blocks rather than
  // compute them (ComputingElsewhere: the marker's tokens per second; nullopt: no mark of another
  // process). A medium no other process reads ignores marks.
  virtual bool SharesMarks() const { return false; }  // whether marks mean anything on this medium
  virtual void MarkComputing(std::span<const TierKey> /*keys*/, double /*ttl_seconds*/, double /*tokens_per_second*/) {}
  virtual void ClearComputing(std::span<const TierKey> /*keys*/) {}
  virtual std::optional<double> ComputingElsewhere(const TierKey& /*key*/) const { return std::nullopt; }
};

}  // namespace radixlm::cache
