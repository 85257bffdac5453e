#include "cache/hybrid_radix_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "cache/block_hybrid_cache.h"
#include "cache/python_heap.h"
#include "core/thread_pool.h"

namespace radixlm::cache {

core::StatusOr<HybridPolicy> ParseHybridPolicy(const std::string& name) {
  if (name == "lru") return HybridPolicy::kLru;
  if (name == "sglang+" || name == "sglang") return HybridPolicy::kSglangPlus;
  if (name == "marconi") return HybridPolicy::kMarconi;
  if (name == "marconi-static") return HybridPolicy::kMarconiStatic;
  if (name == "vllm+" || name == "vllm") return HybridPolicy::kVllmPlus;
  return core::InvalidArgument("unknown cache policy '" + name +
                               "' (expected lru, vllm+, sglang+, marconi, marconi-static)");
}

const char* HybridPolicyName(HybridPolicy policy) {
  switch (policy) {
    case HybridPolicy::kLru: return "lru";
    case HybridPolicy::kSglangPlus: return "sglang+";
    case HybridPolicy::kMarconi: return "marconi";
    case HybridPolicy::kMarconiStatic: return "marconi-static";
    case HybridPolicy::kVllmPlus: return "vllm+";
  }
  return "?";
}

Flops HistoryFlopsSaved(const CostModel& cost, std::span<const HybridRequestStat> history) {
  const HybridShape& s = cost.shape();
  int64_t total_hit = 0;
  Flops per_request = 0;
  for (const HybridRequestStat& r : history) {
    total_hit += r.hit_tokens;
    per_request += s.n_attn_layers * cost.AttentionFlops(r.hit_tokens) +
                   s.n_mlp_layers * cost.MlpFlops(r.hit_tokens);
  }
  return s.n_ssm_layers * cost.SsmFlops(total_hit) + per_request;
}

namespace {

constexpr int32_t kRoot = 0;

class HybridRadixCache final : public HybridPrefixCache {
 public:
  HybridRadixCache(const HybridCacheConfig& config, const CostModel& cost)
      : config_(config), cost_(cost), alpha_(config.alpha) {
    RADIXLM_CHECK(config.policy != HybridPolicy::kVllmPlus);
    nodes_.emplace_back();
    nodes_[kRoot].alive = true;
  }
  HybridRadixCache(const HybridRadixCache&) = default;

  HybridLookup Lookup(std::span<const int32_t> input) override;
  HybridReservation Reserve(std::span<const int32_t> sequence) const override;
  void Admit(std::span<const int32_t> sequence) override { AdmitStates(sequence, {}); }
  HybridAdmitResult AdmitStates(std::span<const int32_t> sequence, const HybridAdmitOptions& options) override;
  int64_t CheckpointAtOrBelow(std::span<const int32_t> tokens, int64_t limit, int32_t* node,
                              int32_t* payload) const override;
  void Lock(const HybridLookup& lookup) override;
  void Unlock(const HybridLookup& lookup) override;
  double TreeBytes() const override { return static_cast<double>(TreeBytesExact()); }
  double alpha() const override { return alpha_; }
  const std::vector<HybridRequestStat>& history() const override { return history_; }
  HybridCacheStats Stats() const override;
  void CheckInvariants() const override;
  int64_t NodeCount() const override { return node_count_; }

 private:
  struct Node {
    int32_t parent = -1;
    std::vector<int32_t> tokens;  // the edge from the parent
    // (first token of the child's edge, child), in insertion order: the reference's dict order,
    // which decides ties among equally scored eviction candidates.
    std::vector<std::pair<int32_t, int32_t>> children;
    int64_t depth = 0;  // tokens from the root to the end of this edge
    int64_t last_access = 0;
    int32_t lock_ref = 0;        // requests using this node's KV (held on the whole path)
    int32_t state_lock_ref = 0;  // requests restoring this node's checkpoint
    bool alive = false;
    bool has_state = true;       // false: a split where no state was taken (tombstone)
    int32_t payload = -1;        // the engine's state-pool slot of the checkpoint
    // Corrected-mode candidate indexes: the keys under which the node is filed, if it is.
    bool indexed = false;
    int64_t indexed_access = 0;
    double efficiency = 0;
  };

