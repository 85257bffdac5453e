// The block-granular prefix tree behind vLLM+ (block_hybrid_cache.cc) and its reference twin
// (marconi_reference.cc): nodes of at most one block of tokens, children found by their first
// token, optionally an ordered set of the evictable leaves by recency. Internal to cache/.
//
// Invariants: only a full block has children; the children of a node with the same first token
// are kept in insertion order (the reference's dict order, which decides among equal matches);
// with the LRU index on, it holds exactly the unlocked, alive, childless non-root nodes, keyed
// by their last access (lazily: see Reindex).
//
// BlockTreeCache: what the two caches on such a tree share (the tree, its clock, the request
// history and counters, and the members that only read, lock or grow the tree).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/flat_map_internal.h"
#include "cache/hybrid_internal.h"
#include "core/status.h"

namespace radixlm::cache::internal {

// Nodes and their token blocks live in fixed-size chunks: growing never copies what is stored
// (a large tree would otherwise be copied on every doubling) and ids stay stable.
template <typename T>
class Chunked {
 public:
  static constexpr int kShift = 14;
  static constexpr size_t kChunk = size_t{1} << kShift, kMask = kChunk - 1;
  // `width` elements per index (a node, or a node's block of tokens).
  explicit Chunked(size_t width = 1) : width_(width) {}
  T* at(size_t i) { return chunks_[i >> kShift].get() + (i & kMask) * width_; }
  const T* at(size_t i) const { return chunks_[i >> kShift].get() + (i & kMask) * width_; }
  T& operator[](size_t i) { return *at(i); }
  const T& operator[](size_t i) const { return *at(i); }
  size_t size() const { return size_; }
  size_t Append() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk * width_));
    return size_++;
  }

 private:
  size_t width_;
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

class BlockTree {
 public:
  static constexpr int32_t kRoot = 0;
  struct Node {
    int32_t parent = -1;
    int32_t len = 0;                 // tokens held (at most one block; see tokens())
    std::vector<int32_t> children;   // insertion order; kept only with keep_child_order
    int32_t num_children = 0;
    int64_t last_access = 0;
    int32_t lock_ref = 0;
    bool alive = false;
    int32_t next_in_group = -1;      // the next sibling with the same first token
    // Children are grouped by first token. The head of one group is kept here; the heads of
    // the others are in the hashed index (hashed_groups of them). Most nodes have one group,
    // and finding a child then costs no hash probe: the probe is a cache miss in a large tree,
    // while the inline child was usually allocated right after this node.
    int32_t inline_head = -1;
    int32_t hashed_groups = 0;
    bool indexed = false;            // evictable (with the LRU index on)
  };
  struct MatchResult {
    std::vector<int32_t> nodes;    // matched nodes, root excluded
    std::vector<int32_t> visited;  // nodes the walk entered (a real match refreshes them)
    int64_t matched = 0;
  };

  BlockTree(int block, bool keep_child_order, bool lru_index)
      : block_(block), keep_order_(keep_child_order), lru_index_(lru_index), arena_(static_cast<size_t>(block)) {
    RADIXLM_CHECK(block_ > 0);
    nodes_.Append();
    arena_.Append();
    nodes_[kRoot].alive = true;
  }

  int block() const { return block_; }
  const Node& node(int32_t id) const { return nodes_[id]; }
  // The node's tokens, kept in one arena (a block per node id): no allocation per node.
  std::span<const int32_t> tokens(int32_t id) const {
    return {arena_.at(id), static_cast<size_t>(nodes_[id].len)};
  }
  int64_t node_count() const { return node_count_; }
  int64_t kv_tokens() const { return kv_tokens_; }
  int64_t evictable() const { return evictable_; }
  // Changes whenever the tree's structure or tokens change (not on refreshes or locks).
  uint64_t version() const { return version_; }
  // The least recently used evictable leaf (-1: none). Stale heap entries are dropped here.
  int32_t Oldest() {
    if (!lru_built_) {  // the first eviction: index what is evictable now, then keep it current
      for (size_t id = 0; id < nodes_.size(); ++id)
        if (nodes_[id].indexed) lru_.push_back({nodes_[id].last_access, static_cast<int32_t>(id)});
      std::make_heap(lru_.begin(), lru_.end(), std::greater<>());
      lru_built_ = true;
    }
    while (!lru_.empty()) {
      const auto [access, id] = lru_.front();
      const Node& n = nodes_[id];
      if (n.indexed && n.last_access == access) return id;
      std::pop_heap(lru_.begin(), lru_.end(), std::greater<>());
      lru_.pop_back();
    }
    return -1;
  }

