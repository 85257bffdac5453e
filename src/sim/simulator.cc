#include "sim/simulator.h"

#include <algorithm>
#include <chrono>

namespace radixlm::sim {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Simulator::Simulator(SimulatorConfig config, SimPolicy policy, const cache::CostModel& cost)
    : config_(std::move(config)), policy_(std::move(policy)), cost_(cost) {
  std::vector<ModelledTier*> tiers;
  if (config_.disk_bytes > 0) {
    RADIXLM_CHECK_MSG(config_.engine.memory_mode == cache::MemoryMode::kBlockPool, "a disk tier sits under the KV block pool");
    const int64_t block_bytes = cost_.KvBytes(config_.engine.block_tokens);
    RADIXLM_CHECK_MSG(block_bytes > 0, "a disk tier holds KV blocks: the model has none");
    disk_ = std::make_unique<ModelledTier>(config_.engine.block_tokens, block_bytes,
                                           static_cast<int64_t>(config_.disk_bytes / static_cast<double>(block_bytes)), "disk",
                                           config_.disk_gbps);
    tiers.push_back(disk_.get());
  }
  if (config_.remote) {
    RADIXLM_CHECK_MSG(config_.engine.memory_mode == cache::MemoryMode::kBlockPool, "a remote store sits under the KV block pool");
    tiers.push_back(config_.remote);
  }
  if (!tiers.empty()) tiers_ = std::make_unique<ModelledStack>(std::move(tiers));
  executor_ = std::make_unique<CostModelExecutor>(config_.executor, clock_, tiers_.get());
  cache::PrefixCaches caches;
  caches.budget = policy_.budget.get();
  caches.checkpoints = policy_.checkpoints.get();
  caches.tier = tiers_.get();
  engine_ = std::make_unique<engine::Engine>(config_.engine, *executor_, caches, &clock_);
  result_.policy = config_.name;
  result_.capacity_bytes = config_.capacity_bytes;
  int64_t lo = 0;
  for (int64_t hi : {int64_t{1024}, int64_t{2048}, int64_t{4096}, int64_t{8192}, int64_t{16384}, int64_t{32768},
                     int64_t{1} << 62}) {
    result_.bins.push_back({lo, hi});
    lo = hi;
  }
}

void Simulator::StepEngine() {
  const auto start = std::chrono::steady_clock::now();
  engine_->Step();
  busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Simulator::RunUntil(double ts) {
  // Serve what the engine has until then; an idle engine waits.
  while (clock_.Now() < ts) {
    const engine::EngineMetrics m = engine_->Metrics();
    if (m.waiting == 0 && m.running == 0) break;
    StepEngine();
  }
  clock_.AdvanceTo(ts);
}

int64_t Simulator::Load() const {
  const engine::EngineMetrics m = engine_->Metrics();
  return m.waiting + m.running;
}

core::Status Simulator::Feed(const TraceRequest& request) {
  if (config_.arrivals == Arrivals::kTrace) RunUntil(request.ts);
  engine::RequestParams params;
  params.prompt = request.input;
  params.continuation = request.output;
  const double submitted = clock_.Now();
  const double arrival = config_.arrivals == Arrivals::kTrace ? request.ts : submitted;
  auto id = engine_->Submit(std::move(params), [this, submitted](const engine::TokenEvent& ev) {
    if (ev.finish == engine::FinishReason::kNone) return;
    auto it = pending_.find(ev.id);
    if (it == pending_.end()) return;
    const Pending& p = it->second;
    const engine::Usage& u = ev.usage;
    // The prompt-only request's first "token" is its prompt's end.
    const double first = u.completion_tokens > 0 ? u.ttft_seconds : u.total_seconds;
    const double ttft_ms = (submitted - p.arrival + first) * 1000.0;
    for (LengthBin& bin : result_.bins) {
      if (p.input_tokens >= bin.lo && p.input_tokens < bin.hi) {
        ++bin.requests;
        bin.input_tokens += p.input_tokens;
        bin.hit_tokens += u.cached_tokens;
      }
    }
    result_.requests.push_back({p.session_id, p.turn_id, p.input_tokens, u.cached_tokens, ttft_ms,
                                config_.executor.step_cost.Ms(p.input_tokens)});
    pending_.erase(it);
  });
  if (!id.ok()) {
    if (id.status().code() == core::StatusCode::kInvalidArgument) return id.status();
    return core::Status::Ok();  // longer than the engine's memory: refused, counted
  }
  pending_[*id] = {request.session_id, request.turn_id, static_cast<int64_t>(request.input.size()), arrival};
  if (config_.arrivals == Arrivals::kSequential) {
    for (;;) {
      const engine::EngineMetrics m = engine_->Metrics();
      if (pending_.empty() && m.waiting == 0 && m.running == 0) break;
      StepEngine();
    }
  }
  return core::Status::Ok();
}

SimResult Simulator::Finish() {
  for (;;) {
    const engine::EngineMetrics m = engine_->Metrics();
    if (m.waiting == 0 && m.running == 0) break;
    StepEngine();
  }
  RADIXLM_CHECK_MSG(pending_.empty(), "a simulated request never finished");
  result_.metrics = engine_->Metrics();
  const cache::HybridPrefixCache* policy =
      policy_.budget ? policy_.budget.get() : static_cast<const cache::HybridPrefixCache*>(policy_.checkpoints.get());
  if (policy != nullptr) {
    result_.cache = policy->Stats();
    result_.alpha = policy->alpha();
    result_.cache_nodes = policy->NodeCount();
    result_.cache_bytes = policy->TreeBytes();
  }
  std::vector<cache::HybridRequestStat> hits;
  std::vector<double> ttft, vanilla;
  for (const RequestRecord& r : result_.requests) {
    hits.push_back({r.input_tokens, r.hit_tokens});
    ttft.push_back(r.ttft_ms);
    vanilla.push_back(r.vanilla_ttft_ms);
  }
  result_.flops_saved = cache::HistoryFlopsSaved(cost_, hits);
  result_.seconds = busy_seconds_;
  result_.simulated_seconds = clock_.Now();
  result_.steps = executor_->steps();
  result_.disk_bytes = config_.disk_bytes;
  result_.disk_gbps = config_.disk_gbps;
  if (disk_) result_.disk = disk_->stats();
  result_.tier_read_seconds = executor_->tier_read_seconds();
  result_.ttft_p5 = Percentile(ttft, 5);
  result_.ttft_p50 = Percentile(ttft, 50);
  result_.ttft_p90 = Percentile(ttft, 90);
  result_.ttft_p95 = Percentile(ttft, 95);
  result_.vanilla_p5 = Percentile(vanilla, 5);
  result_.vanilla_p50 = Percentile(vanilla, 50);
  result_.vanilla_p95 = Percentile(vanilla, 95);
  return result_;
}

}  // namespace radixlm::sim
