// KV cache events: what a fleet router (llm-d, NVIDIA Dynamo, SGLang's gateway) needs to mirror
// which prefixes a replica holds, in vLLM's terms: BlockStored / BlockRemoved of full blocks.
//
// Block identity is vLLM's prefix-cache hash (vllm/v1/core/kv_cache_utils.py, hash algorithm
// "sha256_cbor"): block b of a sequence is
//   d(b) = SHA-256(canonical CBOR [d(b-1) | NONE_HASH, [its block_tokens token ids], extra]),
//   NONE_HASH = SHA-256(CBOR text seed)            (vLLM: the PYTHONHASHSEED string),
//   extra = null, or [namespace] on block 0 of a cache_salt namespace (vLLM puts the salt itself
//   there; the tree keeps only its 60-bit hash),
// and an event names it by the digest's last 8 bytes read big-endian (vLLM's default
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES; llm-d's sha256-cbor mode computes the same keys from the
// event's tokens). Only full blocks exist: a partial last block is neither stored nor removed.
//
// The tree reports through BlockObserver every run of positions it starts or stops holding
// (RadixTree::Insert of a new edge, EvictLeaf); KvEventLog turns those into events, appended in
// order until the engine takes them once per step. CachedBlockKeys() walks a tree for the set
// of keys it holds now (a router's resync snapshot, and the tests' oracle for the events).
// Single-threaded, as the tree: owned by the engine loop.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/hybrid_cache.h"
#include "cache/radix_tree.h"

namespace radixlm::cache {

using BlockDigest = std::array<uint8_t, 32>;

class BlockHasher {
 public:
  BlockHasher(int32_t block_tokens, const std::string& seed = "0");
  // d(b) from d(b-1) (null for block 0) and block b's tokens; ns != 0 only matters for block 0.
  BlockDigest Next(const BlockDigest* previous, std::span<const int32_t> block, int64_t ns) const;
  // The digests of the full blocks of path (tokens from position 0).
  std::vector<BlockDigest> Chain(std::span<const int32_t> path, int64_t ns) const;
  static uint64_t Key(const BlockDigest& d);  // last 8 bytes, big-endian
  // An SSM checkpoint after path.size() tokens (radixlm's extension; no vLLM counterpart):
  // SHA-256(CBOR [d(last full block) | NONE_HASH, [the tokens after it], "ssm"]), so that
  // it names the exact position, block-aligned or not, and never equals a block's digest.
  BlockDigest State(std::span<const int32_t> path, int64_t ns) const;
  // The same from the digest of the last full block (null: none) and the tokens after it; a
  // state inside block 0 of a namespace ns != 0 carries [ns] as a fourth element (ns = 0: the
  // same digest as State's).
  BlockDigest StateAfter(const BlockDigest* parent, std::span<const int32_t> tail, int64_t ns) const;
  int32_t block_tokens() const { return bs_; }
  const BlockDigest& none_hash() const { return none_; }

 private:
  int32_t bs_;
  BlockDigest none_;
};

struct KvEvent {
  // kStateStored / kStateRemoved: a hybrid model's SSM checkpoint (the extension), with
  // block_keys = {its key}, position = its token count, parent_key = its last full block.
  enum class Kind { kStored, kRemoved, kAllCleared, kStateStored, kStateRemoved };
  Kind kind = Kind::kStored;
  std::vector<uint64_t> block_keys;      // in path order
  std::optional<uint64_t> parent_key;    // kStored: the block before the first (none at block 0)
  int64_t position = 0;                  // kState*: tokens before the checkpoint
  std::vector<int32_t> token_ids;        // kStored: block_keys.size() x block_tokens tokens
  // kStored / kRemoved: where the blocks live: "" (nil on the wire: the one tier there is), or,
  // with a tier under the pool, "cpu" (the pool) or the tier's medium ("disk").
  std::string medium;
};

class KvEventLog final : public BlockObserver, public StateObserver {
 public:
  explicit KvEventLog(BlockHasher hasher) : hasher_(std::move(hasher)) {}
  void Stored(int64_t ns, std::span<const int32_t> path, int64_t begin) override;
  void Removed(int64_t ns, std::span<const int32_t> path, int64_t begin) override;
  void TierStored(std::string_view medium, int64_t ns, std::span<const int32_t> path, std::span<const int64_t> blocks,
                  std::span<const std::array<uint8_t, 32>> tier_keys) override;
  void TierRemoved(std::string_view medium, std::span<const std::array<uint8_t, 32>> tier_keys) override;
  // With a tier under the pool, the pool's events name their medium ("cpu").
  void set_pool_medium(std::string medium) { pool_medium_ = std::move(medium); }
  void StateStored(std::span<const int32_t> path) override { State(path, KvEvent::Kind::kStateStored); }
  void StateRemoved(std::span<const int32_t> path) override { State(path, KvEvent::Kind::kStateRemoved); }
  bool empty() const { return pending_.empty(); }
  std::vector<KvEvent> Take();
  const BlockHasher& hasher() const { return hasher_; }

 private:
  void State(std::span<const int32_t> path, KvEvent::Kind kind);

  BlockHasher hasher_;
  std::vector<KvEvent> pending_;
  std::string pool_medium_;
  // The tier's blocks this log announced, by tier key: their event keys, to announce a drop.
  struct TierKeyHash {
    size_t operator()(const std::array<uint8_t, 32>& k) const;
  };
  std::unordered_map<std::array<uint8_t, 32>, uint64_t, TierKeyHash> tier_blocks_;
};

// Every full block the tree holds, as keys, sorted. O(tokens in the tree).
std::vector<uint64_t> CachedBlockKeys(const RadixTree& tree, const BlockHasher& hasher);
// Every checkpoint the cache holds, as keys, sorted.
std::vector<uint64_t> CachedStateKeys(const CheckpointCache& cache, const BlockHasher& hasher);

}  // namespace radixlm::cache
