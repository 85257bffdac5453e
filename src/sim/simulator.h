// Trace-driven simulation of a hybrid prefix cache: the production cache and policy code
// (cache/hybrid_radix_cache.h) fed by a trace, with no model. Each request is one Lookup(input)
// at arrival and one Admit(input + output) at completion, in trace order; like Marconi's
// simulator it does not model concurrency or queueing.
//
// Metrics (docs/hybrid-cache.md gives the formulas):
//   token hit rate   = sum(hit tokens) / sum(input tokens)
//   request hit rate = requests with >= 1 hit token / requests
//   FLOPs saved      = sum over requests of the FLOPs of their hit prefix (cache::CostModel)
//   hit rate by input length bin, and TTFT percentiles (P5/P50/P95) from a latency model
//   TTFT(tokens computed), for the cache and for no cache ("vanilla").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/hybrid_cache.h"
#include "core/status.h"
#include "sim/trace.h"

namespace radixlm::sim {

// Prefill latency as a line fitted to a profiled table (Marconi fits Jamba-1.5-Mini's:
// ~17.81 ms + 0.05296 ms/token).
class TtftModel {
 public:
  TtftModel(double intercept_ms, double ms_per_token) : a_(intercept_ms), b_(ms_per_token) {}
  // CSV "seqlen,value" with values in units of 10 ms (Marconi's table); least-squares line,
  // shifted up if it would go negative.
  static core::StatusOr<TtftModel> FitCsv(const std::string& path);
  static TtftModel Default() { return {17.81, 0.05296}; }
  double Ms(int64_t computed_tokens) const { return a_ + b_ * static_cast<double>(computed_tokens); }
  double intercept_ms() const { return a_; }
  double ms_per_token() const { return b_; }

 private:
  double a_, b_;
};

struct LengthBin {
  int64_t lo = 0, hi = 0;  // [lo, hi) input tokens
  int64_t requests = 0, input_tokens = 0, hit_tokens = 0;
};

struct RequestRecord {
  int64_t session_id, turn_id, input_tokens, hit_tokens;
  double ttft_ms, vanilla_ttft_ms;
};

struct SimResult {
  std::string policy;
  double capacity_bytes = 0;
  cache::HybridCacheStats stats;
  double alpha = 0;
  double seconds = 0;  // wall time of the simulation proper
  std::vector<LengthBin> bins;
  std::vector<RequestRecord> requests;
  double ttft_p5 = 0, ttft_p50 = 0, ttft_p95 = 0;
  double vanilla_p5 = 0, vanilla_p50 = 0, vanilla_p95 = 0;
};

class Simulator {
 public:
  Simulator(const cache::HybridCacheConfig& config, const cache::CostModel& cost, TtftModel ttft);
  void Feed(const TraceRequest& request);
  SimResult Finish();
  cache::HybridPrefixCache& cache() { return *cache_; }

 private:
  cache::HybridCacheConfig config_;
  cache::CostModel cost_;
  TtftModel ttft_;
  std::unique_ptr<cache::HybridPrefixCache> cache_;
  SimResult result_;
  std::vector<int32_t> sequence_;
  double busy_seconds_ = 0;
};

// Percentile by linear interpolation between closest ranks (numpy's default).
double Percentile(std::vector<double> values, double q);

}  // namespace radixlm::sim
