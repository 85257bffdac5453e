// The simulators a `radixlm simulate` run feeds, built from its options: one Simulator per
// cache policy (the engine with a byte-budget policy, Marconi's reference, or the engine's own
// block-pool memory with a hybrid model's checkpoint slots), and with --replicas a fleet per
// routing next to them. The options are checked against the model's shape here, each refusal
// naming the flag.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/cost_model.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "sim/fleet.h"
#include "sim/simulator.h"

namespace radixlm::sim {

struct SetupOptions {
  std::string policy = "marconi";  // a name, a comma list, or "all"
  std::string memory = "budget";   // budget (a byte budget) | engine (the engine's block pool)
  std::string arrivals = "sequential";
  bool reference = false;          // Marconi's artifact and its cost accounting
  double alpha = 0;
  bool alpha_set = false;
  int bootstrap_multiplier = 5;
  double capacity_bytes = 0;       // --memory budget
  TtftModel ttft = TtftModel::Default();
  // --memory engine: the engine's serving memory, as `serve` takes it.
  int64_t kv_tokens = 32768;
  int32_t kv_block_tokens = 16;
  int checkpoint_slots = 32, max_running = 16, step_tokens = 0;
  int prefill_alignment = -1;  // -1: the model's (an engine model's Mamba2 chunk), else 0
  bool prompt_end_checkpoints = false;
  int64_t prompt_end_min_gap = 256;
  double disk_gb = 0, disk_gbps = 2;  // attention-only models: a modelled disk tier under the pool
  // A fleet: `replicas` engines with 1/N of the memory each behind a router (fleet.h).
  int replicas = 1;
  std::string routing = "all";
  // The fleet's remote store (a Redis every replica shares, sim/disk_model.h): its size, and its
  // read bandwidth in GB/s (0: no store).
  double remote_gb = 64, remote_gbps = 0;
  double match_threshold = FleetConfig{}.match_threshold;
  double pressure_slack = FleetConfig{}.pressure_slack;
  double pressure_window = FleetConfig{}.pressure_window;
};

struct Simulators {
  std::vector<std::unique_ptr<Simulator>> sims;
  std::vector<std::unique_ptr<FleetSimulator>> fleets;
  core::Status Feed(const TraceRequest& r);
};

// model_alignment: an engine model's Mamba2 chunk (0 otherwise); pool: the tuner's replays.
core::StatusOr<Simulators> BuildSimulators(const SetupOptions& o, const cache::HybridShape& shape, const cache::CostModel& cost,
                                           int model_alignment, core::ThreadPool* pool);

}  // namespace radixlm::sim
