// What the hybrid prefix caches share, production (hybrid_radix_cache.cc, block_hybrid_cache.cc)
// and the Marconi reference (marconi_reference.cc) alike: one copy, so the two cannot drift
// apart (the reference is compared bit for bit). Internal to cache/.
//
// The radix helpers take any Node with parent, tokens (its edge), depth (tokens from the root to
// the end of its edge), last_access, lock_ref and alive.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/alpha_tuner.h"
#include "cache/cost_model.h"
#include "cache/flat_map_internal.h"
#include "cache/hybrid_cache.h"

namespace radixlm::cache::internal {

// Bytes a tree holds: a checkpoint per node and the KV of its tokens.
inline int64_t HybridTreeBytes(const CostModel& cost, int64_t nodes, int64_t kv_tokens) {
  return nodes * cost.CheckpointBytes() + cost.KvBytes(kv_tokens);
}

// Prices a reservation whose new_tokens and checkpoints are set: the bytes it needs and what a
// tree holding `tree_bytes` would hold over `capacity` once it took them.
inline void PriceReservation(const CostModel& cost, int64_t tree_bytes, double capacity, HybridReservation* r) {
  r->bytes_needed = r->checkpoints * cost.CheckpointBytes() + cost.KvBytes(r->new_tokens);
  r->bytes_over_capacity = std::max(0.0, static_cast<double>(tree_bytes + r->bytes_needed) - capacity);
}

// A cache's counters with the totals of its request history.
inline HybridCacheStats HistoryStats(HybridCacheStats s, const CostModel& cost,
                                     const std::vector<HybridRequestStat>& history) {
  for (const HybridRequestStat& r : history) {
    ++s.requests;
    s.hit_requests += r.hit_tokens > 0;
    s.input_tokens += r.input_tokens;
    s.hit_tokens += r.hit_tokens;
  }
  s.flops_saved = HistoryFlopsSaved(cost, history);
  return s;
}

// Polls a radix cache C's Marconi tuner (PollTuner) unless there is none, it is tuned or the
// snapshot is gone; a tuned alpha replaces *alpha and drops the snapshot.
template <class C>
void PollAlpha(AlphaTuner* tuner, std::shared_ptr<const C>& snapshot, const CostModel& cost, int64_t requests,
               double* alpha) {
  if (!tuner || tuner->tuned() || !snapshot) return;
  if (const std::optional<double> tuned = PollTuner(*tuner, snapshot, cost, requests)) {
    *alpha = *tuned;
    snapshot.reset();
  }
}

// A fresh radix node from the pool: alive, last accessed at `clock`, counted in *count.
template <typename Node>
int32_t NewRadixNode(std::vector<Node>& nodes, std::vector<int32_t>& free, int64_t clock, int64_t* count) {
  const int32_t id = NewPoolNode(nodes, free);
  nodes[id].alive = true;
  nodes[id].last_access = clock;
  ++*count;
  return id;
}

// One step of a walk down a radix tree: the child whose edge starts with key[pos] (-1: none),
// and how many tokens of its edge match the key from pos on.
struct EdgeStep {
  int32_t child = -1;
  size_t matched = 0;
};
template <typename Node, typename FindChild>
EdgeStep StepDown(const std::vector<Node>& nodes, const FindChild& find_child, int32_t node,
                  std::span<const int32_t> key, size_t pos) {
  const int32_t child = find_child(node, key[pos]);
  if (child < 0) return {};
  return {child, CommonPrefix(nodes[child].tokens, key.subspan(pos))};
}

// Walks `key` down a radix tree from the root (node 0). At each edge entered, on_edge(child, at, n):
// the child whose edge starts with key[at], n of its tokens matching; it returns the node to go
// on from, n tokens further (-1: stop before this edge). Returns where the walk ended.
struct WalkEnd {
  int32_t node = 0;
  size_t pos = 0;
};
template <typename Node, typename FindChild, typename OnEdge>
WalkEnd Descend(const std::vector<Node>& nodes, const FindChild& find_child, std::span<const int32_t> key,
                OnEdge on_edge) {
  WalkEnd end;
  while (end.pos < key.size()) {
    const EdgeStep step = StepDown(nodes, find_child, end.node, key, end.pos);
    if (step.child < 0) break;
    const int32_t next = on_edge(step.child, end.pos, step.matched);
    if (next < 0) break;
    end.node = next;
    end.pos += step.matched;
  }
  return end;
}

// Splits child's edge after `at` tokens: the split (a fresh node) takes the first `at` and the
// child's locks (every path through the child passes through it); the child keeps the rest.
template <typename Node>
void CutEdge(Node& split, Node& child, int64_t at) {
  split.tokens.assign(child.tokens.begin(), child.tokens.begin() + at);
  split.depth = child.depth - static_cast<int64_t>(child.tokens.size()) + at;
  split.lock_ref = child.lock_ref;
  child.tokens.erase(child.tokens.begin(), child.tokens.begin() + at);
}

// A new leaf's edge (`tail`) and depth below `parent`; returns the KV tokens it adds.
template <typename Node>
int64_t SetLeafEdge(Node& leaf, const Node& parent, std::span<const int32_t> tail) {
  leaf.tokens.assign(tail.begin(), tail.end());
  leaf.depth = parent.depth + static_cast<int64_t>(leaf.tokens.size());
  return static_cast<int64_t>(leaf.tokens.size());
}

// Marconi's efficiency of a node: the FLOPs its edge saves per byte it ranks at.
template <typename Node>
double EdgeEfficiency(const CostModel& cost, const Node& n) {
  const int64_t edge = static_cast<int64_t>(n.tokens.size());
  return ExactRatio(cost.NodeMarginalFlops(n.depth - edge, edge), cost.NodeRankingBytes(n.depth - edge, edge));
}

// Merges `node`'s edge into its only child's front; the child keeps the later access.
template <typename Node>
void PrependEdge(Node& child, const Node& node) {
  child.tokens.insert(child.tokens.begin(), node.tokens.begin(), node.tokens.end());
  child.last_access = std::max(child.last_access, node.last_access);
}

}  // namespace radixlm::cache::internal
