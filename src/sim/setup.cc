#include "sim/setup.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "cache/marconi_reference.h"
#include "cache/memory.h"

namespace radixlm::sim {
namespace {

using core::InvalidArgument;

core::Status CheckOptions(const SetupOptions& o, const cache::HybridShape& shape, const cache::CostModel& cost) {
  // CLI11 reads nan and inf as numbers; none of these means anything then, nor a negative alpha.
  if (!std::isfinite(o.alpha) || o.alpha < 0) return InvalidArgument("--alpha must be a finite number >= 0");
  const bool engine_memory = o.memory == "engine";
  if (engine_memory && o.reference)
    return InvalidArgument("--reference-accounting is Marconi's byte-budget model; it takes --memory budget");
  if (!std::isfinite(o.disk_gb) || o.disk_gb < 0 || !std::isfinite(o.disk_gbps) || o.disk_gbps <= 0)
    return InvalidArgument("--disk-gb must be a finite number >= 0 and --disk-gbps one > 0");
  if (o.disk_gb > 0) {
    // The tier sits under the engine's KV block pool and holds KV blocks only (cache::Memory
    // gives a recurrent model none: its hits end at the checkpoints the disk lacks).
    if (!engine_memory)
      return InvalidArgument("--disk-gb models a disk tier under the engine's KV block pool: it takes --memory engine "
                             "(--memory budget has no pool)");
    if (shape.n_ssm_layers > 0 || cost.KvBytes(o.kv_block_tokens) <= 0)
      return InvalidArgument("--disk-gb: the disk tier holds KV blocks of attention-only models (" + shape.name +
                             " has SSM layers or no KV)");
    // A fleet's router indexes each replica's blocks from its KV events, which do not tell it
    // yet that a block the pool dropped is still on the replica's disk (fleet.h).
    if (o.replicas > 1)
      return InvalidArgument("--disk-gb takes one engine: the fleet's routing index does not follow blocks on a disk yet");
    if (o.disk_gb * 1e9 < static_cast<double>(cost.KvBytes(o.kv_block_tokens)))
      return InvalidArgument("--disk-gb " + std::to_string(o.disk_gb) + " holds no KV block of " +
                             std::to_string(cost.KvBytes(o.kv_block_tokens)) + " bytes");
  }
  if (!std::isfinite(o.remote_gb) || o.remote_gb <= 0 || !std::isfinite(o.remote_gbps) || o.remote_gbps < 0)
    return InvalidArgument("--remote-gb must be a finite number > 0 and --remote-gbps one >= 0");
  if (o.remote_gbps > 0) {
    if (o.replicas < 2) return InvalidArgument("--remote-gbps models the store a fleet shares: it takes --replicas N (N >= 2)");
    if (shape.n_ssm_layers > 0 || cost.KvBytes(o.kv_block_tokens) <= 0)
      return InvalidArgument("--remote-gbps: the remote store holds KV blocks of attention-only models (" + shape.name +
                             " has SSM layers or no KV)");
    if (o.remote_gb * 1e9 < static_cast<double>(cost.KvBytes(o.kv_block_tokens)))
      return InvalidArgument("--remote-gb " + std::to_string(o.remote_gb) + " holds no KV block of " +
                             std::to_string(cost.KvBytes(o.kv_block_tokens)) + " bytes");
  }
  if (o.replicas > 1 && (!engine_memory || o.policy == "all" || o.policy.find(',') != std::string::npos))
    return InvalidArgument("--replicas takes --memory engine and one --policy (each replica runs it on 1/N of the memory)");
  return core::Status::Ok();
}

core::Status CheckPolicy(const SetupOptions& o, const std::string& name, const cache::HybridPolicyRow& row,
                         const cache::HybridShape& shape) {
  if (!row.serves_ssm && !row.block_tree && shape.n_ssm_layers > 0)
    return InvalidArgument("policy " + name + " caches KV only: it needs an attention-only model (" + shape.name +
                           " has SSM layers); use sglang+ or marconi");
  if (o.reference && !row.in_reference)
    return InvalidArgument("the Marconi artifact has no " + name + " policy; --reference-accounting takes " +
                           cache::HybridPolicyNames([](const cache::HybridPolicyRow& r) { return r.in_reference; }));
  if (row.needs_alpha && !o.alpha_set) return InvalidArgument(name + " needs --alpha");
  return core::Status::Ok();
}

SimulatorConfig BaseConfig(const SetupOptions& o, const std::string& name) {
  SimulatorConfig config;
  config.name = name;
  config.executor.step_cost = o.ttft;
  config.arrivals = o.arrivals == "trace" ? Arrivals::kTrace : Arrivals::kSequential;
  // Prefill in one step unless a budget is given: the TTFT line prices one prefill.
  config.engine.scheduler.step_token_budget = o.step_tokens > 0 ? o.step_tokens : (1 << 30);
  config.engine.scheduler.max_running = o.max_running;
  config.engine.prompt_end_checkpoints = o.prompt_end_checkpoints;
  config.engine.prompt_end_min_gap = o.prompt_end_min_gap;
  return config;
}

// --memory budget: the policy decides every hit within a byte budget (Marconi's model).
core::Status BudgetMemory(const SetupOptions& o, cache::HybridPolicy policy, const cache::CostModel& cost,
                          core::ThreadPool* pool, SimulatorConfig* config, SimPolicy* made) {
  config->engine.memory_mode = cache::MemoryMode::kByteBudget;
  config->capacity_bytes = o.capacity_bytes;
  cache::HybridCacheConfig hc;
  hc.policy = policy;
  hc.capacity_bytes = o.capacity_bytes;
  hc.alpha = o.alpha;
  hc.bootstrap_multiplier = o.bootstrap_multiplier;
  hc.tuning_pool = pool;
  if (!o.reference) {
    made->budget = cache::MakeHybridCache(hc, cost);
    return core::Status::Ok();
  }
  auto ref = cache::MakeMarconiReferenceCache(hc, cost);
  if (!ref.ok()) return ref.status();
  made->budget = std::move(ref).value();
  return core::Status::Ok();
}

// --memory engine: the engine's memory as served: KV blocks and the radix tree's LRU; a
// hybrid's checkpoint slots with the policy; the state slots its executor would hold.
core::Status EngineMemory(const SetupOptions& o, cache::HybridPolicy policy, const cache::HybridShape& shape,
                          const cache::CostModel& cost, int model_alignment, SimulatorConfig* config, SimPolicy* made) {
  config->engine.memory_mode = cache::MemoryMode::kBlockPool;
  config->engine.block_tokens = o.kv_block_tokens;
  const int64_t blocks = (o.kv_tokens + o.kv_block_tokens - 1) / o.kv_block_tokens;
  if (blocks > std::numeric_limits<int32_t>::max())
    return InvalidArgument("--kv-tokens " + std::to_string(o.kv_tokens) + " is " + std::to_string(blocks) + " blocks of " +
                           std::to_string(o.kv_block_tokens) + " tokens; the pool holds at most 2^31-1 blocks");
  config->engine.num_blocks = static_cast<int32_t>(blocks);
  config->engine.checkpoint_slots = o.checkpoint_slots;
  config->disk_bytes = o.disk_gb * 1e9;
  config->disk_gbps = o.disk_gbps;
  config->capacity_bytes = static_cast<double>(cost.KvBytes(int64_t{config->engine.num_blocks} * o.kv_block_tokens));
  const cache::HybridPolicyRow& row = cache::HybridPolicyRowOf(policy);
  if (shape.n_ssm_layers == 0) {
    if (row.serves_ssm || row.block_tree)
      return InvalidArgument("an attention-only model's engine memory is the block tree's LRU: use --policy lru");
    return core::Status::Ok();
  }
  auto ckpt = cache::MakeSlotCheckpointCache(policy, o.checkpoint_slots, shape, o.alpha, /*tune_in_background=*/false);
  if (!ckpt.ok()) return ckpt.status();
  made->checkpoints = std::move(ckpt).value();
  config->capacity_bytes += o.checkpoint_slots * static_cast<double>(cost.CheckpointBytes());
  const cache::MemoryConfig layout{.max_running = o.max_running, .recurrent = true, .checkpoint_slots = o.checkpoint_slots,
                                   .prompt_end_checkpoints = o.prompt_end_checkpoints};
  config->executor.state_slots = cache::Memory::StateSlots(layout, true);
  config->executor.prefill_alignment = o.prefill_alignment >= 0 ? o.prefill_alignment : model_alignment;
  return core::Status::Ok();
}

// The fleets of `replicas` engines, each with 1/N of `config`'s memory, one per routing.
core::Status AddFleets(const SetupOptions& o, cache::HybridPolicy policy, const cache::HybridShape& shape,
                       const cache::CostModel& cost, const SimulatorConfig& config, Simulators* out) {
  FleetConfig fc;
  fc.replicas = o.replicas;
  fc.match_threshold = o.match_threshold;
  fc.pressure_slack = o.pressure_slack;
  fc.pressure_window = o.pressure_window;
  if (o.remote_gbps > 0) {
    fc.remote_bytes = o.remote_gb * 1e9;
    fc.remote_gbps = o.remote_gbps;
  }
  fc.replica = config;
  fc.replica.engine.num_blocks = std::max<int32_t>(1, config.engine.num_blocks / o.replicas);
  const int slots = std::max(1, o.checkpoint_slots / o.replicas);
  fc.replica.engine.checkpoint_slots = slots;
  fc.replica.capacity_bytes = config.capacity_bytes / o.replicas;
  auto make_policy = [&shape, policy, slots, alpha = o.alpha]() {
    SimPolicy p;
    if (shape.n_ssm_layers > 0)
      p.checkpoints = cache::MakeSlotCheckpointCache(policy, slots, shape, alpha, /*tune_in_background=*/false).value();
    return p;
  };
  std::stringstream routings(o.routing == "all" ? "round-robin,least-loaded,prefix-aware" : o.routing);
  for (std::string r; std::getline(routings, r, ',');) {
    auto routing = ParseRouting(r);
    if (!routing.ok()) return routing.status();
    fc.routing = *routing;
    auto fleet = FleetSimulator::Create(fc, make_policy, cost);
    if (!fleet.ok()) return fleet.status();
    out->fleets.push_back(std::move(fleet).value());
  }
  return core::Status::Ok();
}

}  // namespace

core::Status Simulators::Feed(const TraceRequest& r) {
  for (auto& sim : sims) RADIXLM_RETURN_IF_ERROR(sim->Feed(r));
  for (auto& fleet : fleets) RADIXLM_RETURN_IF_ERROR(fleet->Feed(r));
  return core::Status::Ok();
}

core::StatusOr<Simulators> BuildSimulators(const SetupOptions& o, const cache::HybridShape& shape, const cache::CostModel& cost,
                                           int model_alignment, core::ThreadPool* pool) {
  RADIXLM_RETURN_IF_ERROR(CheckOptions(o, shape, cost));
  const bool engine_memory = o.memory == "engine";
  Simulators out;
  std::stringstream names(o.policy == "all" ? (engine_memory ? "sglang+,marconi" : "vllm+,sglang+,marconi") : o.policy);
  for (std::string name; std::getline(names, name, ',');) {
    RADIXLM_ASSIGN_OR_RETURN(cache::HybridPolicy policy, cache::ParseHybridPolicy(name));
    RADIXLM_RETURN_IF_ERROR(CheckPolicy(o, name, cache::HybridPolicyRowOf(policy), shape));
    SimulatorConfig config = BaseConfig(o, name);
    SimPolicy made;
    RADIXLM_RETURN_IF_ERROR(engine_memory ? EngineMemory(o, policy, shape, cost, model_alignment, &config, &made)
                                          : BudgetMemory(o, policy, cost, pool, &config, &made));
    out.sims.push_back(std::make_unique<Simulator>(config, std::move(made), cost));
    if (o.replicas > 1) RADIXLM_RETURN_IF_ERROR(AddFleets(o, policy, shape, cost, config, &out));  // next to the one cache
  }
  if (out.sims.empty()) return InvalidArgument("--policy names no policy");
  return out;
}

}  // namespace radixlm::sim