  // A walk from the root: nodes whose edges match completely, and where matching stopped.
  struct Walk {
    std::vector<int32_t> full;  // fully matched nodes, root excluded
    int64_t matched = 0;        // raw matched tokens (may end inside an edge)
    int64_t reusable = 0;       // tokens covered by `full`
    std::vector<int32_t> visited;  // every node the walk entered, root first
    int32_t deepest_state = -1;    // deepest fully matched node with a checkpoint
    bool splits_edge = false;      // matching stopped inside an edge (corrected accounting)
    bool Branch(bool reference) const { return reference ? matched > reusable : splits_edge; }
  };

  bool Reference() const { return config_.accounting == Accounting::kReference; }
  bool PathRefresh() const {
    return config_.policy == HybridPolicy::kLru || config_.policy == HybridPolicy::kSglangPlus;
  }
  bool LeafOnlyEviction() const { return PathRefresh(); }
  bool KvOnlyHits() const {
    return config_.policy == HybridPolicy::kLru || cost_.shape().n_ssm_layers == 0;
  }
  int64_t TreeBytesExact() const {
    return node_count_ * cost_.CheckpointBytes() + cost_.KvBytes(kv_tokens_);
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
  void Touch(int32_t node) {
    nodes_[node].last_access = clock_;
    Reindex(node);
  }
  Walk Match(std::span<const int32_t> key) const;
  void RefreshPath(const Walk& walk) {
    for (int32_t n : walk.visited) Touch(n);
  }
  void Tick() { ++clock_; }
  int32_t NewNode();
  int32_t SplitEdge(int32_t child, int64_t at, bool with_state, int32_t payload);
  void InsertSequence(std::span<const int32_t> sequence, const HybridAdmitOptions& options, HybridAdmitResult* result);
  HybridReservation ReserveWith(std::span<const int32_t> sequence, int64_t branch_state_at) const;
  void EvictReference(double bytes_to_remove);
  bool EvictOneCorrected();
  int32_t PickMarconiVictimIndexed(int64_t* scored) const;
  void DeleteLeaf(int32_t node);
  void MergeIntoChild(int32_t node);
  bool IsCandidate(int32_t node) const;
  void Reindex(int32_t node);
  double Efficiency(int32_t node) const {
    const Node& n = nodes_[node];
    const int64_t edge = static_cast<int64_t>(n.tokens.size());
    return ExactRatio(cost_.NodeMarginalFlops(n.depth - edge, edge),
                      cost_.NodeRankingBytes(n.depth - edge, edge));
  }
  void MaybeTune();

  HybridCacheConfig config_;
  CostModel cost_;
  double alpha_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  int64_t node_count_ = 0;  // nodes holding a checkpoint (all non-root nodes but tombstones)
  std::vector<int32_t> freed_;  // payloads evicted since the current admission began
  int64_t kv_tokens_ = 0;
  int64_t clock_ = 0;
  std::vector<HybridRequestStat> history_;
  HybridCacheStats counters_;
  // Corrected-mode candidate indexes.
  std::set<std::pair<int64_t, int32_t>> by_access_;
  std::set<std::pair<double, int32_t>> by_efficiency_;
  // Marconi's bootstrap tuning.
  std::shared_ptr<const HybridRadixCache> snapshot_;
  std::vector<std::pair<std::vector<int32_t>, int64_t>> window_;  // (input + output, input length)
  int64_t bootstrap_window_ = -1;
  bool tuned_ = false;
};

int32_t HybridRadixCache::NewNode() {
  int32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[id] = Node();
  } else {
    id = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[id].alive = true;
  nodes_[id].last_access = clock_;
  ++node_count_;
  return id;
}

HybridRadixCache::Walk HybridRadixCache::Match(std::span<const int32_t> key) const {
  Walk walk;
  int32_t node = kRoot;
  size_t pos = 0;
  walk.visited.push_back(node);
  while (pos < key.size()) {
    const int32_t child = FindChild(node, key[pos]);
    if (child < 0) break;
    const std::vector<int32_t>& edge = nodes_[child].tokens;
    size_t n = 0;
    while (n < edge.size() && pos + n < key.size() && edge[n] == key[pos + n]) ++n;
    walk.matched += static_cast<int64_t>(n);
    pos += n;
    if (n == edge.size()) {
      walk.full.push_back(child);
      if (Reference()) {
        walk.reusable += static_cast<int64_t>(n);  // the reference sums the matched nodes' edges
        walk.deepest_state = child;
      } else if (nodes_[child].has_state) {
        walk.reusable = nodes_[child].depth;
        walk.deepest_state = child;
      }
    } else if (!Reference()) {
      walk.splits_edge = true;
      break;
    }
    // The reference keeps descending below a partially matched edge, from the token where the
    // match stopped (a quirk of its recursion; it can count tokens it never compared).
    node = child;
    walk.visited.push_back(node);
  }
  return walk;
}

HybridReservation HybridRadixCache::Reserve(std::span<const int32_t> sequence) const {
  return ReserveWith(sequence, -1);
}

HybridReservation HybridRadixCache::ReserveWith(std::span<const int32_t> sequence, int64_t branch_state_at) const {
  const Walk walk = Match(sequence);
  HybridReservation r;
  r.new_tokens = static_cast<int64_t>(sequence.size()) - walk.matched;
  const bool branch = walk.Branch(Reference());
  if (Reference()) {
    r.checkpoints = branch ? 2 : 1;
  } else {
    const bool branch_state = branch && (branch_state_at < 0 || branch_state_at == walk.matched);
    r.checkpoints = (r.new_tokens > 0 ? 1 : 0) + (branch_state ? 1 : 0);
  }
  r.bytes_needed = r.checkpoints * cost_.CheckpointBytes() + cost_.KvBytes(r.new_tokens);
  r.bytes_over_capacity =
      std::max(0.0, static_cast<double>(TreeBytesExact() + r.bytes_needed) - config_.capacity_bytes);
  return r;
}

HybridLookup HybridRadixCache::Lookup(std::span<const int32_t> input) {
  Tick();
  if (config_.policy == HybridPolicy::kMarconi && history_.empty() && !tuned_)
    snapshot_ = std::make_shared<HybridRadixCache>(*this);
  Walk walk = Match(input);
  if (PathRefresh()) RefreshPath(walk);
  HybridLookup result;
  result.matched_tokens = walk.matched;
  result.hit_tokens = KvOnlyHits() ? walk.matched : walk.reusable;
  result.branch_checkpoint = !KvOnlyHits() && walk.Branch(Reference());
  result.node = KvOnlyHits() ? (walk.full.empty() ? -1 : walk.full.back()) : walk.deepest_state;
  // Marconi refreshes only the node whose checkpoint serves the hit.
  if (!PathRefresh() && result.node >= 0) Touch(result.node);
  history_.push_back({static_cast<int64_t>(input.size()), result.hit_tokens});
  if (config_.policy == HybridPolicy::kMarconi && !tuned_)
    window_.emplace_back(std::vector<int32_t>(input.begin(), input.end()), input.size());
  return result;
}

void HybridRadixCache::MaybeTune() {
  if (config_.policy != HybridPolicy::kMarconi || tuned_ || bootstrap_window_ < 0 ||
      static_cast<int64_t>(history_.size()) < bootstrap_window_)  // >=: the engine looks up several requests between two finishes
    return;
  // Replay the window on copies of the snapshot for every alpha of the grid.
  constexpr int kGrid = 21;
  std::vector<Flops> saved(kGrid, 0);
  auto replay = [&](int64_t index) {
    HybridRadixCache replica(*snapshot_);
    replica.config_.policy = HybridPolicy::kMarconiStatic;
    replica.config_.tuning_pool = nullptr;
    replica.alpha_ = static_cast<double>(index) / 10.0;
    replica.window_.clear();
    replica.snapshot_.reset();
    for (const auto& [sequence, input_len] : window_) {
      std::span<const int32_t> all(sequence);
      replica.Lookup(all.first(input_len));
      replica.Admit(all);
    }
    const size_t n = replica.history_.size();
    const size_t last_n = std::min<size_t>(n, config_.tuning_last_n);
    saved[index] = HistoryFlopsSaved(
        cost_, std::span<const HybridRequestStat>(replica.history_).subspan(n - last_n));
  };
  if (config_.tuning_pool != nullptr) {
    config_.tuning_pool->ParallelFor(kGrid, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) replay(i);
    });
  } else {
    for (int i = 0; i < kGrid; ++i) replay(i);
  }
  int best = 0;
  for (int i = 1; i < kGrid; ++i)
    if (saved[i] > saved[best]) best = i;  // ties keep the smallest alpha
  alpha_ = static_cast<double>(best) / 10.0;
  tuned_ = true;
  window_.clear();
  window_.shrink_to_fit();
  snapshot_.reset();
}

HybridAdmitResult HybridRadixCache::AdmitStates(std::span<const int32_t> sequence, const HybridAdmitOptions& options) {
  HybridAdmitResult result;
  freed_.clear();
  Tick();
  if (config_.policy == HybridPolicy::kMarconi && !tuned_ && !window_.empty()) {
    // The request's own window entry: the latest unfinished one whose input starts this
    // sequence (with concurrent requests, not necessarily the last looked up).
    for (auto it = window_.rbegin(); it != window_.rend(); ++it) {
      auto& [tokens, input_len] = *it;
      if (static_cast<int64_t>(tokens.size()) == input_len && tokens.size() <= sequence.size() &&
          std::equal(tokens.begin(), tokens.end(), sequence.begin())) {
        tokens.assign(sequence.begin(), sequence.end());
        break;
      }
    }
    MaybeTune();
  }
  if (Reference()) {
    // The reference's insert: a dry-run match (which refreshes recency like a real one), an
    // estimate of the bytes, one eviction call, then the insertion whatever the eviction freed.
    Tick();
    Walk walk = Match(sequence);
    if (PathRefresh()) RefreshPath(walk);
    if (!PathRefresh() && !walk.full.empty()) Touch(walk.full.back());
    const HybridReservation r = Reserve(sequence);
    if (r.bytes_over_capacity > 0) EvictReference(r.bytes_over_capacity);
    InsertSequence(sequence, options, &result);
  } else {
    // Corrected: pin the prefix being extended, evict one victim at a time until the insertion
    // (re-planned after each eviction) fits; admit nothing if it cannot fit.
    for (;;) {
      const HybridReservation r = ReserveWith(sequence, options.branch_state_at);
      if (r.bytes_over_capacity <= 0) {
        InsertSequence(sequence, options, &result);
        break;
      }
      const Walk walk = Match(sequence);
      HybridLookup pin;
      pin.node = walk.full.empty() ? -1 : walk.full.back();
      Lock(pin);
      const bool evicted = EvictOneCorrected();
      Unlock(pin);
      if (!evicted) break;
    }
  }
  result.freed_payloads = std::move(freed_);
  freed_.clear();
  return result;
}

int64_t HybridRadixCache::CheckpointAtOrBelow(std::span<const int32_t> tokens, int64_t limit, int32_t* node,
                                              int32_t* payload) const {
  const Walk walk = Match(tokens.first(std::min<size_t>(tokens.size(), std::max<int64_t>(limit, 0))));
  *node = walk.deepest_state;
  *payload = walk.deepest_state >= 0 ? nodes_[walk.deepest_state].payload : -1;
  return walk.deepest_state >= 0 ? nodes_[walk.deepest_state].depth : 0;
}

int32_t HybridRadixCache::SplitEdge(int32_t child, int64_t at, bool with_state, int32_t payload) {
  const int32_t split = NewNode();
  Node& s = nodes_[split];
  Node& c = nodes_[child];
  s.parent = c.parent;
  s.tokens.assign(c.tokens.begin(), c.tokens.begin() + at);
  s.depth = c.depth - static_cast<int64_t>(c.tokens.size()) + at;
  s.lock_ref = c.lock_ref;  // every path through the child passes through the split node
  s.has_state = with_state;
  s.payload = with_state ? payload : -1;
  if (!with_state) --node_count_;  // a tombstone holds no checkpoint
  c.tokens.erase(c.tokens.begin(), c.tokens.begin() + at);
  s.children.push_back({c.tokens[0], child});
  ReplaceChild(s.parent, child, split);
  c.parent = split;
  if (with_state) {
    ++counters_.branch_checkpoints;
    ++counters_.checkpoints_admitted;
  }
  Reindex(split);
  Reindex(child);
  return split;
}

void HybridRadixCache::InsertSequence(std::span<const int32_t> sequence, const HybridAdmitOptions& options,
                                      HybridAdmitResult* result) {
  int32_t node = kRoot;
  size_t pos = 0;
  bool split_done = false;
  if (PathRefresh()) Touch(node);
  while (pos < sequence.size()) {
    const int32_t child = FindChild(node, sequence[pos]);
    if (child < 0) break;
    const std::vector<int32_t>& edge = nodes_[child].tokens;
    size_t n = 0;
    while (n < edge.size() && pos + n < sequence.size() && edge[n] == sequence[pos + n]) ++n;
    if (n == edge.size()) {
      node = child;
      pos += n;
      // The reference's insert refreshes a fully matched node only if it descends past it.
      if (PathRefresh() && pos < sequence.size()) Touch(node);
      continue;
    }
    // Branch point: one split per insertion; its checkpoint is the state prefill took there.
    RADIXLM_CHECK(!split_done);
    split_done = true;
    const bool with_state = Reference() || options.branch_state_at < 0 ||
                            options.branch_state_at == static_cast<int64_t>(pos + n);
    node = SplitEdge(child, static_cast<int64_t>(n), with_state, options.branch_payload);
    result->branch_used = with_state && options.branch_payload >= 0;
    pos += n;
    if (PathRefresh()) Touch(node);
  }
  if (pos == sequence.size()) return;  // already cached in full
  const int32_t parent = node;
  const int32_t leaf = NewNode();
  Node& l = nodes_[leaf];
  l.parent = parent;
  l.tokens.assign(sequence.begin() + pos, sequence.end());
  l.depth = nodes_[parent].depth + static_cast<int64_t>(l.tokens.size());
  kv_tokens_ += static_cast<int64_t>(l.tokens.size());
  l.payload = options.leaf_payload;
  result->leaf_used = options.leaf_payload >= 0;
  nodes_[parent].children.push_back({l.tokens[0], leaf});
  ++counters_.checkpoints_admitted;
  Reindex(leaf);
  Reindex(parent);
}

void HybridRadixCache::DeleteLeaf(int32_t node) {
  Node& n = nodes_[node];
  RADIXLM_CHECK(n.children.empty() && node != kRoot);
  auto& siblings = nodes_[n.parent].children;
  for (auto it = siblings.begin(); it != siblings.end(); ++it) {
    if (it->second == node) {
      siblings.erase(it);
      break;
    }
  }
  const int32_t parent = n.parent;
  kv_tokens_ -= static_cast<int64_t>(n.tokens.size());
  n.alive = false;
  Reindex(node);
  n.tokens.clear();
  n.tokens.shrink_to_fit();
  if (n.payload >= 0) freed_.push_back(n.payload);
  n.payload = -1;
  free_nodes_.push_back(node);
  --node_count_;
  ++counters_.evictions;
  if (parent == kRoot) return;
  // A tombstone exists only to branch; with one child left it merges away (it frees nothing).
  if (!nodes_[parent].has_state && nodes_[parent].children.size() == 1 && nodes_[parent].lock_ref == 0) {
    MergeIntoChild(parent);
  } else {
    Reindex(parent);
  }
}

void HybridRadixCache::MergeIntoChild(int32_t node) {
  Node& n = nodes_[node];
  RADIXLM_CHECK(n.children.size() == 1 && node != kRoot);
  const int32_t child = n.children[0].second;
  Node& c = nodes_[child];
  c.tokens.insert(c.tokens.begin(), n.tokens.begin(), n.tokens.end());
  c.last_access = std::max(c.last_access, n.last_access);
  c.parent = n.parent;
  ReplaceChild(n.parent, node, child);
  n.alive = false;
  Reindex(node);
  n.tokens.clear();
  n.children.clear();
  free_nodes_.push_back(node);
  if (n.has_state) {
    --node_count_;
    ++counters_.evictions;
    if (n.payload >= 0) freed_.push_back(n.payload);
  }
  n.payload = -1;
  Reindex(child);
}

bool HybridRadixCache::IsCandidate(int32_t node) const {
  const Node& n = nodes_[node];
  if (node == kRoot || !n.alive || !n.has_state || n.lock_ref > 0 || n.state_lock_ref > 0) return false;
  return LeafOnlyEviction() ? n.children.empty() : n.children.size() <= 1;
}

void HybridRadixCache::Reindex(int32_t node) {
  if (Reference()) return;  // the reference rescans; no indexes to keep
  Node& n = nodes_[node];
  if (n.indexed) {
    by_access_.erase({n.indexed_access, node});
    if (!LeafOnlyEviction()) by_efficiency_.erase({n.efficiency, node});
    n.indexed = false;
  }
  if (!IsCandidate(node)) return;
  n.indexed = true;
  n.indexed_access = n.last_access;
  by_access_.insert({n.last_access, node});
  if (!LeafOnlyEviction()) {
    n.efficiency = Efficiency(node);
    by_efficiency_.insert({n.efficiency, node});
  }
}

// Fagin's threshold algorithm over the two indexes: score = alpha * minmax(efficiency) +
// minmax(recency) is monotone in both keys, so once the best score seen is no larger than the
// score of the two current cursors combined, no unseen candidate can beat it.
int32_t HybridRadixCache::PickMarconiVictimIndexed(int64_t* scored) const {
  if (by_access_.empty()) return -1;
  const double now = static_cast<double>(clock_);
  auto recency = [&](int64_t ts) { return 1.0 / std::max(1e-9, now - static_cast<double>(ts)); };
  const double r_min = recency(by_access_.begin()->first);
  const double r_max = recency(by_access_.rbegin()->first);
  const double e_min = by_efficiency_.begin()->first, e_max = by_efficiency_.rbegin()->first;
  auto norm = [](double v, double lo, double hi) { return hi > lo ? (v - lo) / (hi - lo) : 1.0; };
  auto score = [&](int32_t id) {
    const Node& n = nodes_[id];
    return alpha_ * norm(n.efficiency, e_min, e_max) + norm(recency(n.indexed_access), r_min, r_max);
  };
  *scored = 1;
  if (alpha_ == 0) return by_access_.begin()->second;
  *scored = 0;
  double best = std::numeric_limits<double>::infinity();
  int32_t best_id = -1;
  auto a = by_access_.begin();
  auto e = by_efficiency_.begin();
  while (a != by_access_.end() || e != by_efficiency_.end()) {
    double threshold = 0;
    if (a != by_access_.end()) {
      ++*scored;
      const double s = score(a->second);
      if (s < best) best = s, best_id = a->second;
      threshold += norm(recency(a->first), r_min, r_max);
      ++a;
    } else {
      threshold += 1.0;
    }
    if (e != by_efficiency_.end()) {
      ++*scored;
      const double s = score(e->second);
      if (s < best) best = s, best_id = e->second;
      threshold += alpha_ * norm(e->first, e_min, e_max);
      ++e;
    } else {
      threshold += alpha_;
    }
    if (best <= threshold) break;
  }
  if (config_.verify_victims) {  // tests: the early-stopping search must find the true minimum
    double exhaustive = std::numeric_limits<double>::infinity();
    for (const auto& [ts, id] : by_access_) exhaustive = std::min(exhaustive, score(id));
    RADIXLM_CHECK(score(best_id) == exhaustive);
  }
  return best_id;
}

bool HybridRadixCache::EvictOneCorrected() {
  Tick();
  int64_t scored = 1;
  int32_t victim = LeafOnlyEviction() ? (by_access_.empty() ? -1 : by_access_.begin()->second)
                                      : PickMarconiVictimIndexed(&scored);
  if (victim < 0) return false;
  ++counters_.victim_searches;
  counters_.victim_scored += scored;
  counters_.victim_candidates += static_cast<int64_t>(by_access_.size());
  if (bootstrap_window_ < 0) bootstrap_window_ = config_.bootstrap_multiplier * history_.size();
  if (nodes_[victim].children.empty()) {
    DeleteLeaf(victim);
  } else {
    MergeIntoChild(victim);
  }
  return true;
}

void HybridRadixCache::EvictReference(double bytes_to_remove) {
  Tick();
  if (bootstrap_window_ < 0)
    bootstrap_window_ = static_cast<int64_t>(config_.bootstrap_multiplier) * history_.size();
  double bytes_evicted = 0;
  if (LeafOnlyEviction()) {
    // SGLang+: a heap of the current leaves by last access; a parent left childless joins it.
    std::vector<int32_t> leaves;
    std::vector<int32_t> stack = {kRoot};
    while (!stack.empty()) {  // preorder, children in insertion order
      const int32_t id = stack.back();
      stack.pop_back();
      if (nodes_[id].children.empty()) leaves.push_back(id);
      for (auto it = nodes_[id].children.rbegin(); it != nodes_[id].children.rend(); ++it)
        stack.push_back(it->second);
    }
    auto older = [this](int32_t x, int32_t y) { return nodes_[x].last_access < nodes_[y].last_access; };
    PythonHeap<int32_t, decltype(older)> heap(std::move(leaves), older);
    while (bytes_evicted < bytes_to_remove && !heap.empty()) {
      const int32_t x = heap.Pop();
      if (x == kRoot) break;
      bytes_evicted += static_cast<double>(
          cost_.CheckpointBytes() + cost_.KvBytes(static_cast<int64_t>(nodes_[x].tokens.size())));
      const int32_t parent = nodes_[x].parent;
      DeleteLeaf(x);
      if (nodes_[parent].children.empty()) heap.Push(parent);
    }
    return;
  }
  // Marconi (evict_v2): rescan the nodes with <= 1 child for every victim.
  std::vector<int32_t> candidates;
  std::vector<double> efficiency, recency;
  while (bytes_evicted < bytes_to_remove && node_count_ > 0) {
    candidates.clear();
    std::vector<int32_t> stack = {kRoot};
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      if (id != kRoot && nodes_[id].children.size() <= 1) candidates.push_back(id);
      for (auto it = nodes_[id].children.rbegin(); it != nodes_[id].children.rend(); ++it)
        stack.push_back(it->second);
    }
    efficiency.clear();
    recency.clear();
    for (int32_t id : candidates) {
      efficiency.push_back(Efficiency(id));
      recency.push_back(1.0 / static_cast<double>(clock_ - nodes_[id].last_access));
    }
    auto normalize = [](std::vector<double>& v) {  // utils._normalize
      if (v.size() > 1) {
        const double lo = *std::min_element(v.begin(), v.end());
        const double hi = *std::max_element(v.begin(), v.end());
        if (lo != hi) {
          for (double& x : v) x = (x - lo) / (hi - lo);
          return;
        }
      }
      std::fill(v.begin(), v.end(), 1.0);
    };
    normalize(efficiency);
    normalize(recency);
    size_t victim = 0;
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < candidates.size(); ++i) {
      const double utility = alpha_ * efficiency[i] + recency[i];
      if (utility < best) best = utility, victim = i;  // first minimum, as list.index(min(...))
    }
    ++counters_.victim_searches;
    counters_.victim_scored += static_cast<int64_t>(candidates.size());
    counters_.victim_candidates += static_cast<int64_t>(candidates.size());
    const int32_t id = candidates[victim];
    if (nodes_[id].children.empty()) {
      // The reference credits the edge length of the *last candidate scored*, not the victim's.
      const int64_t credited = static_cast<int64_t>(nodes_[candidates.back()].tokens.size());
      bytes_evicted += static_cast<double>(cost_.CheckpointBytes() + cost_.KvBytes(credited));
      DeleteLeaf(id);
    } else {
      bytes_evicted += static_cast<double>(cost_.CheckpointBytes());
      MergeIntoChild(id);
    }
  }
}