  // Whole blocks first; then a trailing partial block only if it matches completely.
  // resume: an earlier match of a prefix of key against this same structure (version()
  // unchanged): its full blocks are taken as matched and the walk goes on from there.
  MatchResult Match(std::span<const int32_t> key, const MatchResult* resume = nullptr) const {
    MatchResult r;
    int32_t node = kRoot;
    if (resume != nullptr) {
      for (int32_t n : resume->nodes) {
        if (nodes_[n].len != block_) break;
        r.visited.push_back(node);
        r.nodes.push_back(n);
        r.matched += block_;
        key = key.subspan(block_);
        node = n;
      }
    }
    for (;;) {
      r.visited.push_back(node);
      const int32_t group = key.empty() ? -1 : Group(node, key[0]);
      if (group < 0) return r;
      int64_t best = 0;
      for (int32_t c = group; c >= 0; c = nodes_[c].next_in_group) best = std::max(best, KeyMatch(tokens(c), key));
      if (best == block_) {  // a full block matches: descend into the first such child
        for (int32_t c = group; c >= 0; c = nodes_[c].next_in_group) {
          if (KeyMatch(tokens(c), key) == block_) {
            r.nodes.push_back(c);
            r.matched += block_;
            key = key.subspan(block_);
            node = c;
            break;
          }
        }
        continue;
      }
      for (int32_t c = group; c >= 0; c = nodes_[c].next_in_group) {
        const int64_t len = nodes_[c].len;
        if (KeyMatch(tokens(c), key) == len) {
          r.nodes.push_back(c);
          r.matched += len;
          return r;
        }
      }
      return r;
    }
  }

  // The child of `node` an insertion of `key` descends into: the first whose whole block is a
  // prefix of key and matches as far as any child does; -1 if none.
  int32_t InsertStep(int32_t node, std::span<const int32_t> key) const {
    const int32_t group = key.empty() ? -1 : Group(node, key[0]);
    if (group < 0) return -1;
    int64_t best = 0;
    for (int32_t c = group; c >= 0; c = nodes_[c].next_in_group) best = std::max(best, KeyMatch(tokens(c), key));
    for (int32_t c = group; c >= 0; c = nodes_[c].next_in_group) {
      const int64_t pl = KeyMatch(tokens(c), key);
      if (pl == nodes_[c].len && pl == best) return c;
    }
    return -1;
  }

  int32_t NewNode(int32_t parent, std::span<const int32_t> tokens, int64_t clock) {
    const int32_t id = ReuseOrAppend(free_, [this](int32_t i) { nodes_[i] = Node(); }, [this] {
      const size_t appended = nodes_.Append();
      arena_.Append();
      return static_cast<int32_t>(appended);
    });
    ++version_;
    Node& n = nodes_[id];
    n.alive = true;
    n.parent = parent;
    RADIXLM_CHECK(!tokens.empty() && tokens.size() <= static_cast<size_t>(block_));
    std::copy(tokens.begin(), tokens.end(), arena_.at(id));
    n.len = static_cast<int32_t>(tokens.size());
    n.last_access = clock;
    ++node_count_;
    kv_tokens_ += static_cast<int64_t>(tokens.size());
    AddChild(parent, id);
    Reindex(id);
    return id;
  }

