#include "cache/block_hybrid_cache.h"

#include <algorithm>

#include "cache/python_heap.h"

namespace radixlm::cache {
namespace {

constexpr int32_t kRoot = 0;
using Tokens = std::vector<int32_t>;

class BlockHybridCache final : public HybridPrefixCache {
 public:
  BlockHybridCache(const HybridCacheConfig& config, const CostModel& cost)
      : config_(config), cost_(cost), block_(config.vllm_block_tokens) {
    RADIXLM_CHECK(block_ > 0);
    nodes_.emplace_back();
    nodes_[kRoot].alive = true;
  }

  HybridLookup Lookup(std::span<const int32_t> input) override {
    ++clock_;
    const MatchResult m = Match(input);
    Refresh(m);
    HybridLookup result;
    result.matched_tokens = result.hit_tokens = m.matched;
    result.node = m.nodes.empty() ? -1 : m.nodes.back();
    history_.push_back({static_cast<int64_t>(input.size()), m.matched});
    return result;
  }

  HybridReservation Reserve(std::span<const int32_t> sequence) const override {
    const MatchResult m = Match(sequence);
    HybridReservation r;
    if (config_.accounting == Accounting::kReference) {
      // "Maybe off by one or two token blocks": the root counts as a matched block, and the
      // checkpoints are a fraction (extra / block).
      r.new_tokens =
          static_cast<int64_t>(sequence.size()) - block_ * static_cast<int64_t>(m.nodes.size() + 1);
      const double states = static_cast<double>(r.new_tokens) / block_;
      const double needed = states * cost_.shape().n_ssm_layers * cost_.SsmStateBytesPerLayer() +
                            static_cast<double>(cost_.KvBytes(r.new_tokens));
      r.checkpoints = static_cast<int>(states);
      r.bytes_needed = static_cast<int64_t>(needed);
      const double total = static_cast<double>(TreeBytesExact()) + needed;
      r.bytes_over_capacity = std::max(0.0, total - config_.capacity_bytes);
      return r;
    }
    r.new_tokens = static_cast<int64_t>(sequence.size()) - m.matched;
    if (r.new_tokens > 0 && !m.nodes.empty() && nodes_[m.nodes.back()].lock_ref > 0 &&
        static_cast<int>(nodes_[m.nodes.back()].tokens.size()) < block_)
      r.new_tokens += static_cast<int64_t>(nodes_[m.nodes.back()].tokens.size());  // copied, see Insert
    r.checkpoints = static_cast<int>((r.new_tokens + block_ - 1) / block_);
    r.bytes_needed = r.checkpoints * cost_.CheckpointBytes() + cost_.KvBytes(r.new_tokens);
    r.bytes_over_capacity =
        std::max(0.0, static_cast<double>(TreeBytesExact() + r.bytes_needed) - config_.capacity_bytes);
    return r;
  }

  void Admit(std::span<const int32_t> sequence) override {
    ++clock_;  // the insertion, then its dry-run match: one clock step each, as the reference
    ++clock_;
    Refresh(Match(sequence));
    const HybridReservation r = Reserve(sequence);
    if (r.bytes_over_capacity > 0) Evict(r.bytes_over_capacity);
    if (config_.accounting == Accounting::kReference || Reserve(sequence).bytes_over_capacity <= 0)
      Insert(kRoot, sequence);
  }

  HybridAdmitResult AdmitStates(std::span<const int32_t>, const HybridAdmitOptions&) override {
    RADIXLM_CHECK_MSG(false, "vllm+ keeps a checkpoint per block; the engine does not drive it yet");
    return {};
  }
  int64_t CheckpointAtOrBelow(std::span<const int32_t>, int64_t, int32_t* node, int32_t* payload) const override {
    *node = *payload = -1;
    return 0;
  }

