#include "cache/hybrid_radix_cache.h"

#include <algorithm>
#include <limits>

#include "cache/alpha_tuner.h"
#include "cache/flat_map_internal.h"
#include "cache/hybrid_internal.h"
#include "cache/radix_policy.h"

namespace radixlm::cache {
namespace {

constexpr int32_t kRoot = 0;

class HybridRadixCache final : public CheckpointCache {
 public:
  HybridRadixCache(const HybridCacheConfig& config, const CostModel& cost)
      : config_(config),
        cost_(cost),
        policy_(RadixPolicy::Make(config.policy, cost.shape().HasStates())),
        alpha_(config.alpha),
        candidates_(policy_->ranks_efficiency()) {
    RADIXLM_CHECK(cost.accounting() == Accounting::kCorrected);
    nodes_.emplace_back();
    nodes_[kRoot].alive = true;
    if (policy_->tunes_alpha()) tuner_ = std::make_shared<AlphaTuner>(config_);
  }
  // A replica for a tuning replay: the tree copied, the policy made static at `alpha`.
  HybridRadixCache(const HybridRadixCache& from, double alpha)
      : config_(from.config_), cost_(from.cost_), policy_(RadixPolicy::Make(HybridPolicy::kMarconiStatic, from.cost_.shape().HasStates())),
        alpha_(alpha), nodes_(from.nodes_), free_nodes_(from.free_nodes_), child_of_(from.child_of_),
        node_count_(from.node_count_), kv_tokens_(from.kv_tokens_), clock_(from.clock_),
        candidates_(from.candidates_) {
    config_.policy = HybridPolicy::kMarconiStatic;
    config_.tuning_pool = nullptr;
  }

  HybridLookup Lookup(std::span<const int32_t> input) override;
  HybridLookup Peek(std::span<const int32_t> input) const override { return LookupOf(Match(input)); }
  HybridReservation Reserve(std::span<const int32_t> sequence) const override { return ReserveWith(sequence, -1); }
  void Admit(std::span<const int32_t> sequence) override { AdmitStates(sequence, {}); }
  void Admit(std::span<const int32_t> sequence, int64_t prompt_end) override {
    AdmitStates(sequence, {.prompt_end_at = prompt_end});
  }
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
  void set_state_observer(StateObserver* observer) override { observer_ = observer; }
  void VisitCheckpoints(const std::function<void(std::span<const int32_t>)>& fn) const override {
    for (size_t i = 1; i < nodes_.size(); ++i)
      if (nodes_[i].alive && nodes_[i].has_state) fn(PathOf(static_cast<int32_t>(i)));
  }

 private:
  // Tokens from the root to the end of `node`'s edge.
  std::vector<int32_t> PathOf(int32_t node) const {
    std::vector<int32_t> path(nodes_[node].depth);
    for (int32_t x = node; x != kRoot; x = nodes_[x].parent)
      std::copy(nodes_[x].tokens.begin(), nodes_[x].tokens.end(), path.begin() + (nodes_[x].depth - nodes_[x].tokens.size()));
    return path;
  }
  // Tells the observer that `node` (alive, its edge in place) took or drops its checkpoint.
  void Announce(int32_t node, bool stored) {
    if (!observer_) return;
    const std::vector<int32_t> path = PathOf(node);
    if (stored) observer_->StateStored(path);
    else observer_->StateRemoved(path);
  }
  StateObserver* observer_ = nullptr;
  struct Node {
    int32_t parent = -1;
    std::vector<int32_t> tokens;    // the edge from the parent
    std::vector<int32_t> children;  // any order; child_of_ finds one by first token
    int32_t slot_in_parent = -1;    // index in the parent's children
    int64_t depth = 0;              // tokens from the root to the end of this edge
    int64_t last_access = 0;
    int32_t lock_ref = 0;        // requests using this node's KV (held on the whole path)
    int32_t state_lock_ref = 0;  // requests restoring this node's checkpoint
    bool alive = false;
    bool has_state = true;       // false: a split where no state was taken (tombstone)
    int32_t payload = -1;        // the engine's state-pool slot of the checkpoint
  };

  // A walk from the root: nodes whose edges match completely, and where matching stopped.
  struct Walk {
    std::vector<int32_t> full;     // fully matched nodes, root excluded
    int64_t matched = 0;           // raw matched tokens (may end inside an edge)
    int64_t reusable = 0;          // depth of the deepest fully matched node with a checkpoint
    std::vector<int32_t> visited;  // every node the walk entered, root first
    int32_t deepest_state = -1;
    bool splits_edge = false;      // matching stopped inside an edge
    // Matching stopped at the end of a tombstone (a split no state was taken at): a branch
    // point whose state prefill should capture, as for a split.
    bool ends_at_tombstone = false;
    bool Branch() const { return splits_edge || ends_at_tombstone; }
  };