  // Fills the partial block `id` (a leaf) with more tokens; the reference re-keys it, which
  // moves it last among its siblings.
  void Extend(int32_t id, std::span<const int32_t> more) {
    Node& n = nodes_[id];
    RADIXLM_CHECK(n.num_children == 0 && n.len + more.size() <= static_cast<size_t>(block_));
    ++version_;
    const int32_t parent = n.parent;
    RemoveChild(parent, id);
    std::copy(more.begin(), more.end(), arena_.at(id) + n.len);
    n.len += static_cast<int32_t>(more.size());
    kv_tokens_ += static_cast<int64_t>(more.size());
    AddChild(parent, id);
  }

  // Deletes the unlocked leaf `id`; its parent may become an evictable leaf.
  void RemoveLeaf(int32_t id) {
    Node& n = nodes_[id];
    RADIXLM_CHECK(id != kRoot && n.alive && n.num_children == 0);
    ++version_;
    const int32_t parent = n.parent;
    RemoveChild(parent, id);
    kv_tokens_ -= n.len;
    --node_count_;
    n.alive = false;
    Reindex(id);
    free_.push_back(id);
  }

  void Touch(int32_t id, int64_t clock) {
    nodes_[id].last_access = clock;
    Reindex(id);
  }
  // Touches every node a match entered (as a real match refreshes them).
  void TouchVisited(const MatchResult& m, int64_t clock) {
    for (int32_t n : m.visited) Touch(n, clock);
  }
  void AddLock(int32_t id, int delta) {
    nodes_[id].lock_ref += delta;
    RADIXLM_CHECK(nodes_[id].lock_ref >= 0);
    Reindex(id);
  }
  // AddLock on `id` and every node above it up to the root (excluded); id -1: none.
  void AddLockPath(int32_t id, int delta) {
    for (int32_t n = id; n > kRoot; n = nodes_[n].parent) AddLock(n, delta);
  }

  // radix_cache_vllm._insert_helper, iteratively: inserts `key` below `node`, descending into
  // the child InsertStep picks (each node entered touched at `clock`). A block goes in through
  // new_block(parent, tokens) -> its id; the rest of a partial block (not the root) through
  // fill(node, tokens) -> the node to go on from.
  template <typename NewBlock, typename Fill>
  void Insert(int32_t node, std::span<const int32_t> key, int64_t clock, NewBlock new_block, Fill fill) {
    for (;;) {
      Touch(node, clock);
      const int32_t next = InsertStep(node, key);
      if (next >= 0) {
        key = key.subspan(nodes_[next].len);
        node = next;
        continue;
      }
      if (key.empty()) return;
      const Node& n = nodes_[node];
      const bool whole = node == kRoot || n.len == block_;  // a new block below it, else fill it
      const size_t take = std::min<size_t>(whole ? block_ : block_ - n.len, key.size());
      node = whole ? new_block(node, key.first(take)) : fill(node, key.first(take));
      key = key.subspan(take);
    }
  }