void HybridRadixCache::Lock(const HybridLookup& lookup) {
  if (lookup.node < 0) return;
  ++nodes_[lookup.node].state_lock_ref;
  for (int32_t n = lookup.node; n != kRoot; n = nodes_[n].parent) {
    ++nodes_[n].lock_ref;
    Reindex(n);
  }
}

void HybridRadixCache::Unlock(const HybridLookup& lookup) {
  if (lookup.node < 0) return;
  RADIXLM_CHECK(nodes_[lookup.node].state_lock_ref > 0);
  --nodes_[lookup.node].state_lock_ref;
  for (int32_t n = lookup.node; n != kRoot;) {
    RADIXLM_CHECK(nodes_[n].lock_ref > 0);
    --nodes_[n].lock_ref;
    const int32_t parent = nodes_[n].parent;
    if (!nodes_[n].has_state && nodes_[n].children.size() == 1 && nodes_[n].lock_ref == 0) {
      MergeIntoChild(n);  // a tombstone kept only by the lock
    } else {
      Reindex(n);
    }
    n = parent;
  }
}

HybridCacheStats HybridRadixCache::Stats() const {
  HybridCacheStats s = counters_;
  for (const HybridRequestStat& r : history_) {
    ++s.requests;
    s.hit_requests += r.hit_tokens > 0;
    s.input_tokens += r.input_tokens;
    s.hit_tokens += r.hit_tokens;
  }
  s.flops_saved = HistoryFlopsSaved(cost_, history_);
  s.bootstrap_window = bootstrap_window_;
  s.alpha_tuned = tuned_;
  return s;
}

