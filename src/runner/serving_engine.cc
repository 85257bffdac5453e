#include "runner/serving_engine.h"

#include <cstdio>

#include "runner/tier_setup.h"

namespace radixlm::runner {

namespace {

PrefillCompaction MakePrefillCompaction(const ServingOptions& o) {
  return {.threshold = o.prefill_compaction_threshold, .trie_attention = o.prefill_compaction == "trie"};
}

core::StatusOr<HybridServing> MakeHybrid(const models::ModelConfig& model, const ServingOptions& o,
                                         core::DType kv_dtype, const models::WindowRings& rings) {
  if (o.speculate != "off" && model.n_ssm_layers() > 0 && model.ssm_chunk > 0)
    return core::InvalidArgument("--speculate needs the exact recurrence (--ssm-chunk 0): a chunked scan's bits depend "
                                 "on where a step starts, so verifying a draft would change answers");
  return MakeHybridServing(model, ShapeOfModel(model, kv_dtype, rings), o.max_running,
                           o.no_prefix_cache ? 0 : o.checkpoint_slots, o.hybrid_policy, 0.0, o.prompt_end_checkpoints,
                           o.speculate != "off", rings);
}

}  // namespace

engine::EngineConfig MakeEngineConfig(const ServingOptions& o) {
  engine::EngineConfig c;
  c.block_tokens = o.block_tokens;
  c.num_blocks = static_cast<int32_t>((o.kv_tokens + o.block_tokens - 1) / o.block_tokens);
  c.prefix_cache = !o.no_prefix_cache;
  c.kv_eviction = o.kv_eviction;
  c.await_elsewhere = o.cache_remote_wait == "on";
  c.scheduler.step_token_budget = o.step_tokens;
  c.scheduler.max_running = o.max_running;
  c.checkpoint_slots = o.checkpoint_slots;
  c.prompt_end_checkpoints = o.prompt_end_checkpoints;
  c.prompt_end_min_gap = o.prompt_end_min_gap;
  c.speculate = {.source = o.speculate, .draft_max = o.draft_max, .max_step_rows = o.spec_max_rows, .adapt = !o.spec_fixed};
  return c;
}

core::StatusOr<std::unique_ptr<ServingEngine>> ServingEngine::Make(models::Transformer& model, core::ThreadPool& pool,
                                                                   const ServingOptions& given, core::DType kv_dtype,
                                                                   const std::string& weights_path, int64_t sampled_vocab) {
  ServingOptions o = given;
  RADIXLM_ASSIGN_OR_RETURN(const models::WindowRings rings, WindowRingsFor(model.config(), o, kv_dtype));
  o.checkpoint_slots = CheckpointSlots(model.config(), o, rings);
  if (rings.ring_tokens > 0)
    std::fprintf(stderr, "window rings: %d tokens of the sliding layers per sequence or checkpoint (%.1f MiB), %d checkpoints\n",
                 rings.ring_tokens, models::SsmStateStore::BytesPerSlot(model.config(), rings) / 1048576.0,
                 o.no_prefix_cache ? 0 : o.checkpoint_slots);
  auto hybrid = MakeHybrid(model.config(), o, kv_dtype, rings);
  RADIXLM_RETURN_IF_ERROR(hybrid.status());
  std::unique_ptr<tier::Tier> tiers;
  if (!o.cache_dir.empty() || !o.cache_remote.empty()) {
    if (weights_path.empty()) return core::InvalidArgument("--cache-dir and --cache-remote need the model's path for its fingerprint");
    RADIXLM_ASSIGN_OR_RETURN(tiers, MakeTiers(weights_path, model, kv_dtype, o, rings));
  }
  engine::EngineConfig c = MakeEngineConfig(o);
  c.sampling_pool = &pool;
  c.sampled_vocab = sampled_vocab;
  return std::unique_ptr<ServingEngine>(
      new ServingEngine(model, pool, o, std::move(c), kv_dtype, std::move(hybrid).value(), std::move(tiers)));
}

ServingEngine::ServingEngine(models::Transformer& model, core::ThreadPool& pool, const ServingOptions& o,
                             engine::EngineConfig config, core::DType kv_dtype, HybridServing hybrid,
                             std::unique_ptr<tier::Tier> tiers)
    : config_(std::move(config)),
      kv_(model.config(), {config_.num_blocks, config_.block_tokens, kv_dtype, hybrid.states && hybrid.states->has_rings()}),
      hybrid_(std::move(hybrid)),
      executor_(model, pool, kv_, hybrid_.states.get()),
      tiers_(std::move(tiers)),
      engine_(config_, executor_, [&] {
        cache::PrefixCaches c(hybrid_.cache.get());
        c.tier = tiers_.get();
        return c;
      }()) {
  executor_.set_tier(tiers_.get());
  executor_.set_compaction(MakePrefillCompaction(o));
  executor_.set_cascade(o.cascade == "on");
}

}  // namespace radixlm::runner