  static uint64_t ChildKey(int32_t parent, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(token);
  }
  int32_t FindChild(int32_t node, int32_t first_token) const {
    return child_of_.Find(ChildKey(node, first_token));
  }
  void AttachChild(int32_t parent, int32_t child) {
    Node& c = nodes_[child];
    c.parent = parent;
    c.slot_in_parent = static_cast<int32_t>(nodes_[parent].children.size());
    nodes_[parent].children.push_back(child);
    auto [slot, fresh] = child_of_.TryEmplace(ChildKey(parent, c.tokens[0]), child);
    RADIXLM_CHECK(fresh);  // one child per first token
  }
  void DetachChild(int32_t child) {
    Node& c = nodes_[child];
    auto& siblings = nodes_[c.parent].children;
    const int32_t last = siblings.back();
    siblings[c.slot_in_parent] = last;
    nodes_[last].slot_in_parent = c.slot_in_parent;
    siblings.pop_back();
    child_of_.Erase(ChildKey(c.parent, c.tokens[0]));
    c.slot_in_parent = -1;
  }
  int64_t TreeBytesExact() const { return internal::HybridTreeBytes(cost_, node_count_, kv_tokens_); }
  template <typename OnEdge>
  internal::WalkEnd Descend(std::span<const int32_t> key, OnEdge on_edge) const {
    return internal::Descend(nodes_, [this](int32_t n, int32_t token) { return FindChild(n, token); }, key, on_edge);
  }
  void Touch(int32_t node) {
    nodes_[node].last_access = clock_;
    Reindex(node);
  }
  void Tick() { ++clock_; }
  Walk Match(std::span<const int32_t> key) const;
  HybridLookup LookupOf(const Walk& walk) const;
  int32_t NewNode() { return internal::NewRadixNode(nodes_, free_nodes_, clock_, &node_count_); }
  // branch: the state is a branch point's (counted as such); else the leaf's.
  int32_t SplitEdge(int32_t child, int64_t at, bool with_state, int32_t payload, bool branch = true);
  // A checkpoint at `position` on sequence's (inserted) path, evicting to make room; false if
  // it does not fit or one is there already.
  bool PlaceCheckpoint(std::span<const int32_t> sequence, int64_t position, int32_t payload);
  void InsertSequence(std::span<const int32_t> sequence, const HybridAdmitOptions& options, HybridAdmitResult* result);
  // A tombstone takes a state (`payload`): it becomes a checkpoint.
  void FillTombstone(int32_t node, int32_t payload);
  // A new leaf below `parent` with edge `tail` and the final state (`payload`).
  void AddLeaf(int32_t parent, std::span<const int32_t> tail, int32_t payload);
  HybridReservation ReserveWith(std::span<const int32_t> sequence, int64_t branch_state_at) const;
  bool EvictOne();
  void DeleteLeaf(int32_t node);
  void MergeIntoChild(int32_t node);
  bool IsCandidate(int32_t node) const;
  void Reindex(int32_t node);
  double Efficiency(int32_t node) const { return internal::EdgeEfficiency(cost_, nodes_[node]); }
  void PollTuner() {
    internal::PollAlpha(tuner_.get(), snapshot_, cost_, static_cast<int64_t>(history_.size()), &alpha_);
  }