void HybridRadixCache::CheckInvariants() const {
  int64_t count = 0, tokens = 0, indexed = 0;
  std::vector<int32_t> stack = {kRoot};
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    const Node& n = nodes_[id];
    RADIXLM_CHECK(n.alive);
    if (id != kRoot) {
      count += n.has_state;
      RADIXLM_CHECK(n.has_state || n.children.size() >= 2 || n.lock_ref > 0);
      tokens += static_cast<int64_t>(n.tokens.size());
      RADIXLM_CHECK(!n.tokens.empty());
      RADIXLM_CHECK(n.depth == nodes_[n.parent].depth + static_cast<int64_t>(n.tokens.size()));
      RADIXLM_CHECK(n.lock_ref >= n.state_lock_ref && n.state_lock_ref >= 0);
      RADIXLM_CHECK(n.lock_ref <= nodes_[n.parent].lock_ref || n.parent == kRoot);
    }
    if (!Reference()) {
      RADIXLM_CHECK(n.indexed == IsCandidate(id));
      indexed += n.indexed;
    }
    std::set<int32_t> firsts;
    for (const auto& [token, child] : n.children) {
      RADIXLM_CHECK(nodes_[child].parent == id);
      RADIXLM_CHECK(nodes_[child].tokens[0] == token);
      RADIXLM_CHECK(firsts.insert(token).second);
      stack.push_back(child);
    }
  }
  RADIXLM_CHECK(count == node_count_);
  RADIXLM_CHECK(tokens == kv_tokens_);
  if (!Reference()) {
    RADIXLM_CHECK(indexed == static_cast<int64_t>(by_access_.size()));
    if (!LeafOnlyEviction()) RADIXLM_CHECK(indexed == static_cast<int64_t>(by_efficiency_.size()));
    RADIXLM_CHECK(TreeBytes() <= config_.capacity_bytes);
  }
}

}  // namespace

std::unique_ptr<HybridPrefixCache> MakeHybridCache(const HybridCacheConfig& config,
                                                   const CostModel& cost) {
  if (config.policy == HybridPolicy::kVllmPlus) return MakeBlockHybridCache(config, cost);
  return std::make_unique<HybridRadixCache>(config, cost);
}

}  // namespace radixlm::cache
