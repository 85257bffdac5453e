// Trace-driven simulation of the serving engine: the real engine::Engine (its scheduler and its
// cache::Memory with the real cache policies) driven by a trace, with a cost-model executor in
// place of the model (sim/cost_executor.h). Each trace request is submitted with its recorded
// output as the continuation, so the engine computes and caches exactly what serving it would.
//
// Memory (engine::EngineConfig::memory_mode):
//  - kByteBudget: Marconi's model. The hybrid cache policy decides every hit, counting KV and
//    checkpoints against one byte budget; a request is looked up at its first admission and
//    admitted whole (input + output) when it finishes.
//  - kBlockPool: the engine's serving memory as configured (a KV pool of blocks and the radix
//    tree's LRU; for a hybrid, the checkpoint slots and their policy). A trace recorded from a
//    served run and simulated with the same configuration gets the same hits.
// Arrivals: kSequential submits each request when the previous one has finished (Marconi's
// simulator: no concurrency or queueing); kTrace at its timestamp on the simulated clock, with
// the engine's concurrency and queueing.
//
// Reports (SimResult): the engine's metrics (the one stats struct served and simulated runs
// share: token hit rate = cached prompt tokens / prompt tokens, request hit rate), the policy's
// own counters, FLOPs saved = sum over requests of the FLOPs of their hit (cache::CostModel),
// hit rate by input-length bin, and TTFT percentiles (arrival to first token on the simulated
// clock) next to the no-cache line TTFT(input tokens).
//
// Disk tier (SimulatorConfig::disk_bytes > 0, kBlockPool, attention-only models): a modelled disk
// under the KV pool (sim/disk_model.h), of disk_bytes / (KV bytes of one block, cache::CostModel)
// blocks, given to the engine's memory as its tier (cache::PrefixCaches::tier) and to the cost
// executor, which charges its reads to the clock (sim/cost_executor.h). The engine's metrics
// then count the hits it served (tier_hit_tokens, part of the cached prompt tokens). A remote
// store (SimulatorConfig::remote, a fleet's, shared by its replicas) stacks under the disk, or
// under the pool alone (sim/disk_model.h ModelledStack).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/hybrid_cache.h"
#include "core/status.h"
#include "engine/engine.h"
#include "sim/cost_executor.h"
#include "sim/disk_model.h"
#include "sim/trace.h"

namespace radixlm::sim {

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
  engine::EngineMetrics metrics;   // hits, tokens computed, preemptions: as served
  cache::HybridCacheStats cache;   // the policy's own counters (empty for the block tree's LRU)
  int64_t cache_nodes = 0;         // checkpoints the policy holds at the end
  double cache_bytes = 0;          // bytes it holds at the end (its accounting)
  cache::Flops flops_saved = 0;
  double alpha = 0;
  double seconds = 0;              // wall time of the simulation proper (engine steps)
  double simulated_seconds = 0;    // the simulated clock at the end
  int64_t steps = 0;
  std::vector<LengthBin> bins;
  std::vector<RequestRecord> requests;
  double ttft_p5 = 0, ttft_p50 = 0, ttft_p90 = 0, ttft_p95 = 0;
  // The modelled disk tier (disk_bytes == 0: none) and what it held and moved.
  double disk_bytes = 0, disk_gbps = 0;
  DiskModelStats disk;
  double tier_read_seconds = 0;    // simulated seconds charged for reads from the tiers (disk and remote)
  double vanilla_p5 = 0, vanilla_p50 = 0, vanilla_p95 = 0;
};

enum class Arrivals { kSequential, kTrace };

struct SimulatorConfig {
  std::string name;             // the policy's name, for reports
  double capacity_bytes = 0;    // for reports
  engine::EngineConfig engine;  // memory mode and layout, scheduler
  CostExecutorConfig executor;  // step cost, and what the served executor would report
  Arrivals arrivals = Arrivals::kSequential;
  // A modelled disk tier of this many bytes under the KV pool (0: none), read at disk_gbps GB/s.
  // REQUIRES: > 0 only with kBlockPool and a model with KV (KvBytes > 0).
  double disk_bytes = 0, disk_gbps = 2;
  // A remote store under the disk (borrowed: a fleet's, shared by its replicas; null: none).
  ModelledTier* remote = nullptr;
};

// The policy objects a simulation owns (see cache::PrefixCaches): kByteBudget uses `budget`;
// kBlockPool uses `checkpoints` for a hybrid model (null: the block tree alone).
struct SimPolicy {
  std::unique_ptr<cache::HybridPrefixCache> budget;
  std::unique_ptr<cache::CheckpointCache> checkpoints;
};

class Simulator {
 public:
  // cost: the FLOP model of the simulated model (FLOPs saved).
  Simulator(SimulatorConfig config, SimPolicy policy, const cache::CostModel& cost);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Submits one request (arrivals in trace order); a request the engine refuses (longer than
  // its memory) is counted in metrics.requests_rejected and skipped.
  core::Status Feed(const TraceRequest& request);
  // Runs what is left and reports.
  SimResult Finish();
  // With trace arrivals: serves what the engine has until the simulated clock reaches ts (or
  // it is idle), then moves the clock there. (Feed does this itself; a router calls it on
  // every replica before it looks at their loads.)
  void RunUntil(double ts);
  // Requests waiting or running.
  int64_t Load() const;
  // The engine's KV cache events (engine::Engine::PublishKvEvents). REQUIRES: before Feed.
  core::Status PublishKvEvents(cache::BlockHasher hasher, std::function<void(std::vector<cache::KvEvent>)> sink) {
    return engine_->PublishKvEvents(std::move(hasher), std::move(sink));
  }
  const engine::Engine& engine() const { return *engine_; }

 private:
  struct Pending {
    int64_t session_id = 0, turn_id = 0, input_tokens = 0;
    double arrival = 0;
  };
  void StepEngine();

  SimulatorConfig config_;
  SimPolicy policy_;
  cache::CostModel cost_;
  SimClock clock_;
  std::unique_ptr<ModelledTier> disk_;    // null: no disk tier
  std::unique_ptr<ModelledStack> tiers_;  // disk_ and config_.remote, those there are (null: none)
  std::unique_ptr<CostModelExecutor> executor_;
  std::unique_ptr<engine::Engine> engine_;
  std::unordered_map<engine::RequestId, Pending> pending_;
  SimResult result_;
  double busy_seconds_ = 0;
};

// Percentile by linear interpolation between closest ranks (numpy's default).
double Percentile(std::vector<double> values, double q);

}  // namespace radixlm::sim