  // Structural invariants; CHECK-fails if broken.
  void CheckInvariants() const {
    int64_t count = 0, token_count = 0, indexed = 0;
    std::unordered_map<int32_t, std::vector<int32_t>> kids;
    std::unordered_map<int32_t, int32_t> hashed;
    groups_.ForEach([&](uint64_t key, int32_t head) {
      const int32_t parent = static_cast<int32_t>(key >> 32);
      ++hashed[parent];
      RADIXLM_CHECK(nodes_[parent].inline_head < 0 || tokens(nodes_[parent].inline_head)[0] != static_cast<int32_t>(key));
      for (int32_t c = head; c >= 0; c = nodes_[c].next_in_group) kids[parent].push_back(c);
    });
    for (size_t id = 0; id < nodes_.size(); ++id) {
      if (!nodes_[id].alive) continue;
      RADIXLM_CHECK(nodes_[id].hashed_groups == hashed[static_cast<int32_t>(id)]);
      for (int32_t c = nodes_[id].inline_head; c >= 0; c = nodes_[c].next_in_group) kids[static_cast<int32_t>(id)].push_back(c);
    }
    DepthFirst(kRoot, [&](int32_t id, std::vector<int32_t>& stack) {
      const Node& n = nodes_[id];
      RADIXLM_CHECK(n.alive);
      if (id != kRoot) {
        ++count;
        token_count += n.len;
        RADIXLM_CHECK(n.len > 0 && n.len <= block_);
        RADIXLM_CHECK(n.num_children == 0 || n.len == block_);
        int in_group = 0;
        for (int32_t c = Group(n.parent, tokens(id)[0]); c >= 0; c = nodes_[c].next_in_group) in_group += c == id;
        RADIXLM_CHECK(in_group == 1);
      }
      RADIXLM_CHECK(n.indexed == (lru_index_ && Evictable(id)));
      indexed += n.indexed;
      const std::vector<int32_t> children = kids[id];
      RADIXLM_CHECK(static_cast<int32_t>(children.size()) == n.num_children);
      if (keep_order_) RADIXLM_CHECK(static_cast<int32_t>(n.children.size()) == n.num_children);
      for (int32_t child : children) {
        RADIXLM_CHECK(nodes_[child].parent == id);
        stack.push_back(child);
      }
    });
    RADIXLM_CHECK(count == node_count_ && token_count == kv_tokens_);
    RADIXLM_CHECK(indexed == evictable_ && (!lru_built_ || static_cast<int64_t>(lru_.size()) >= evictable_));
  }

 private:
  static uint64_t GroupKey(int32_t parent, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(token);
  }
  // The first child of `node` whose block starts with `token` (-1: none); the rest follow
  // through next_in_group, in insertion order.
  int32_t Group(int32_t node, int32_t token) const {
    const Node& n = nodes_[node];
    if (n.inline_head >= 0 && tokens(n.inline_head)[0] == token) return n.inline_head;
    return n.hashed_groups > 0 ? groups_.Find(GroupKey(node, token)) : -1;
  }
  static int64_t KeyMatch(std::span<const int32_t> edge, std::span<const int32_t> key) {
    return static_cast<int64_t>(CommonPrefix(edge, key));
  }
  void AddChild(int32_t parent, int32_t id) {
    nodes_[id].next_in_group = -1;
    const int32_t token = tokens(id)[0];
    int32_t head = Group(parent, token);
    if (head >= 0) {  // join the group, last
      while (nodes_[head].next_in_group >= 0) head = nodes_[head].next_in_group;
      nodes_[head].next_in_group = id;
    } else if (nodes_[parent].inline_head < 0) {
      nodes_[parent].inline_head = id;
    } else {
      groups_.TryEmplace(GroupKey(parent, token), id);
      ++nodes_[parent].hashed_groups;
    }
    if (keep_order_) nodes_[parent].children.push_back(id);
    ++nodes_[parent].num_children;
    Reindex(parent);
  }
  void RemoveChild(int32_t parent, int32_t id) {
    const uint64_t key = GroupKey(parent, tokens(id)[0]);
    Node& p = nodes_[parent];
    const bool inline_group = p.inline_head >= 0 && tokens(p.inline_head)[0] == tokens(id)[0];
    int32_t* head = inline_group ? &p.inline_head : groups_.FindMut(key);
    RADIXLM_CHECK(head != nullptr);
    if (*head == id) {
      if (nodes_[id].next_in_group >= 0) {
        *head = nodes_[id].next_in_group;
      } else if (inline_group) {
        *head = -1;  // another group may take the inline place when one is added
      } else {
        groups_.Erase(key);
        --p.hashed_groups;
      }
    } else {
      int32_t c = *head;
      while (nodes_[c].next_in_group != id) c = nodes_[c].next_in_group;
      nodes_[c].next_in_group = nodes_[id].next_in_group;
    }
    nodes_[id].next_in_group = -1;
    if (keep_order_) {
      auto& c = nodes_[parent].children;
      c.erase(std::find(c.begin(), c.end(), id));
    }
    --nodes_[parent].num_children;
    Reindex(parent);
  }
  bool Evictable(int32_t id) const {
    const Node& n = nodes_[id];
    return id != kRoot && n.alive && n.num_children == 0 && n.lock_ref == 0;
  }
  // The LRU index is a min-heap of (last access, node) with lazy deletion: an entry is live
  // while its node is evictable with that access; stale ones are dropped when they surface,
  // and the heap is rebuilt when they outnumber the live ones.
  void Reindex(int32_t id) {
    if (!lru_index_) return;
    Node& n = nodes_[id];
    const bool now = Evictable(id);
    evictable_ += static_cast<int64_t>(now) - static_cast<int64_t>(n.indexed);
    n.indexed = now;
    if (!now || !lru_built_) return;  // no heap until an eviction needs one
    lru_.push_back({n.last_access, id});
    std::push_heap(lru_.begin(), lru_.end(), std::greater<>());
    if (static_cast<int64_t>(lru_.size()) > 2 * evictable_ + 1024) {
      std::erase_if(lru_, [this](const std::pair<int64_t, int32_t>& e) {
        return !nodes_[e.second].indexed || nodes_[e.second].last_access != e.first;
      });
      std::sort(lru_.begin(), lru_.end());
      lru_.erase(std::unique(lru_.begin(), lru_.end()), lru_.end());
      std::make_heap(lru_.begin(), lru_.end(), std::greater<>());
    }
  }

