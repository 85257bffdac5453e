#include "cache/marconi_reference.h"

#include <algorithm>
#include <limits>

#include "cache/alpha_tuner.h"
#include "cache/block_tree_internal.h"
#include "cache/flat_map_internal.h"
#include "cache/hybrid_internal.h"
#include "cache/python_heap.h"

namespace radixlm::cache {
namespace {

constexpr int32_t kRoot = 0;

// The reference's LRU eviction (both trees): a Python heap of `leaves` by older(x, y) pops the
// oldest until `bytes_to_remove` are credited (a checkpoint and the KV of tokens(x) a leaf) or
// the root surfaces; remove(x) deletes the leaf and returns its parent if that joins the heap
// (a leaf now), else -1.
template <typename Older, typename Tokens, typename Remove>
void EvictOldestLeaves(std::vector<int32_t> leaves, Older older, double bytes_to_remove, const CostModel& cost,
                       Tokens tokens, Remove remove) {
  PythonHeap<int32_t, Older> heap(std::move(leaves), older);
  double evicted = 0;
  while (evicted < bytes_to_remove && !heap.empty()) {
    const int32_t x = heap.Pop();
    if (x == kRoot) break;
    evicted += static_cast<double>(cost.CheckpointBytes() + cost.KvBytes(tokens(x)));
    const int32_t next = remove(x);
    if (next >= 0) heap.Push(next);
  }
}

// utils._normalize: min-max scaling to [0, 1]; all ones if the values are one or all equal.
void Normalize(std::vector<double>& v) {
  if (v.size() > 1) {
    const double lo = *std::min_element(v.begin(), v.end());
    const double hi = *std::max_element(v.begin(), v.end());
    if (lo != hi) {
      for (double& x : v) x = (x - lo) / (hi - lo);
      return;
    }
  }
  std::fill(v.begin(), v.end(), 1.0);
}

// radix_cache_hybrid.py (SGLang+ when evicting leaves by LRU, Marconi with evict_v2).
class ReferenceRadixCache final : public HybridPrefixCache {
 public:
  ReferenceRadixCache(const HybridCacheConfig& config, const CostModel& cost)
      : config_(config), cost_(cost), alpha_(config.alpha) {
    nodes_.emplace_back();
    nodes_[kRoot].alive = true;
    if (config.policy == HybridPolicy::kMarconi) tuner_ = std::make_shared<AlphaTuner>(config_);
  }
  // A replica for a tuning replay: the tree copied, alpha fixed.
  ReferenceRadixCache(const ReferenceRadixCache& from, double alpha)
      : config_(from.config_), cost_(from.cost_), alpha_(alpha), nodes_(from.nodes_),
        free_nodes_(from.free_nodes_), node_count_(from.node_count_), kv_tokens_(from.kv_tokens_),
        clock_(from.clock_) {
    config_.policy = HybridPolicy::kMarconiStatic;
    config_.tuning_pool = nullptr;
  }

  HybridLookup Lookup(std::span<const int32_t> input) override {
    Tick();
    if (tuner_ && history_.empty() && !tuner_->tuned()) snapshot_ = std::make_shared<ReferenceRadixCache>(*this, alpha_);
    const Walk walk = Match(input);
    if (PathRefresh()) RefreshPath(walk);
    HybridLookup result;
    result.matched_tokens = walk.matched;
    result.hit_tokens = KvOnlyHits() ? walk.matched : walk.reusable;
    result.branch_checkpoint = !KvOnlyHits() && walk.matched > walk.reusable;
    result.node = KvOnlyHits() ? (walk.full.empty() ? -1 : walk.full.back()) : walk.deepest_state;
    if (!PathRefresh() && result.node >= 0) Touch(result.node);  // only the node serving the hit
    history_.push_back({static_cast<int64_t>(input.size()), result.hit_tokens});
    if (tuner_) tuner_->RecordLookup(input);
    return result;
  }

  HybridReservation Reserve(std::span<const int32_t> sequence) const override {
    const Walk walk = Match(sequence);
    HybridReservation r;
    r.new_tokens = static_cast<int64_t>(sequence.size()) - walk.matched;
    r.checkpoints = walk.matched > walk.reusable ? 2 : 1;
    internal::PriceReservation(cost_, TreeBytesExact(), config_.capacity_bytes, &r);
    return r;
  }

