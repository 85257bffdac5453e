// What the radix hybrid cache's policies decide, as small objects behind one seam: where a hit
// may end, which nodes a hit refreshes, which nodes may be evicted, and which one goes next.
// The tree mechanics (matching, splitting, accounting, locks) are the cache's
// (hybrid_radix_cache.cc); a policy sees only the candidate index the cache keeps for it.
//
//   lru             attention-only models: a hit ends at any token; every matched node is
//                   refreshed; LRU over leaves
//   sglang+         Marconi's admission + LRU over leaves, whole matched path refreshed
//   marconi         Marconi's admission + FLOP-aware eviction over nodes with <= 1 child:
//                   score = minmax(recency) + alpha * minmax(FLOPs saved per byte); a hit
//                   refreshes only its deepest node; alpha tuned by AlphaTuner
//   marconi-static  the same with a fixed alpha
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "cache/hybrid_cache.h"

namespace radixlm::cache {

// The eviction candidates, ordered by last access and by FLOP efficiency (the second only for
// policies that rank by it). O(log n) per change.
class CandidateIndex {
 public:
  explicit CandidateIndex(bool rank_efficiency) : rank_efficiency_(rank_efficiency) {}
  void Put(int32_t node, int64_t last_access, double efficiency);
  void Remove(int32_t node);
  bool contains(int32_t node) const { return node < static_cast<int32_t>(entries_.size()) && entries_[node].in; }
  size_t size() const { return by_access_.size(); }
  bool empty() const { return by_access_.empty(); }
  const std::set<std::pair<int64_t, int32_t>>& by_access() const { return by_access_; }
  const std::set<std::pair<double, int32_t>>& by_efficiency() const { return by_efficiency_; }
  int64_t access(int32_t node) const { return entries_[node].access; }
  double efficiency(int32_t node) const { return entries_[node].efficiency; }
  bool ranks_efficiency() const { return rank_efficiency_; }

 private:
  struct Entry {
    bool in = false;
    int64_t access = 0;
    double efficiency = 0;
  };
  bool rank_efficiency_;
  std::vector<Entry> entries_;  // by node id
  std::set<std::pair<int64_t, int32_t>> by_access_;
  std::set<std::pair<double, int32_t>> by_efficiency_;
};

class RadixPolicy {
 public:
  // REQUIRES: a radix policy (not vllm+). model_has_ssm: hits must end at a checkpoint.
  static std::shared_ptr<const RadixPolicy> Make(HybridPolicy policy, bool model_has_ssm);  // its row's
  // The policies' factories (hybrid_cache.cc's rows name them).
  static std::shared_ptr<const RadixPolicy> Lru(bool model_has_ssm);
  static std::shared_ptr<const RadixPolicy> SglangPlus(bool model_has_ssm);
  static std::shared_ptr<const RadixPolicy> Marconi(bool model_has_ssm);
  static std::shared_ptr<const RadixPolicy> MarconiStatic(bool model_has_ssm);
  virtual ~RadixPolicy() = default;
  virtual HybridPolicy kind() const = 0;
  // A hit may end at any matched token (KV alone serves it): attention-only models.
  virtual bool hit_ends_anywhere() const = 0;
  // A hit refreshes every node on the matched path (else only the node serving the hit).
  virtual bool refreshes_path() const = 0;
  // Nodes with one child may be evicted (their checkpoint dropped, merged into the child).
  virtual bool evicts_inner_nodes() const = 0;
  virtual bool ranks_efficiency() const { return false; }
  virtual bool tunes_alpha() const { return false; }
  // The next victim among the candidates (-1: none). *scored: candidates looked at.
  virtual int32_t PickVictim(const CandidateIndex& candidates, int64_t clock, double alpha, int64_t* scored) const = 0;
};

// Marconi's score over the candidates, minimised exactly by Fagin's threshold algorithm (for
// tests: also by an exhaustive scan). *best_score: the victim's score.
int32_t PickFlopAwareVictim(const CandidateIndex& candidates, int64_t clock, double alpha, int64_t* scored,
                            double* best_score = nullptr, bool exhaustive = false);

}  // namespace radixlm::cache
