#include "runner/hybrid_cache_setup.h"

namespace radixlm::runner {

core::StatusOr<HybridServing> MakeHybridServing(const models::ModelConfig& model, const cache::HybridShape& model_shape,
                                                int max_running, int checkpoint_slots, const std::string& policy,
                                                double alpha) {
  HybridServing out;
  if (model.n_ssm_layers() == 0) return out;
  if (checkpoint_slots <= 0) {
    out.states = std::make_unique<models::SsmStateStore>(model, max_running);
    return out;
  }
  RADIXLM_ASSIGN_OR_RETURN(cache::HybridPolicy p, cache::ParseHybridPolicy(policy));
  if (p != cache::HybridPolicy::kSglangPlus && p != cache::HybridPolicy::kMarconi && p != cache::HybridPolicy::kMarconiStatic)
    return core::InvalidArgument("policy '" + policy + "' cannot serve a model with Mamba2 layers (use sglang+, marconi or marconi-static)");
  cache::HybridShape shape = model_shape;
  shape.kv_elem_bytes = 0;  // KV is the block tree's business
  const cache::CostModel cost(shape, cache::Accounting::kCorrected);
  cache::HybridCacheConfig cfg;
  cfg.policy = p;
  cfg.alpha = alpha;
  // Capacity of exactly checkpoint_slots checkpoints (half a checkpoint of slack for rounding).
  cfg.capacity_bytes = (checkpoint_slots + 0.5) * static_cast<double>(cost.CheckpointBytes());
  out.cache = cache::MakeHybridCache(cfg, cost);
  out.states = std::make_unique<models::SsmStateStore>(model, 2 * max_running + checkpoint_slots + 2);
  return out;
}

}  // namespace radixlm::runner