  // The reference's insert: a dry-run match (which refreshes recency like a real one), an
  // estimate of the bytes, one eviction call, then the insertion whatever the eviction freed.
  void Admit(std::span<const int32_t> sequence) override {
    Tick();
    if (tuner_) {
      tuner_->RecordFinish(sequence);
      PollTuner();
    }
    Tick();
    const Walk walk = Match(sequence);
    if (PathRefresh()) RefreshPath(walk);
    if (!PathRefresh() && !walk.full.empty()) Touch(walk.full.back());
    const HybridReservation r = Reserve(sequence);
    if (r.bytes_over_capacity > 0) Evict(r.bytes_over_capacity);
    InsertSequence(sequence);
  }

  void Lock(const HybridLookup& lookup) override {
    if (lookup.node < 0) return;
    ++nodes_[lookup.node].state_lock_ref;
    for (int32_t n = lookup.node; n != kRoot; n = nodes_[n].parent) ++nodes_[n].lock_ref;
  }
  void Unlock(const HybridLookup& lookup) override {
    if (lookup.node < 0) return;
    RADIXLM_CHECK(nodes_[lookup.node].state_lock_ref > 0);
    --nodes_[lookup.node].state_lock_ref;
    for (int32_t n = lookup.node; n != kRoot; n = nodes_[n].parent) {
      RADIXLM_CHECK(nodes_[n].lock_ref > 0);
      --nodes_[n].lock_ref;
    }
  }
  double TreeBytes() const override { return static_cast<double>(TreeBytesExact()); }
  double alpha() const override { return alpha_; }
  const std::vector<HybridRequestStat>& history() const override { return history_; }
  HybridCacheStats Stats() const override {
    HybridCacheStats s = internal::HistoryStats(counters_, cost_, history_);
    s.bootstrap_window = bootstrap_window_;
    if (tuner_) {
      s.alpha_tuned = tuner_->tuned();
      s.tuning_window_tokens = tuner_->peak_tokens();
    }
    return s;
  }
  int64_t NodeCount() const override { return node_count_; }
  void CheckInvariants() const override {
    int64_t count = 0, tokens = 0;
    internal::DepthFirst(kRoot, [&](int32_t id, std::vector<int32_t>& stack) {
      const Node& n = nodes_[id];
      RADIXLM_CHECK(n.alive);
      if (id != kRoot) {
        ++count;
        tokens += static_cast<int64_t>(n.tokens.size());
        RADIXLM_CHECK(!n.tokens.empty());
        RADIXLM_CHECK(n.depth == nodes_[n.parent].depth + static_cast<int64_t>(n.tokens.size()));
      }
      for (const auto& [token, child] : n.children) {
        RADIXLM_CHECK(nodes_[child].parent == id && nodes_[child].tokens[0] == token);
        stack.push_back(child);
      }
    });
    RADIXLM_CHECK(count == node_count_ && tokens == kv_tokens_);
  }

 private:
  struct Node {
    int32_t parent = -1;
    std::vector<int32_t> tokens;
    // (first token of the child's edge, child) in insertion order: the reference's dict order,
    // which decides ties among equally scored eviction candidates.
    std::vector<std::pair<int32_t, int32_t>> children;
    int64_t depth = 0;
    int64_t last_access = 0;
    int32_t lock_ref = 0, state_lock_ref = 0;
    bool alive = false;
  };
  struct Walk {
    std::vector<int32_t> full;     // fully matched nodes
    int64_t matched = 0;           // raw matched tokens
    int64_t reusable = 0;          // the sum of the fully matched nodes' edges
    std::vector<int32_t> visited;  // root first
    int32_t deepest_state = -1;
  };

