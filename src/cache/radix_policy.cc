#include "cache/radix_policy.h"

#include <algorithm>
#include <limits>

#include "core/status.h"

namespace radixlm::cache {

void CandidateIndex::Put(int32_t node, int64_t last_access, double efficiency) {
  Remove(node);
  if (node >= static_cast<int32_t>(entries_.size())) entries_.resize(node + 1);
  entries_[node] = {true, last_access, efficiency};
  by_access_.insert({last_access, node});
  if (rank_efficiency_) by_efficiency_.insert({efficiency, node});
}

void CandidateIndex::Remove(int32_t node) {
  if (!contains(node)) return;
  Entry& e = entries_[node];
  by_access_.erase({e.access, node});
  if (rank_efficiency_) by_efficiency_.erase({e.efficiency, node});
  e.in = false;
}

namespace {

int32_t Oldest(const CandidateIndex& c, int64_t* scored) {
  *scored = 1;
  return c.empty() ? -1 : c.by_access().begin()->second;
}

class LruPolicy final : public RadixPolicy {
 public:
  HybridPolicy kind() const override { return HybridPolicy::kLru; }
  bool hit_ends_anywhere() const override { return true; }
  bool refreshes_path() const override { return true; }
  bool evicts_inner_nodes() const override { return false; }
  int32_t PickVictim(const CandidateIndex& c, int64_t, double, int64_t* scored) const override { return Oldest(c, scored); }
};

class SglangPlusPolicy final : public RadixPolicy {
 public:
  explicit SglangPlusPolicy(bool ssm) : ssm_(ssm) {}
  HybridPolicy kind() const override { return HybridPolicy::kSglangPlus; }
  bool hit_ends_anywhere() const override { return !ssm_; }
  bool refreshes_path() const override { return true; }
  bool evicts_inner_nodes() const override { return false; }
  int32_t PickVictim(const CandidateIndex& c, int64_t, double, int64_t* scored) const override { return Oldest(c, scored); }

 private:
  bool ssm_;
};

class MarconiPolicy final : public RadixPolicy {
 public:
  MarconiPolicy(bool tuned, bool ssm) : tuned_(tuned), ssm_(ssm) {}
  HybridPolicy kind() const override { return tuned_ ? HybridPolicy::kMarconi : HybridPolicy::kMarconiStatic; }
  bool hit_ends_anywhere() const override { return !ssm_; }
  bool refreshes_path() const override { return false; }
  bool evicts_inner_nodes() const override { return true; }
  bool ranks_efficiency() const override { return true; }
  bool tunes_alpha() const override { return tuned_; }
  int32_t PickVictim(const CandidateIndex& c, int64_t clock, double alpha, int64_t* scored) const override {
    return PickFlopAwareVictim(c, clock, alpha, scored);
  }

 private:
  bool tuned_, ssm_;
};

}  // namespace

std::shared_ptr<const RadixPolicy> RadixPolicy::Lru(bool) { return std::make_shared<LruPolicy>(); }
std::shared_ptr<const RadixPolicy> RadixPolicy::SglangPlus(bool ssm) { return std::make_shared<SglangPlusPolicy>(ssm); }
std::shared_ptr<const RadixPolicy> RadixPolicy::Marconi(bool ssm) { return std::make_shared<MarconiPolicy>(true, ssm); }
std::shared_ptr<const RadixPolicy> RadixPolicy::MarconiStatic(bool ssm) { return std::make_shared<MarconiPolicy>(false, ssm); }

std::shared_ptr<const RadixPolicy> RadixPolicy::Make(HybridPolicy policy, bool model_has_ssm) {
  const HybridPolicyRow& row = HybridPolicyRowOf(policy);
  RADIXLM_CHECK_MSG(row.radix != nullptr, std::string(row.name) + " is a block tree, not a radix policy");
  return row.radix(model_has_ssm);
}

// Fagin's threshold algorithm over the two indexes: score = alpha * minmax(efficiency) +
// minmax(recency) is monotone in both keys, so once the best score seen is no larger than the
// score of the two current cursors combined, no unseen candidate can beat it.
int32_t PickFlopAwareVictim(const CandidateIndex& c, int64_t clock, double alpha, int64_t* scored, double* best_score,
                            bool exhaustive) {
  if (c.empty()) return -1;
  const auto& by_access = c.by_access();
  const auto& by_efficiency = c.by_efficiency();
  const double now = static_cast<double>(clock);
  auto recency = [&](int64_t ts) { return 1.0 / std::max(1e-9, now - static_cast<double>(ts)); };
  const double r_min = recency(by_access.begin()->first);
  const double r_max = recency(by_access.rbegin()->first);
  const double e_min = by_efficiency.begin()->first, e_max = by_efficiency.rbegin()->first;
  auto norm = [](double v, double lo, double hi) { return hi > lo ? (v - lo) / (hi - lo) : 1.0; };
  auto score = [&](int32_t id) {
    return alpha * norm(c.efficiency(id), e_min, e_max) + norm(recency(c.access(id)), r_min, r_max);
  };
  if (exhaustive) {
    *scored = static_cast<int64_t>(c.size());
    double best = std::numeric_limits<double>::infinity();
    int32_t best_id = -1;
    for (const auto& [ts, id] : by_access) {
      const double s = score(id);
      if (s < best) best = s, best_id = id;
    }
    if (best_score) *best_score = best;
    return best_id;
  }
  *scored = 1;
  if (alpha == 0) {
    if (best_score) *best_score = score(by_access.begin()->second);
    return by_access.begin()->second;
  }
  *scored = 0;
  double best = std::numeric_limits<double>::infinity();
  int32_t best_id = -1;
  auto a = by_access.begin();
  auto e = by_efficiency.begin();
  while (a != by_access.end() || e != by_efficiency.end()) {
    double threshold = 0;
    if (a != by_access.end()) {
      ++*scored;
      const double s = score(a->second);
      if (s < best) best = s, best_id = a->second;
      threshold += norm(recency(a->first), r_min, r_max);
      ++a;
    } else {
      threshold += 1.0;
    }
    if (e != by_efficiency.end()) {
      ++*scored;
      const double s = score(e->second);
      if (s < best) best = s, best_id = e->second;
      threshold += alpha * norm(e->first, e_min, e_max);
      ++e;
    } else {
      threshold += alpha;
    }
    if (best <= threshold) break;
  }
  if (best_score) *best_score = best;
  return best_id;
}

}  // namespace radixlm::cache