  HybridCacheConfig config_;
  CostModel cost_;
  std::shared_ptr<const RadixPolicy> policy_;
  double alpha_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  internal::FlatMap child_of_;  // (parent, first token) -> child
  int64_t node_count_ = 0;  // nodes holding a checkpoint (all non-root nodes but tombstones)
  int64_t kv_tokens_ = 0;
  int64_t clock_ = 0;
  std::vector<int32_t> freed_;  // payloads evicted since the current admission began
  std::vector<HybridRequestStat> history_;
  HybridCacheStats counters_;
  CandidateIndex candidates_;
  // marconi: the tuner and the tree it replays from (the tree before the first request).
  std::shared_ptr<AlphaTuner> tuner_;
  std::shared_ptr<const HybridRadixCache> snapshot_;
};

HybridRadixCache::Walk HybridRadixCache::Match(std::span<const int32_t> key) const {
  Walk walk;
  walk.visited.push_back(kRoot);
  Descend(key, [&](int32_t child, size_t, size_t n) {
    walk.matched += static_cast<int64_t>(n);
    if (n < nodes_[child].tokens.size()) {
      walk.splits_edge = true;
      return -1;
    }
    walk.full.push_back(child);
    if (nodes_[child].has_state) {
      walk.reusable = nodes_[child].depth;
      walk.deepest_state = child;
    }
    walk.visited.push_back(child);
    return child;
  });
  walk.ends_at_tombstone = !walk.splits_edge && !walk.full.empty() && !nodes_[walk.full.back()].has_state;
  return walk;
}

HybridLookup HybridRadixCache::LookupOf(const Walk& walk) const {
  HybridLookup result;
  const bool anywhere = policy_->hit_ends_anywhere();
  result.matched_tokens = walk.matched;
  result.hit_tokens = anywhere ? walk.matched : walk.reusable;
  result.branch_checkpoint = !anywhere && walk.Branch();
  result.node = anywhere ? (walk.full.empty() ? -1 : walk.full.back()) : walk.deepest_state;
  return result;
}

HybridReservation HybridRadixCache::ReserveWith(std::span<const int32_t> sequence, int64_t branch_state_at) const {
  // Exactly what InsertSequence places (keep the two in step).
  const Walk walk = Match(sequence);
  const int64_t size = static_cast<int64_t>(sequence.size());
  HybridReservation r;
  r.new_tokens = size - walk.matched;
  // The state after the last token: a new leaf, or where the sequence ends inside a cached edge
  // (a split) or on a tombstone (unless the branch state fills that one).
  const bool ends_inside = walk.splits_edge && walk.matched == size;
  const bool ends_on_tombstone = walk.ends_at_tombstone && walk.matched == size && branch_state_at != size;
  const bool leaf = r.new_tokens > 0 || ends_inside || ends_on_tombstone;
  // The branch state: a split the sequence continues past, or a tombstone it passes where it
  // captured the state.
  bool branch = walk.splits_edge && r.new_tokens > 0 && (branch_state_at < 0 || branch_state_at == walk.matched);
  if (!branch && branch_state_at >= 0)
    for (int32_t f : walk.full) branch |= !nodes_[f].has_state && nodes_[f].depth == branch_state_at;
  r.checkpoints = (leaf ? 1 : 0) + (branch ? 1 : 0);
  internal::PriceReservation(cost_, TreeBytesExact(), config_.capacity_bytes, &r);
  return r;
}

HybridLookup HybridRadixCache::Lookup(std::span<const int32_t> input) {
  Tick();
  if (tuner_ && history_.empty() && !tuner_->tuned()) snapshot_ = std::make_shared<HybridRadixCache>(*this, alpha_);
  const Walk walk = Match(input);
  if (policy_->refreshes_path())
    for (int32_t n : walk.visited) Touch(n);
  const HybridLookup result = LookupOf(walk);
  // Marconi refreshes only the node whose checkpoint serves the hit.
  if (!policy_->refreshes_path() && result.node >= 0) Touch(result.node);
  history_.push_back({static_cast<int64_t>(input.size()), result.hit_tokens});
  if (tuner_) tuner_->RecordLookup(input);
  return result;
}

HybridAdmitResult HybridRadixCache::AdmitStates(std::span<const int32_t> sequence, const HybridAdmitOptions& options) {
  HybridAdmitResult result;
  freed_.clear();
  Tick();
  if (tuner_) {
    tuner_->RecordFinish(sequence);
    PollTuner();
  }
  // Pin the prefix being extended, evict one victim at a time until the insertion (re-planned
  // after each eviction) fits; admit nothing if it cannot fit.
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
    const bool evicted = EvictOne();
    Unlock(pin);
    if (!evicted) break;
  }
  if (options.prompt_end_at > 0 && options.prompt_end_at < static_cast<int64_t>(sequence.size()) &&
      Match(sequence).matched == static_cast<int64_t>(sequence.size()))  // the sequence went in
    result.prompt_end_used = PlaceCheckpoint(sequence, options.prompt_end_at, options.prompt_end_payload) &&
                             options.prompt_end_payload >= 0;
  result.freed_payloads = std::move(freed_);
  freed_.clear();
  return result;
}

bool HybridRadixCache::PlaceCheckpoint(std::span<const int32_t> sequence, int64_t position, int32_t payload) {
  // Room for one more checkpoint, the sequence's path pinned.
  const Walk path = Match(sequence);
  HybridLookup pin;
  pin.node = path.full.empty() ? -1 : path.full.back();
  Lock(pin);
  bool room = true;
  while (room && static_cast<double>(TreeBytesExact() + cost_.CheckpointBytes()) > config_.capacity_bytes) room = EvictOne();
  Unlock(pin);
  if (!room) return false;
  // The node whose edge holds `position` (eviction may have merged nodes: walk again).
  int32_t node = kRoot;
  size_t pos = 0;
  while (static_cast<int64_t>(pos) < position) {
    const int32_t child = FindChild(node, sequence[pos]);
    RADIXLM_CHECK(child >= 0);
    const int64_t start = nodes_[child].depth - static_cast<int64_t>(nodes_[child].tokens.size());
    if (nodes_[child].depth > position) {  // inside this edge: split there
      SplitEdge(child, position - start, /*with_state=*/true, payload);
      --counters_.branch_checkpoints;
      ++counters_.prompt_end_checkpoints;
      return true;
    }
    node = child;
    pos = static_cast<size_t>(nodes_[child].depth);
  }
  if (node == kRoot || nodes_[node].has_state) return false;  // a checkpoint is there already
  FillTombstone(node, payload);
  ++counters_.prompt_end_checkpoints;
  return true;
}

int64_t HybridRadixCache::CheckpointAtOrBelow(std::span<const int32_t> tokens, int64_t limit, int32_t* node,
                                              int32_t* payload) const {
  const Walk walk = Match(tokens.first(std::min<size_t>(tokens.size(), std::max<int64_t>(limit, 0))));
  *node = walk.deepest_state;
  *payload = walk.deepest_state >= 0 ? nodes_[walk.deepest_state].payload : -1;
  return walk.deepest_state >= 0 ? nodes_[walk.deepest_state].depth : 0;
}

int32_t HybridRadixCache::SplitEdge(int32_t child, int64_t at, bool with_state, int32_t payload, bool branch) {
  const int32_t split = NewNode();
  const int32_t parent = nodes_[child].parent;
  DetachChild(child);
  Node& s = nodes_[split];
  internal::CutEdge(s, nodes_[child], at);
  s.has_state = with_state;
  s.payload = with_state ? payload : -1;
  if (!with_state) --node_count_;  // a tombstone holds no checkpoint
  AttachChild(parent, split);
  AttachChild(split, child);
  if (with_state) {
    counters_.branch_checkpoints += branch;
    ++counters_.checkpoints_admitted;
  }
  Reindex(split);
  Reindex(child);
  if (with_state) Announce(split, true);
  return split;
}

void HybridRadixCache::InsertSequence(std::span<const int32_t> sequence, const HybridAdmitOptions& options,
                                      HybridAdmitResult* result) {
  bool split_done = false;
  const bool path = policy_->refreshes_path();
  if (path) Touch(kRoot);
  const auto [node, pos] = Descend(sequence, [&](int32_t child, size_t at, size_t n) {
    const size_t end = at + n;
    if (n == nodes_[child].tokens.size()) {
      // A fully matched node is refreshed only if the insertion descends past it.
      if (path && end < sequence.size()) Touch(child);
      if (!nodes_[child].has_state && options.branch_state_at == static_cast<int64_t>(end)) {
        // A tombstone where this request captured the state: it becomes a checkpoint.
        FillTombstone(child, options.branch_payload);
        ++counters_.branch_checkpoints;
        result->branch_used = options.branch_payload >= 0;
      }
      return child;
    }
    // One split per insertion: past it the sequence differs from the edge, so the walk ends.
    RADIXLM_CHECK(!split_done);
    split_done = true;
    int32_t split;
    if (end == sequence.size()) {
      // The sequence ends inside a cached edge: the split holds its final state (the leaf's).
      split = SplitEdge(child, static_cast<int64_t>(n), /*with_state=*/true, options.leaf_payload, /*branch=*/false);
      result->leaf_used = options.leaf_payload >= 0;
    } else {
      // Branch point: its checkpoint is the state prefill took there.
      const bool with_state = options.branch_state_at < 0 || options.branch_state_at == static_cast<int64_t>(end);
      split = SplitEdge(child, static_cast<int64_t>(n), with_state, options.branch_payload);
      result->branch_used |= with_state && options.branch_payload >= 0;
    }
    if (path) Touch(split);
    return split;
  });
  if (pos == sequence.size()) {  // cached in full (a split there holds the final state already)
    if (node != kRoot && !nodes_[node].has_state) {  // ending on a tombstone: it takes the final state
      FillTombstone(node, options.leaf_payload);
      result->leaf_used = options.leaf_payload >= 0;
    }
    return;
  }
  AddLeaf(node, sequence.subspan(pos), options.leaf_payload);
  result->leaf_used = options.leaf_payload >= 0;
}

void HybridRadixCache::FillTombstone(int32_t node, int32_t payload) {
  Node& t = nodes_[node];
  t.has_state = true;
  t.payload = payload;
  ++node_count_;
  ++counters_.checkpoints_admitted;
  Reindex(node);
  Announce(node, true);
}

void HybridRadixCache::AddLeaf(int32_t parent, std::span<const int32_t> tail, int32_t payload) {
  const int32_t leaf = NewNode();
  Node& l = nodes_[leaf];
  kv_tokens_ += internal::SetLeafEdge(l, nodes_[parent], tail);
  l.payload = payload;
  AttachChild(parent, leaf);
  ++counters_.checkpoints_admitted;
  Reindex(leaf);
  Reindex(parent);
  Announce(leaf, true);
}

void HybridRadixCache::DeleteLeaf(int32_t node) {
  RADIXLM_CHECK(nodes_[node].children.empty() && node != kRoot);
  if (nodes_[node].has_state) Announce(node, false);
  Node& n = nodes_[node];
  const int32_t parent = n.parent;
  DetachChild(node);
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
  RADIXLM_CHECK(nodes_[node].children.size() == 1 && node != kRoot);
  if (nodes_[node].has_state) Announce(node, false);
  Node& n = nodes_[node];
  const int32_t child = n.children[0];
  const int32_t parent = n.parent;
  DetachChild(child);
  DetachChild(node);
  internal::PrependEdge(nodes_[child], n);
  AttachChild(parent, child);
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
  return policy_->evicts_inner_nodes() ? n.children.size() <= 1 : n.children.empty();
}

void HybridRadixCache::Reindex(int32_t node) {
  if (!IsCandidate(node)) {
    candidates_.Remove(node);
    return;
  }
  // Recomputed every time: a split or a merge changes the edge, hence the efficiency.
  candidates_.Put(node, nodes_[node].last_access, policy_->ranks_efficiency() ? Efficiency(node) : 0.0);
}

bool HybridRadixCache::EvictOne() {
  Tick();
  int64_t scored = 1;
  const int32_t victim = policy_->PickVictim(candidates_, clock_, alpha_, &scored);
  if (victim < 0) return false;
  if (config_.verify_victims && policy_->ranks_efficiency()) {  // tests: the early stop finds the true minimum
    double fast = 0, exhaustive = 0;
    int64_t ignored = 0;
    PickFlopAwareVictim(candidates_, clock_, alpha_, &ignored, &fast);
    PickFlopAwareVictim(candidates_, clock_, alpha_, &ignored, &exhaustive, /*exhaustive=*/true);
    RADIXLM_CHECK(fast == exhaustive);
  }
  ++counters_.victim_searches;
  counters_.victim_scored += scored;
  counters_.victim_candidates += static_cast<int64_t>(candidates_.size());
  if (tuner_) tuner_->OnEviction(static_cast<int64_t>(history_.size()));
  if (nodes_[victim].children.empty()) {
    DeleteLeaf(victim);
  } else {
    MergeIntoChild(victim);
  }
  return true;
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
  HybridCacheStats s = internal::HistoryStats(counters_, cost_, history_);
  if (tuner_) {
    s.bootstrap_window = tuner_->window();
    s.alpha_tuned = tuner_->tuned();
    s.tuning_window_tokens = tuner_->peak_tokens();
  }
  return s;
}

void HybridRadixCache::CheckInvariants() const {
  int64_t count = 0, tokens = 0, indexed = 0;
  internal::DepthFirst(kRoot, [&](int32_t id, std::vector<int32_t>& stack) {
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
      RADIXLM_CHECK(FindChild(n.parent, n.tokens[0]) == id);
      RADIXLM_CHECK(nodes_[n.parent].children[n.slot_in_parent] == id);
    }
    RADIXLM_CHECK(candidates_.contains(id) == IsCandidate(id));
    if (candidates_.contains(id)) RADIXLM_CHECK(candidates_.access(id) == n.last_access);
    indexed += candidates_.contains(id);
    for (int32_t child : n.children) {
      RADIXLM_CHECK(nodes_[child].parent == id);
      stack.push_back(child);
    }
  });
  RADIXLM_CHECK(count == node_count_);
  RADIXLM_CHECK(tokens == kv_tokens_);
  RADIXLM_CHECK(indexed == static_cast<int64_t>(candidates_.size()));
  RADIXLM_CHECK(child_of_.size() + 1 == static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.alive; })));
  RADIXLM_CHECK(TreeBytes() <= config_.capacity_bytes);
}

}  // namespace

std::unique_ptr<CheckpointCache> MakeRadixHybridCache(const HybridCacheConfig& config, const CostModel& cost) {
  return std::make_unique<HybridRadixCache>(config, cost);
}

}  // namespace radixlm::cache