  bool PathRefresh() const { return config_.policy == HybridPolicy::kSglangPlus; }
  bool KvOnlyHits() const { return cost_.shape().n_ssm_layers == 0; }
  int64_t TreeBytesExact() const { return internal::HybridTreeBytes(cost_, node_count_, kv_tokens_); }
  void Tick() { ++clock_; }
  void Touch(int32_t node) { nodes_[node].last_access = clock_; }
  void RefreshPath(const Walk& walk) {
    for (int32_t n : walk.visited) Touch(n);
  }
  int32_t FindChild(int32_t node, int32_t first_token) const {
    for (const auto& [token, child] : nodes_[node].children)
      if (token == first_token) return child;
    return -1;
  }
  void ReplaceChild(int32_t parent, int32_t old_child, int32_t new_child) {
    for (auto& entry : nodes_[parent].children)
      if (entry.second == old_child) entry.second = new_child;
  }
  double Efficiency(int32_t node) const { return internal::EdgeEfficiency(cost_, nodes_[node]); }
  int32_t NewNode() { return internal::NewRadixNode(nodes_, free_nodes_, clock_, &node_count_); }
  template <typename OnEdge>
  internal::WalkEnd Descend(std::span<const int32_t> key, OnEdge on_edge) const {
    return internal::Descend(nodes_, [this](int32_t n, int32_t token) { return FindChild(n, token); }, key, on_edge);
  }
  // Every node, root first, in preorder with children in insertion order (the reference's walks).
  std::vector<int32_t> Preorder() const {
    std::vector<int32_t> order;
    internal::DepthFirst(kRoot, [&](int32_t id, std::vector<int32_t>& stack) {
      order.push_back(id);
      for (auto it = nodes_[id].children.rbegin(); it != nodes_[id].children.rend(); ++it) stack.push_back(it->second);
    });
    return order;
  }

  // Keeps descending below a partially matched edge, from the token where the match stopped
  // (a quirk of the reference's recursion; it can count tokens it never compared).
  Walk Match(std::span<const int32_t> key) const {
    Walk walk;
    walk.visited.push_back(kRoot);
    Descend(key, [&](int32_t child, size_t, size_t n) {
      walk.matched += static_cast<int64_t>(n);
      if (n == nodes_[child].tokens.size()) {
        walk.full.push_back(child);
        walk.reusable += static_cast<int64_t>(n);
        walk.deepest_state = child;
      }
      walk.visited.push_back(child);
      return child;
    });
    return walk;
  }

  void PollTuner() {
    internal::PollAlpha(tuner_.get(), snapshot_, cost_, static_cast<int64_t>(history_.size()), &alpha_);
  }

  void SplitEdge(int32_t child, int64_t at) {
    const int32_t split = NewNode();
    Node& s = nodes_[split];
    Node& c = nodes_[child];
    s.parent = c.parent;
    internal::CutEdge(s, c, at);
    s.children.push_back({c.tokens[0], child});
    ReplaceChild(s.parent, child, split);
    c.parent = split;
    ++counters_.branch_checkpoints;
    ++counters_.checkpoints_admitted;
  }

  void InsertSequence(std::span<const int32_t> sequence) {
    if (PathRefresh()) Touch(kRoot);
    // A split ends the walk: past it the sequence differs from the edge.
    const auto [parent, pos] = Descend(sequence, [&](int32_t child, size_t at, size_t n) {
      if (n == nodes_[child].tokens.size()) {
        // The reference's insert refreshes a fully matched node only if it descends past it.
        if (PathRefresh() && at + n < sequence.size()) Touch(child);
        return child;
      }
      SplitEdge(child, static_cast<int64_t>(n));
      const int32_t split = nodes_[child].parent;
      if (PathRefresh()) Touch(split);
      return split;
    });
    if (pos == sequence.size()) return;
    const int32_t leaf = NewNode();
    Node& l = nodes_[leaf];
    l.parent = parent;
    kv_tokens_ += internal::SetLeafEdge(l, nodes_[parent], sequence.subspan(pos));
    nodes_[parent].children.push_back({l.tokens[0], leaf});
    ++counters_.checkpoints_admitted;
  }

  void DeleteLeaf(int32_t node) {
    Node& n = nodes_[node];
    RADIXLM_CHECK(n.children.empty() && node != kRoot);
    auto& siblings = nodes_[n.parent].children;
    for (auto it = siblings.begin(); it != siblings.end(); ++it) {
      if (it->second == node) {
        siblings.erase(it);
        break;
      }
    }
    kv_tokens_ -= static_cast<int64_t>(n.tokens.size());
    Release(node);
    n.tokens.shrink_to_fit();
  }

