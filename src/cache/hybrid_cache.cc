#include "cache/hybrid_cache.h"

#include "cache/block_hybrid_cache.h"
#include "cache/hybrid_radix_cache.h"
#include "cache/radix_policy.h"
#include "core/status.h"

namespace radixlm::cache {

namespace {

const HybridPolicyRow kHybridPolicies[] = {
    // policy                      name              alias      block  ssm    alpha  ref    radix
    {HybridPolicy::kLru,           "lru",            nullptr,   false, false, false, false, &RadixPolicy::Lru},
    {HybridPolicy::kVllmPlus,      "vllm+",          "vllm",    true,  false, false, true,  nullptr},
    {HybridPolicy::kSglangPlus,    "sglang+",        "sglang",  false, true,  false, true,  &RadixPolicy::SglangPlus},
    {HybridPolicy::kMarconi,       "marconi",        nullptr,   false, true,  false, true,  &RadixPolicy::Marconi},
    {HybridPolicy::kMarconiStatic, "marconi-static", nullptr,   false, true,  true,  true,  &RadixPolicy::MarconiStatic},
};

}  // namespace

std::span<const HybridPolicyRow> HybridPolicies() { return kHybridPolicies; }

const HybridPolicyRow& HybridPolicyRowOf(HybridPolicy policy) {
  for (const HybridPolicyRow& row : kHybridPolicies)
    if (row.policy == policy) return row;
  RADIXLM_CHECK_MSG(false, "a hybrid policy without a row");
  return kHybridPolicies[0];
}

std::string HybridPolicyNames(bool (*pick)(const HybridPolicyRow&), const char* last_joiner) {
  std::vector<const char*> names;
  for (const HybridPolicyRow& row : kHybridPolicies)
    if (pick(row)) names.push_back(row.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? last_joiner : ", ") + std::string(names[i]);
  return s;
}

core::StatusOr<HybridPolicy> ParseHybridPolicy(const std::string& name) {
  for (const HybridPolicyRow& row : kHybridPolicies)
    if (name == row.name || (row.alias && name == row.alias)) return row.policy;
  return core::InvalidArgument("unknown cache policy '" + name + "' (expected " +
                               HybridPolicyNames([](const HybridPolicyRow&) { return true; }, ", ") + ")");
}

const char* HybridPolicyName(HybridPolicy policy) { return HybridPolicyRowOf(policy).name; }

Flops HistoryFlopsSaved(const CostModel& cost, std::span<const HybridRequestStat> history) {
  const HybridShape& s = cost.shape();
  int64_t total_hit = 0;
  Flops per_request = 0;
  for (const HybridRequestStat& r : history) {
    total_hit += r.hit_tokens;
    per_request += cost.AllAttentionFlops(r.hit_tokens) + cost.AllMlpFlops(r.hit_tokens);
  }
  return s.n_ssm_layers * cost.SsmFlops(total_hit) + per_request;
}

std::unique_ptr<HybridPrefixCache> MakeHybridCache(const HybridCacheConfig& config, const CostModel& cost) {
  if (HybridPolicyRowOf(config.policy).block_tree) return MakeBlockHybridCache(config, cost);
  return MakeRadixHybridCache(config, cost);
}

core::StatusOr<std::unique_ptr<CheckpointCache>> MakeCheckpointCache(const HybridCacheConfig& config,
                                                                     const CostModel& cost) {
  if (HybridPolicyRowOf(config.policy).block_tree)
    return core::InvalidArgument(std::string(HybridPolicyName(config.policy)) +
                                 " keeps a checkpoint in every block, which the engine's state slots cannot hold; serve with " +
                                 HybridPolicyNames([](const HybridPolicyRow& r) { return r.serves_ssm; }));
  return MakeRadixHybridCache(config, cost);
}

core::StatusOr<std::unique_ptr<CheckpointCache>> MakeSlotCheckpointCache(HybridPolicy policy, int slots,
                                                                         HybridShape shape, double alpha,
                                                                         bool tune_in_background) {
  if (!HybridPolicyRowOf(policy).serves_ssm)
    return core::InvalidArgument(std::string("policy '") + HybridPolicyName(policy) + "' cannot serve a model with Mamba2 layers (use " +
                                 HybridPolicyNames([](const HybridPolicyRow& r) { return r.serves_ssm; }) + ")");
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
