// What computes a step when the engine is simulated: nothing is computed; the step's cost is
// charged to a simulated clock by the TTFT/latency line (a + b x tokens computed in the step).
// The engine, its scheduler and its memory run unchanged on top (sim/simulator.h).
//
// With modelled tiers under the pool (sim/disk_model.h: a disk, a fleet's remote store, stacked),
// blocks move between the pool and the tiers as the runner moves them on the real ones
// (runner/model_executor.cc): LoadBlocks loads in order, each block from the first tier holding
// it, stopping at the first block none holds; StoreBlocks writes through. The time a load takes,
// block_bytes / (the tier's GB/s x 1e9) s per block, is charged to the clock when it happens: the
// engine loads synchronously while it admits the request (engine::Engine::Admit), before the
// step's Execute, so the step loop, and with it every sequence of the step, waits for the tiers;
// the loading request's TTFT includes it. Stores cost nothing: the real tier copies the bytes
// and writes them behind the step loop (a host memcpy, next to a step, is not modelled).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "core/status.h"
#include "engine/clock.h"
#include "engine/executor.h"
#include "sim/disk_model.h"

namespace radixlm::sim {

// The simulated time, in seconds; only the cost executor and the driver move it.
class SimClock final : public engine::Clock {
 public:
  double Now() const override { return now_; }
  void Advance(double seconds) { now_ += seconds; }
  void AdvanceTo(double t) {
    if (t > now_) now_ = t;
  }

 private:
  double now_ = 0;
};

// Prefill latency as a line: Marconi fits Jamba-1.5-Mini's profiled table (~17.81 ms +
// 0.05296 ms/token).
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

struct CostExecutorConfig {
  TtftModel step_cost = TtftModel::Default();
  // What the served executor would report, so the scheduler and memory behave the same:
  int32_t state_slots = 0;            // a recurrent model's state store (Memory::StateSlots)
  int32_t prefill_alignment = 0;      // its Mamba2 chunk
  bool shares_step_prefixes = false;  // intra-step prefix dedup
};

class CostModelExecutor final : public engine::Executor {
 public:
  // tiers: the modelled tiers under the pool (borrowed; null: none).
  CostModelExecutor(CostExecutorConfig config, SimClock& clock, ModelledStack* tiers = nullptr);
  // Charges a + b x (tokens of every sequence) to the clock. The simulator replays recorded
  // outputs (RequestParams::continuation), so no logits are ever asked for.
  void Execute(std::span<const engine::BlockCopy> copies, std::span<const engine::StepSequence> seqs,
               std::vector<float>* logits) override;
  // Trace token ids are arbitrary (block-hash traces use up to 2^30).
  int64_t vocab_size() const override { return std::numeric_limits<int32_t>::max(); }
  int64_t max_context() const override { return std::numeric_limits<int64_t>::max() / 4; }
  int32_t state_slots() const override { return config_.state_slots; }
  int32_t prefill_alignment() const override { return config_.prefill_alignment; }
  bool shares_step_prefixes() const override { return config_.shares_step_prefixes; }
  // Loads from the tiers in order, up to the first block none holds, and charges their read time
  // to the clock now (see above); 0 without tiers.
  int32_t LoadBlocks(std::span<const engine::BlockTransfer> loads) override;
  // Writes the blocks to every tier; no time is charged (the real tiers write behind the loop).
  void StoreBlocks(std::span<const engine::BlockTransfer> stores) override;
  int64_t steps() const { return steps_; }
  // Simulated seconds charged for reads from the tiers (cumulative).
  double tier_read_seconds() const { return tier_read_seconds_; }

 private:
  CostExecutorConfig config_;
  SimClock& clock_;
  ModelledStack* tiers_ = nullptr;
  int64_t steps_ = 0;
  double tier_read_seconds_ = 0;
};

}  // namespace radixlm::sim
