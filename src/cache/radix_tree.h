// Radix-tree prefix cache over the paged KV block pool (SGLang's RadixAttention, ids only).
//
// Each node's edge is a run of tokens at positions [start, end) of every sequence that has
// the node's path as a prefix; it holds, for each KV block index its range touches, the id of
// a block whose slots are valid for every position of that block up to `end` along the path
// (the invariant that lets a child share its first block with its parent after a split).
// Matching is token-granular. A request whose match ends inside a block gets a private copy
// of that block's valid prefix (copy-on-write, planned here as ids, executed by the runner),
// so partial blocks never cost hit rate; see docs/cache.md for the measured alternative.
//
// Mutation is two-phase (STYLE.md): Reserve() plans a request's match, copy-on-write and the
// LRU evictions needed to allocate its blocks, with no side effects; Commit() applies exactly
// that plan. Locked nodes (those on a running request's path) are never evicted.
// Eviction takes unlocked leaves in the order of the eviction policy's keys (cache/kv_policy.h;
// LRU by default) from an ordered set: O(log n) per victim.
// Match is O(prompt length) (one child lookup per edge, then a token compare).
// Namespaces (cache_salt): each has its own root, so sequences of different namespaces never
// match each other's prefixes; they share the pool, the LRU order and eviction. Namespace 0 is
// the default root.
// Single-threaded: owned by the engine loop (and replayed as is by the simulator).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"
#include "cache/kv_policy.h"

namespace radixlm::cache {

using NodeId = int32_t;
inline constexpr NodeId kRootNode = 0;

struct CacheStats {
  int64_t requests = 0;
  int64_t prompt_tokens = 0;      // tokens of prompts seen by Commit
  int64_t matched_tokens = 0;     // of which were served from the cache
  int64_t aligned_matched_tokens = 0;  // what block-aligned matching would have served
  int64_t inserted_tokens = 0;
  int64_t evicted_tokens = 0;
  int64_t evicted_nodes = 0;
  int64_t cow_copies = 0;
  double hit_rate() const { return prompt_tokens ? double(matched_tokens) / prompt_tokens : 0.0; }
};

struct MatchResult {
  int64_t length = 0;             // matched tokens
  NodeId node = kRootNode;        // deepest node touched by the match (may be matched partially)
  std::vector<int32_t> blocks;    // block ids covering positions [0, length), one per block index
};

// The plan for admitting one request (see Reserve).
struct Reservation {
  MatchResult match;
  int32_t new_blocks = 0;         // fresh blocks to allocate (including a copy-on-write target)
  int32_t cow_tokens = 0;         // > 0: the last matched block is partial; copy its first cow_tokens
  std::vector<NodeId> evictions;  // leaves to evict, in order
  bool feasible = false;          // enough blocks after the planned evictions
  uint64_t version = 0;           // tree version the plan was made against
};

// What Commit hands back: the request's initial block table and its lock.
struct Admission {
  NodeId locked_node = kRootNode;
  int64_t cached_tokens = 0;
  std::vector<int32_t> block_table;   // positions [0, capacity) for the reserved tokens
  std::vector<int32_t> owned_blocks;  // the fresh ones the request must release
  int32_t cow_src = -1, cow_dst = -1, cow_tokens = 0;  // copy KV slots [0, cow_tokens) src -> dst
};

// Told of every run of positions the tree starts or stops holding, so that a listener can
// follow which full blocks it holds (cache/kv_events.h). Called inside the mutation.
class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // Positions [begin, path.size()) of namespace ns are now held; path: tokens from position 0.
  virtual void Stored(int64_t ns, std::span<const int32_t> path, int64_t begin) = 0;
  // Positions [begin, path.size()) are no longer held (an evicted leaf's edge).
  virtual void Removed(int64_t ns, std::span<const int32_t> path, int64_t begin) = 0;
  // A tier under the pool (cache/block_tier.h) took full blocks `blocks` (indices, ascending) of
  // path, which it names by `tier_keys` (one each), or dropped the blocks it named so.
  virtual void TierStored(std::string_view medium, int64_t ns, std::span<const int32_t> path,
                          std::span<const int64_t> blocks, std::span<const std::array<uint8_t, 32>> tier_keys) {}
  virtual void TierRemoved(std::string_view medium, std::span<const std::array<uint8_t, 32>> tier_keys) {}
};

class RadixTree {
 public:
  // policy: null is LRU.
  explicit RadixTree(BlockPool& pool, std::shared_ptr<const KvEvictionPolicy> policy = nullptr);

  // Longest cached prefix of tokens[0, limit) in namespace `ns`, with the blocks that hold it.
  // No side effects.
  MatchResult Match(const std::vector<int32_t>& tokens, int64_t limit, int64_t ns = 0) const;
  // What followed `tokens` in the cache before: when all of `tokens` is a cached path of
  // namespace `ns`, appends up to `max` tokens that continue it (the rest of the edge, then at
  // each branch the most recently used child) to *out. No side effects (speculative drafts,
  // speculate/). O(tokens + max).
  void Continuation(std::span<const int32_t> tokens, int64_t ns, int max, std::vector<int32_t>* out) const;
  // Plans admitting a request whose first `total_tokens` positions need KV blocks; the match is
  // capped at `match_limit` (callers keep at least one prompt token to compute).
  Reservation Reserve(const std::vector<int32_t>& tokens, int64_t match_limit, int64_t total_tokens,
                      int64_t ns = 0) const;
  // REQUIRES: r.feasible and no mutation since Reserve.
  Admission Commit(const Reservation& r, int64_t prompt_tokens);