  void Lock(const HybridLookup& lookup) override {
    for (int32_t n = lookup.node; n > kRoot; n = nodes_[n].parent) ++nodes_[n].lock_ref;
  }
  void Unlock(const HybridLookup& lookup) override {
    for (int32_t n = lookup.node; n > kRoot; n = nodes_[n].parent) {
      RADIXLM_CHECK(nodes_[n].lock_ref > 0);
      --nodes_[n].lock_ref;
    }
  }
  double TreeBytes() const override { return static_cast<double>(TreeBytesExact()); }
  const std::vector<HybridRequestStat>& history() const override { return history_; }
  HybridCacheStats Stats() const override {
    HybridCacheStats s = counters_;
    for (const HybridRequestStat& r : history_) {
      ++s.requests;
      s.hit_requests += r.hit_tokens > 0;
      s.input_tokens += r.input_tokens;
      s.hit_tokens += r.hit_tokens;
    }
    s.flops_saved = HistoryFlopsSaved(cost_, history_);
    return s;
  }
  int64_t NodeCount() const override { return node_count_; }

  void CheckInvariants() const override {
    int64_t count = 0, tokens = 0;
    std::vector<int32_t> stack = {kRoot};
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      const Node& n = nodes_[id];
      RADIXLM_CHECK(n.alive);
      if (id != kRoot) {
        ++count;
        tokens += static_cast<int64_t>(n.tokens.size());
        RADIXLM_CHECK(!n.tokens.empty() && static_cast<int>(n.tokens.size()) <= block_);
        // Only a full block may have children; a partial block is a leaf.
        RADIXLM_CHECK(n.children.empty() || static_cast<int>(n.tokens.size()) == block_);
      }
      for (int32_t child : n.children) {
        RADIXLM_CHECK(nodes_[child].parent == id);
        stack.push_back(child);
      }
    }
    RADIXLM_CHECK(count == node_count_ && tokens == kv_tokens_);
    if (config_.accounting == Accounting::kCorrected)
      RADIXLM_CHECK(TreeBytes() <= config_.capacity_bytes);
  }

 private:
  struct Node {
    int32_t parent = -1;
    std::vector<int32_t> tokens;   // at most one block
    std::vector<int32_t> children;  // insertion order (the reference's dict order)
    int64_t last_access = 0;
    int32_t lock_ref = 0;
    bool alive = false;
  };
  struct MatchResult {
    std::vector<int32_t> nodes;  // matched nodes, root excluded
    std::vector<int32_t> visited;  // nodes the walk entered (refreshed by a real match)
    int64_t matched = 0;
  };
  void Refresh(const MatchResult& m) {
    for (int32_t n : m.visited) nodes_[n].last_access = clock_;
  }

  int64_t TreeBytesExact() const {
    return node_count_ * cost_.CheckpointBytes() + cost_.KvBytes(kv_tokens_);
  }
  static int64_t KeyMatch(const std::vector<int32_t>& edge, std::span<const int32_t> key) {
    size_t n = 0;
    while (n < edge.size() && n < key.size() && edge[n] == key[n]) ++n;
    return static_cast<int64_t>(n);
  }

  MatchResult Match(std::span<const int32_t> key) const {
    MatchResult r;
    int32_t node = kRoot;
    for (;;) {
      r.visited.push_back(node);
      if (nodes_[node].children.empty()) return r;
      int64_t best = 0;
      for (int32_t c : nodes_[node].children) best = std::max(best, KeyMatch(nodes_[c].tokens, key));
      if (best == block_) {  // a full block matches: descend
        for (int32_t c : nodes_[node].children) {
          if (KeyMatch(nodes_[c].tokens, key) == block_) {
            r.nodes.push_back(c);
            r.matched += block_;
            key = key.subspan(block_);
            node = c;
            break;
          }
        }
        continue;
      }
      if (best != 0) {  // a trailing partial block counts only if it matches completely
        for (int32_t c : nodes_[node].children) {
          const int64_t len = static_cast<int64_t>(nodes_[c].tokens.size());
          if (KeyMatch(nodes_[c].tokens, key) == len) {
            r.nodes.push_back(c);
            r.matched += len;
            return r;
          }
        }
      }
      return r;
    }
  }

  int32_t NewNode(int32_t parent, std::span<const int32_t> tokens) {
    int32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
      nodes_[id] = Node();
    } else {
      id = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& n = nodes_[id];
    n.alive = true;
    n.parent = parent;
    n.tokens.assign(tokens.begin(), tokens.end());
    n.last_access = clock_;
    ++node_count_;
    kv_tokens_ += static_cast<int64_t>(tokens.size());
    ++counters_.checkpoints_admitted;
    nodes_[parent].children.push_back(id);
    return id;
  }