  void MergeIntoChild(int32_t node) {
    Node& n = nodes_[node];
    RADIXLM_CHECK(n.children.size() == 1 && node != kRoot);
    const int32_t child = n.children[0].second;
    Node& c = nodes_[child];
    internal::PrependEdge(c, n);
    c.parent = n.parent;
    ReplaceChild(n.parent, node, child);
    Release(node);
  }

  // Returns a deleted or merged-away node to the pool: a checkpoint fewer, one eviction more.
  void Release(int32_t node) {
    Node& n = nodes_[node];
    n.alive = false;
    n.tokens.clear();
    n.children.clear();
    free_nodes_.push_back(node);
    --node_count_;
    ++counters_.evictions;
  }

  void Evict(double bytes_to_remove) {
    Tick();
    if (bootstrap_window_ < 0) bootstrap_window_ = static_cast<int64_t>(config_.bootstrap_multiplier) * history_.size();
    if (tuner_) tuner_->OnEviction(static_cast<int64_t>(history_.size()));
    if (config_.policy == HybridPolicy::kSglangPlus) {
      EvictLeavesLru(bytes_to_remove);
    } else {
      EvictMarconi(bytes_to_remove);
    }
  }

  // SGLang+: a heap of the current leaves by last access; a parent left childless joins it.
  void EvictLeavesLru(double bytes_to_remove) {
    std::vector<int32_t> leaves;
    for (int32_t id : Preorder())
      if (nodes_[id].children.empty()) leaves.push_back(id);
    auto older = [this](int32_t x, int32_t y) { return nodes_[x].last_access < nodes_[y].last_access; };
    auto tokens = [this](int32_t x) { return static_cast<int64_t>(nodes_[x].tokens.size()); };
    EvictOldestLeaves(std::move(leaves), older, bytes_to_remove, cost_, tokens, [this](int32_t x) {
      const int32_t parent = nodes_[x].parent;
      DeleteLeaf(x);
      return nodes_[parent].children.empty() ? parent : -1;
    });
  }

  // Marconi (evict_v2): rescan the nodes with <= 1 child for every victim.
  void EvictMarconi(double bytes_to_remove) {
    double bytes_evicted = 0;
    std::vector<int32_t> candidates;
    std::vector<double> efficiency, recency;
    while (bytes_evicted < bytes_to_remove && node_count_ > 0) {
      candidates.clear();
      for (int32_t id : Preorder())
        if (id != kRoot && nodes_[id].children.size() <= 1) candidates.push_back(id);
      efficiency.clear();
      recency.clear();
      for (int32_t id : candidates) {
        efficiency.push_back(Efficiency(id));
        recency.push_back(1.0 / static_cast<double>(clock_ - nodes_[id].last_access));
      }
      Normalize(efficiency);
      Normalize(recency);
      size_t victim = 0;
      double best = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < candidates.size(); ++i) {
        const double utility = alpha_ * efficiency[i] + recency[i];
        if (utility < best) best = utility, victim = i;  // first minimum, as list.index(min(...))
      }
      ++counters_.victim_searches;
      counters_.victim_scored += static_cast<int64_t>(candidates.size());
      counters_.victim_candidates += static_cast<int64_t>(candidates.size());
      bytes_evicted += EvictCandidate(candidates[victim], candidates.back());
    }
  }

  // Deletes a leaf or merges a one-child node into its child; returns the bytes the reference
  // credits for it.
  double EvictCandidate(int32_t id, int32_t last_scored) {
    if (nodes_[id].children.empty()) {
      // The reference credits the edge length of the *last candidate scored*, not the victim's.
      const int64_t credited = static_cast<int64_t>(nodes_[last_scored].tokens.size());
      DeleteLeaf(id);
      return static_cast<double>(cost_.CheckpointBytes() + cost_.KvBytes(credited));
    }
    MergeIntoChild(id);
    return static_cast<double>(cost_.CheckpointBytes());
  }

  HybridCacheConfig config_;
  CostModel cost_;
  double alpha_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  int64_t node_count_ = 0, kv_tokens_ = 0, clock_ = 0;
  std::vector<HybridRequestStat> history_;
  HybridCacheStats counters_;
  int64_t bootstrap_window_ = -1;
  std::shared_ptr<AlphaTuner> tuner_;
  std::shared_ptr<const ReferenceRadixCache> snapshot_;
};

// radix_cache_vllm.py.
class ReferenceBlockCache final : public internal::BlockTreeCache {
 public:
  ReferenceBlockCache(const HybridCacheConfig& config, const CostModel& cost)
      : BlockTreeCache(config, cost, /*keep_child_order=*/true, /*lru_index=*/false) {}

