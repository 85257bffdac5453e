#include "cache/hybrid_cache.h"

#include "cache/block_hybrid_cache.h"
#include "cache/hybrid_radix_cache.h"

namespace radixlm::cache {

core::StatusOr<HybridPolicy> ParseHybridPolicy(const std::string& name) {
  if (name == "lru") return HybridPolicy::kLru;
  if (name == "sglang+" || name == "sglang") return HybridPolicy::kSglangPlus;
  if (name == "marconi") return HybridPolicy::kMarconi;
  if (name == "marconi-static") return HybridPolicy::kMarconiStatic;
  if (name == "vllm+" || name == "vllm") return HybridPolicy::kVllmPlus;
  return core::InvalidArgument("unknown cache policy '" + name +
                               "' (expected lru, vllm+, sglang+, marconi, marconi-static)");
}

const char* HybridPolicyName(HybridPolicy policy) {
  switch (policy) {
    case HybridPolicy::kLru: return "lru";
    case HybridPolicy::kSglangPlus: return "sglang+";
    case HybridPolicy::kMarconi: return "marconi";
    case HybridPolicy::kMarconiStatic: return "marconi-static";
    case HybridPolicy::kVllmPlus: return "vllm+";
  }
  return "?";
}

Flops HistoryFlopsSaved(const CostModel& cost, std::span<const HybridRequestStat> history) {
  const HybridShape& s = cost.shape();
  int64_t total_hit = 0;
  Flops per_request = 0;
  for (const HybridRequestStat& r : history) {
    total_hit += r.hit_tokens;
    per_request += s.n_attn_layers * cost.AttentionFlops(r.hit_tokens) + s.n_mlp_layers * cost.MlpFlops(r.hit_tokens);
  }
  return s.n_ssm_layers * cost.SsmFlops(total_hit) + per_request;
}

std::unique_ptr<HybridPrefixCache> MakeHybridCache(const HybridCacheConfig& config, const CostModel& cost) {
  if (config.policy == HybridPolicy::kVllmPlus) return MakeBlockHybridCache(config, cost);
  return MakeRadixHybridCache(config, cost);
}

core::StatusOr<std::unique_ptr<CheckpointCache>> MakeCheckpointCache(const HybridCacheConfig& config,
                                                                     const CostModel& cost) {
  if (config.policy == HybridPolicy::kVllmPlus)
    return core::InvalidArgument("vllm+ keeps a checkpoint in every block, which the engine's state slots cannot hold; "
                                 "serve with sglang+, marconi or marconi-static");
  return MakeRadixHybridCache(config, cost);
}

core::StatusOr<std::unique_ptr<CheckpointCache>> MakeSlotCheckpointCache(HybridPolicy policy, int slots,
                                                                         HybridShape shape, double alpha,
                                                                         bool tune_in_background) {
  if (policy != HybridPolicy::kSglangPlus && policy != HybridPolicy::kMarconi && policy != HybridPolicy::kMarconiStatic)
    return core::InvalidArgument(std::string("policy '") + HybridPolicyName(policy) +
                                 "' cannot serve a model with Mamba2 layers (use sglang+, marconi or marconi-static)");
  if (slots <= 0) return core::InvalidArgument("a checkpoint cache needs at least one slot");
  shape.kv_elem_bytes = 0;
  const CostModel cost(shape, Accounting::kCorrected);
  HybridCacheConfig config;
  config.policy = policy;
  config.alpha = alpha;
  config.capacity_bytes = (slots + 0.5) * static_cast<double>(cost.CheckpointBytes());
  config.tune_in_background = tune_in_background;
  return MakeCheckpointCache(config, cost);
}

}  // namespace radixlm::cache