  int block_;
  bool keep_order_, lru_index_;
  Chunked<Node> nodes_;
  std::vector<int32_t> free_;
  Chunked<int32_t> arena_;                             // node id's block of tokens, len valid
  FlatMap groups_;                                     // (parent, first token) -> first such child
  std::vector<std::pair<int64_t, int32_t>> lru_;      // min-heap of (last access, node), lazy
  int64_t evictable_ = 0;
  bool lru_built_ = false;
  uint64_t version_ = 0;
  int64_t node_count_ = 0, kv_tokens_ = 0;
};

// The base of vLLM+ (block_hybrid_cache.cc) and its reference twin (marconi_reference.cc): one
// copy of their state and of the members that only read, lock or grow the tree.
class BlockTreeCache : public HybridPrefixCache {
 public:
  void Lock(const HybridLookup& lookup) override { tree_.AddLockPath(lookup.node, +1); }
  void Unlock(const HybridLookup& lookup) override { tree_.AddLockPath(lookup.node, -1); }
  double TreeBytes() const override { return static_cast<double>(TreeBytesExact()); }
  const std::vector<HybridRequestStat>& history() const override { return history_; }
  HybridCacheStats Stats() const override { return HistoryStats(counters_, cost_, history_); }
  int64_t NodeCount() const override { return tree_.node_count(); }

 protected:
  BlockTreeCache(const HybridCacheConfig& config, const CostModel& cost, bool keep_child_order, bool lru_index)
      : config_(config), cost_(cost), tree_(config.vllm_block_tokens, keep_child_order, lru_index) {}
  int64_t TreeBytesExact() const { return HybridTreeBytes(cost_, tree_.node_count(), tree_.kv_tokens()); }
  void Refresh(const BlockTree::MatchResult& m) { tree_.TouchVisited(m, clock_); }
  // A lookup's hit is its whole match (every block holds a checkpoint); recorded in the history.
  HybridLookup RecordHit(const BlockTree::MatchResult& m, int64_t input_tokens) {
    HybridLookup result;
    result.matched_tokens = result.hit_tokens = m.matched;
    result.node = m.nodes.empty() ? -1 : m.nodes.back();
    history_.push_back({input_tokens, m.matched});
    return result;
  }
  int32_t NewBlock(int32_t parent, std::span<const int32_t> tokens) {
    ++counters_.checkpoints_admitted;
    return tree_.NewNode(parent, tokens, clock_);
  }

  HybridCacheConfig config_;
  CostModel cost_;
  BlockTree tree_;
  int64_t clock_ = 0;
  std::vector<HybridRequestStat> history_;
  HybridCacheStats counters_;
};

}  // namespace radixlm::cache::internal