  // radix_cache_vllm._insert_helper, iteratively.
  void Insert(int32_t node, std::span<const int32_t> key) {
    for (;;) {
      nodes_[node].last_access = clock_;
      int64_t best = 0;
      for (int32_t c : nodes_[node].children) best = std::max(best, KeyMatch(nodes_[c].tokens, key));
      int32_t next = -1;
      for (int32_t c : nodes_[node].children) {
        const int64_t pl = KeyMatch(nodes_[c].tokens, key);
        if (pl == static_cast<int64_t>(nodes_[c].tokens.size()) && pl == best) {
          next = c;
          break;
        }
      }
      if (next >= 0) {
        key = key.subspan(nodes_[next].tokens.size());
        node = next;
        continue;
      }
      if (key.empty()) return;
      if (node == kRoot || static_cast<int>(nodes_[node].tokens.size()) == block_) {
        const size_t take = std::min<size_t>(block_, key.size());
        node = NewNode(node, key.first(take));
        key = key.subspan(take);
        continue;
      }
      if (config_.accounting == Accounting::kCorrected && nodes_[node].lock_ref > 0) {
        // A request is restoring this partial block's checkpoint: extending it in place would
        // replace that state. Start a sibling block holding the same tokens plus the new ones.
        Tokens full = nodes_[node].tokens;
        const size_t take = std::min<size_t>(block_ - full.size(), key.size());
        full.insert(full.end(), key.begin(), key.begin() + take);
        node = NewNode(nodes_[node].parent, full);
        key = key.subspan(take);
        continue;
      }
      // Fill the partial block in place; the reference re-keys it, moving it to the end of its
      // parent's children.
      Node& n = nodes_[node];
      RADIXLM_CHECK(n.children.empty());
      const size_t take = std::min<size_t>(block_ - n.tokens.size(), key.size());
      n.tokens.insert(n.tokens.end(), key.begin(), key.begin() + take);
      kv_tokens_ += static_cast<int64_t>(take);
      auto& siblings = nodes_[n.parent].children;
      siblings.erase(std::find(siblings.begin(), siblings.end(), node));
      siblings.push_back(node);
      key = key.subspan(take);
    }
  }

  void Evict(double bytes_to_remove) {
    ++clock_;
    std::vector<int32_t> leaves, stack = {kRoot};
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      if (nodes_[id].children.empty() && nodes_[id].lock_ref == 0) leaves.push_back(id);
      for (auto it = nodes_[id].children.rbegin(); it != nodes_[id].children.rend(); ++it)
        stack.push_back(*it);
    }
    auto older = [this](int32_t x, int32_t y) { return nodes_[x].last_access < nodes_[y].last_access; };
    PythonHeap<int32_t, decltype(older)> heap(std::move(leaves), older);
    double evicted = 0;
    while (evicted < bytes_to_remove && !heap.empty()) {
      const int32_t x = heap.Pop();
      if (x == kRoot) break;
      Node& n = nodes_[x];
      evicted += static_cast<double>(cost_.CheckpointBytes() +
                                     cost_.KvBytes(static_cast<int64_t>(n.tokens.size())));
      auto& siblings = nodes_[n.parent].children;
      siblings.erase(std::find(siblings.begin(), siblings.end(), x));
      kv_tokens_ -= static_cast<int64_t>(n.tokens.size());
      --node_count_;
      ++counters_.evictions;
      n.alive = false;
      n.tokens.clear();
      free_.push_back(x);
      const int32_t parent = n.parent;
      if (nodes_[parent].children.empty() && nodes_[parent].lock_ref == 0) heap.Push(parent);
    }
  }

  HybridCacheConfig config_;
  CostModel cost_;
  int block_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
  int64_t node_count_ = 0, kv_tokens_ = 0, clock_ = 0;
  std::vector<HybridRequestStat> history_;
  HybridCacheStats counters_;
};

}  // namespace

std::unique_ptr<HybridPrefixCache> MakeBlockHybridCache(const HybridCacheConfig& config,
                                                        const CostModel& cost) {
  return std::make_unique<BlockHybridCache>(config, cost);
}

}  // namespace radixlm::cache