  HybridLookup Lookup(std::span<const int32_t> input) override {
    ++clock_;
    const internal::BlockTree::MatchResult m = tree_.Match(input);
    Refresh(m);
    return RecordHit(m, static_cast<int64_t>(input.size()));
  }

  // "Maybe off by one or two token blocks": the root counts as a matched block, and the
  // checkpoints are a fraction (extra / block).
  HybridReservation Reserve(std::span<const int32_t> sequence) const override {
    const internal::BlockTree::MatchResult m = tree_.Match(sequence);
    const int block = tree_.block();
    HybridReservation r;
    r.new_tokens = static_cast<int64_t>(sequence.size()) - block * static_cast<int64_t>(m.nodes.size() + 1);
    const double states = static_cast<double>(r.new_tokens) / block;
    const double needed = states * cost_.shape().n_ssm_layers * cost_.SsmStateBytesPerLayer() +
                          static_cast<double>(cost_.KvBytes(r.new_tokens));
    r.checkpoints = static_cast<int>(states);
    r.bytes_needed = static_cast<int64_t>(needed);
    r.bytes_over_capacity = std::max(0.0, static_cast<double>(TreeBytesExact()) + needed - config_.capacity_bytes);
    return r;
  }

  void Admit(std::span<const int32_t> sequence) override {
    clock_ += 2;  // the insertion, then its dry-run match: one clock step each
    Refresh(tree_.Match(sequence));
    const HybridReservation r = Reserve(sequence);
    if (r.bytes_over_capacity > 0) Evict(r.bytes_over_capacity);
    Insert(sequence);
  }

  void CheckInvariants() const override { tree_.CheckInvariants(); }

 private:

  // A partial block is filled in place; the reference re-keys it (last among its siblings).
  void Insert(std::span<const int32_t> key) {
    auto new_block = [this](int32_t parent, std::span<const int32_t> tokens) { return NewBlock(parent, tokens); };
    tree_.Insert(kRoot, key, clock_, new_block, [this](int32_t node, std::span<const int32_t> tokens) {
      tree_.Extend(node, tokens);
      return node;
    });
  }

  void Evict(double bytes_to_remove) {
    ++clock_;
    std::vector<int32_t> leaves;
    internal::DepthFirst(kRoot, [&](int32_t id, std::vector<int32_t>& stack) {
      const internal::BlockTree::Node& n = tree_.node(id);
      if (n.num_children == 0 && n.lock_ref == 0) leaves.push_back(id);
      for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(*it);
    });
    auto older = [this](int32_t x, int32_t y) { return tree_.node(x).last_access < tree_.node(y).last_access; };
    auto tokens = [this](int32_t x) { return static_cast<int64_t>(tree_.node(x).len); };
    EvictOldestLeaves(std::move(leaves), older, bytes_to_remove, cost_, tokens, [this](int32_t x) {
      const int32_t parent = tree_.node(x).parent;
      tree_.RemoveLeaf(x);
      ++counters_.evictions;
      return tree_.node(parent).num_children == 0 && tree_.node(parent).lock_ref == 0 ? parent : -1;
    });
  }
};

}  // namespace

core::StatusOr<std::unique_ptr<HybridPrefixCache>> MakeMarconiReferenceCache(const HybridCacheConfig& config,
                                                                             const CostModel& cost) {
  if (cost.accounting() != Accounting::kReference)
    return core::InvalidArgument("the reference cache needs the reference cost model");
  const HybridPolicyRow& row = HybridPolicyRowOf(config.policy);
  if (!row.in_reference)
    return core::InvalidArgument(std::string("the Marconi artifact has no ") + row.name + " policy; use --reference-accounting with " +
                                 HybridPolicyNames([](const HybridPolicyRow& r) { return r.in_reference; }));
  if (row.block_tree) return std::unique_ptr<HybridPrefixCache>(std::make_unique<ReferenceBlockCache>(config, cost));
  return std::unique_ptr<HybridPrefixCache>(std::make_unique<ReferenceRadixCache>(config, cost));
}

}  // namespace radixlm::cache
