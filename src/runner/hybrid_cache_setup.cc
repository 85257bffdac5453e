#include "runner/hybrid_cache_setup.h"

#include <algorithm>

#include "cache/memory.h"

namespace radixlm::runner {

namespace {

// The slots a ring model's serving holds besides its checkpoints (working, capture, draft).
int64_t FixedSlots(const ServingOptions& o) {
  const cache::MemoryConfig fixed{.max_running = o.max_running, .recurrent = true, .checkpoint_slots = 0,
                                  .prompt_end_checkpoints = o.prompt_end_checkpoints, .draft_states = o.speculate != "off"};
  return cache::Memory::StateSlots(fixed, true);
}

// A conversation's turn leaves three checkpoints: its branch point, its prompt's end, its reply's.
int64_t MinCheckpoints(const ServingOptions& o) { return 3 * int64_t{o.max_running} + 1; }

// Rings share one block size: every sliding layer that keeps KV has the same head shape.
bool OneSlidingShape(const models::ModelConfig& c) {
  int first = -1;
  for (int a = 0; a < c.n_attention_layers(); ++a) {
    if (c.layer_window[a] == 0 || !c.OwnsKv(a)) continue;
    if (first < 0) first = a;
    if (c.AttnKvHeads(a) != c.AttnKvHeads(first) || c.AttnHeadDim(a) != c.AttnHeadDim(first)) return false;
  }
  return true;
}

}  // namespace

core::StatusOr<models::WindowRings> WindowRingsFor(const models::ModelConfig& model, const ServingOptions& o,
                                                   core::DType kv_dtype) {
  if (o.swa_cache != "auto" && o.swa_cache != "window" && o.swa_cache != "full")
    return core::InvalidArgument("--swa-cache must be auto, window or full, not '" + o.swa_cache + "'");
  if (o.swa_cache == "full" || model.sliding_window() == 0) return models::WindowRings{};
  if (model.n_ssm_layers() > 0) {  // one state store holds either recurrent states or rings
    if (o.swa_cache == "window")
      return core::InvalidArgument("--swa-cache window: this model has recurrent layers too; use auto or full");
    return models::WindowRings{};
  }
  if (!OneSlidingShape(model)) {
    if (o.swa_cache == "window")
      return core::InvalidArgument("--swa-cache window: this model's sliding layers differ in head shape; use auto or full");
    return models::WindowRings{};
  }
  const int rows = o.step_tokens + (o.speculate != "off" ? o.draft_max : 0);
  const models::WindowRings rings{models::SsmStateStore::RingTokens(model, o.block_tokens, rows), o.block_tokens, kv_dtype};
  // auto: rings where they take less than paging the sliding layers for the whole pool would:
  // the fixed slots and the checkpoints (as asked, or the fewest auto keeps), in ring tokens.
  const int64_t checkpoints = o.no_prefix_cache ? 0 : o.checkpoint_slots >= 0 ? o.checkpoint_slots : MinCheckpoints(o);
  const int64_t ring_slots = FixedSlots(o) + checkpoints;
  if (o.swa_cache == "auto" && int64_t{rings.ring_tokens} * ring_slots >= o.kv_tokens) return models::WindowRings{};
  return rings;
}

int CheckpointSlots(const models::ModelConfig&, const ServingOptions& o, const models::WindowRings& rings) {
  if (o.checkpoint_slots >= 0) return o.checkpoint_slots;
  if (rings.ring_tokens == 0) return 32;
  // The pool's tokens of the sliding layers, in rings, beside the slots every serving holds.
  const int64_t fit = o.kv_tokens / rings.ring_tokens - FixedSlots(o);
  return static_cast<int>(std::clamp<int64_t>(fit, MinCheckpoints(o), 256));
}

cache::HybridShape ShapeOfModel(const models::ModelConfig& c, core::DType kv_dtype, const models::WindowRings& rings) {
  cache::HybridShape s;
  s.name = c.name;
  s.d_model = c.d_model;
  s.n_attn_layers = c.n_attention_layers();
  s.n_ssm_layers = c.n_ssm_layers();
  for (models::LayerKind k : c.layers) s.n_mlp_layers += models::IsFeedForward(k);
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.d_ff = c.ffn_dim;
  s.gated_mlp = c.mlp_gated();
  if (c.CountLayers(models::LayerKind::kMoe) > 0) {
    s.moe_experts = c.moe.experts;
    s.moe_used = c.moe.used;
    s.moe_ffn = c.moe.ffn;
    s.moe_shared_ffn = c.moe.shared_ffn;
    s.n_moe_layers = c.CountLayers(models::LayerKind::kMoe);
  }
  s.attn_output_gate = c.attn_output_gate;
  if (c.CountLayers(models::LayerKind::kShortConv) > 0) {
    s.short_conv = true;
    s.d_conv = c.short_conv;
  } else if (c.CountLayers(models::LayerKind::kDeltaNet) > 0) {
    s.delta_net = true;
    s.gdn_k_heads = c.gdn_k_heads;
    s.gdn_v_heads = c.gdn_v_heads;
    s.gdn_head_dim = c.gdn_head_dim;
    s.d_conv = c.ssm_conv;
  } else if (c.n_ssm_layers() > 0) {
    s.d_state = c.ssm_state;
    s.n_groups = c.ssm_groups;
    s.d_conv = c.ssm_conv;
    s.ssm_heads = c.ssm_heads;
    // d_inner = ssm_heads x head_dim; expressed through expand for the cost model.
    s.expand = int64_t{c.ssm_heads} * c.ssm_head_dim / c.d_model;
  }
  s.kv_elem_bytes = static_cast<int>(core::DTypeSize(kv_dtype));
  s.state_elem_bytes = 4;  // the SSM state store holds f32
  if (!c.layer_head_dim.empty() || !c.layer_kv_heads.empty() || !c.layer_kv_source.empty())
    s.kv_values_per_token = c.KvValuesPerToken(rings.ring_tokens == 0, true);
  if (rings.ring_tokens > 0) {
    s.n_window_layers = c.n_sliding_layers();
    s.window = c.sliding_window();
    s.window_state_bytes = static_cast<int64_t>(models::SsmStateStore::BytesPerSlot(c, rings));
  }
  return s;
}


core::StatusOr<HybridServing> MakeHybridServing(const models::ModelConfig& model, const cache::HybridShape& model_shape,
                                                int max_running, int checkpoint_slots, const std::string& policy,
                                                double alpha, bool prompt_end_checkpoints, bool draft_states,
                                                const models::WindowRings& rings) {
  HybridServing out;
  if (model.n_ssm_layers() == 0 && rings.ring_tokens == 0) return out;
  // The slot layout is cache::Memory's; the state store holds exactly its slots.
  const cache::MemoryConfig layout{.max_running = max_running, .recurrent = true, .checkpoint_slots = checkpoint_slots,
                                   .prompt_end_checkpoints = prompt_end_checkpoints, .draft_states = draft_states};
  if (checkpoint_slots <= 0) {
    out.states = std::make_unique<models::SsmStateStore>(model, cache::Memory::StateSlots(layout, false), rings);
    return out;
  }
  RADIXLM_ASSIGN_OR_RETURN(cache::HybridPolicy p, cache::ParseHybridPolicy(policy));
  RADIXLM_ASSIGN_OR_RETURN(out.cache, cache::MakeSlotCheckpointCache(p, checkpoint_slots, model_shape, alpha));
  out.states = std::make_unique<models::SsmStateStore>(model, cache::Memory::StateSlots(layout, true), rings);
  return out;
}

}  // namespace radixlm::runner