  // Inserts tokens[0, n) whose KV lives in `block_table` (the request's table; blocks are
  // referenced, not taken). Returns the tokens that were new to the tree.
  int64_t Insert(const std::vector<int32_t>& tokens, int64_t n, const std::vector<int32_t>& block_table, int64_t ns = 0);
  void Lock(NodeId node);
  void Unlock(NodeId node);
  // Evicts LRU unlocked leaves until `blocks` blocks are free in the pool (or nothing is left
  // to evict). Returns the number freed.
  int32_t EvictUntilFree(int32_t blocks);

  // Marks (Anthropic's cache_control, the Responses API's prompt_cache_key): the client will
  // send tokens[0, n) of namespace ns again. Until `until` (seconds, the caller's clock) the
  // nodes of that cached path sort after every unmarked node in the eviction order, so
  // unmarked traffic goes first; a mark is a preference, never a lock (when nothing unmarked is
  // left, marked nodes go too, oldest first). At most max_blocks blocks are marked at once (a
  // bounded share of the pool): a mark that would pass it covers what fits. Renewing a mark
  // extends it. Returns the tokens marked (0: not cached, or no room).
  int64_t Mark(const std::vector<int32_t>& tokens, int64_t n, int64_t ns, double until, int64_t max_blocks);
  // Ends the marks whose time is at or before `now`.
  void ExpireMarks(double now);
  int64_t marked_blocks() const { return marked_blocks_; }

  int64_t cached_tokens() const { return cached_tokens_; }
  const CacheStats& stats() const { return stats_; }
  uint64_t version() const { return version_; }
  // Namespaces holding cached tokens (an emptied one costs nothing: many salts do not leak).
  size_t namespaces_held() const { return namespace_roots_.size(); }
  // Empty when consistent; else the first violated invariant.
  std::string CheckInvariants() const;
  // Borrowed; null: nobody listens.
  void set_observer(BlockObserver* observer) { observer_ = observer; }
  // Every node in pre-order (parents first), with its namespace, the tokens from position 0
  // to the node's end, and its first position.
  void VisitPaths(const std::function<void(int64_t ns, std::span<const int32_t> path, int64_t start)>& fn) const;

 private:
  struct Node {
    NodeId parent = -1;
    int64_t start = 0;              // position of the edge's first token
    std::vector<int32_t> tokens;    // the edge
    std::vector<int32_t> blocks;    // block ids for block indices start/bs .. (end-1)/bs
    std::unordered_map<int32_t, NodeId> children;  // by first token
    int32_t lock = 0;
    uint64_t last_access = 0;
    uint32_t hits = 0;              // admissions whose match reached this node
    EvictKey evict_key;             // the policy's key as of the last touch (+ the mark)
    double marked_until = 0;        // > 0: marked until then (Mark)
    bool alive = false;
    bool ns_root = false;           // a namespace's root: no tokens, never evicted
    int64_t end() const { return start + static_cast<int64_t>(tokens.size()); }
  };
  NodeId RootOf(int64_t ns) const;  // -1: the namespace holds nothing yet
  NodeId EnsureRoot(int64_t ns);

  NodeId NewNode();
  void FreeNode(NodeId id);
  // Splits `id` so that it ends at position `at` (start < at < end); returns the upper part.
  NodeId Split(NodeId id, int64_t at);
  bool IsEvictableLeaf(NodeId id) const;
  void UpdateEvictable(NodeId id);
  void Touch(NodeId id, bool hit = false);
  void Rekey(NodeId id);  // evict_key from the policy and the mark
  int32_t BlockFor(const Node& n, int64_t position) const;
  // Frees `id` (an unlocked leaf) and its block references; returns blocks freed.
  int32_t EvictLeaf(NodeId id);

  BlockPool& pool_;
  std::shared_ptr<const KvEvictionPolicy> policy_;
  int32_t bs_;
  std::vector<Node> nodes_;
  std::vector<NodeId> free_nodes_;
  std::set<std::pair<EvictKey, NodeId>> evictable_;  // (policy key, node), next victim first
  std::unordered_map<int64_t, NodeId> namespace_roots_;  // emptied ones are freed
  uint64_t clock_ = 0, version_ = 0;
  int64_t cached_tokens_ = 0;
  int64_t marked_blocks_ = 0;
  // (until, node) of every mark set, soonest first; stale entries (renewed, freed) are skipped.
  std::set<std::pair<double, NodeId>> mark_expiry_;
  CacheStats stats_;
  BlockObserver* observer_ = nullptr;
};

}  // namespace radixlm::cache
