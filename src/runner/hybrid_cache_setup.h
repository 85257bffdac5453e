// Wires a model with recurrent layers (or window rings) to the hybrid prefix cache for serving: a state store of
// the slots cache::Memory lays out (cache::Memory::StateSlots) and a hybrid cache whose
// capacity is exactly those
// checkpoint slots (KV lives in the engine's block tree, so the cache counts checkpoint bytes
// only; its FLOP model is the model's own shape).
#pragma once

#include <memory>

#include "cache/hybrid_cache.h"
#include "models/model_config.h"
#include "models/ssm_state.h"
#include "runner/serving_options.h"

namespace radixlm::runner {

struct HybridServing {
  std::unique_ptr<models::SsmStateStore> states;
  std::unique_ptr<cache::CheckpointCache> cache;  // null: no prefix reuse
};

// The window rings serving gives a sliding-window model, sized for a step of the scheduler's
// budget plus a draft; ring_tokens 0 (none) with no sliding layer, with --swa-cache full, and
// with auto where the rings (working, capture and the checkpoints kept) would take as much as
// or more than the pool's tokens of the sliding layers (--swa-cache full's cost): short contexts
// for many sequences page; long ones get rings.
core::StatusOr<models::WindowRings> WindowRingsFor(const models::ModelConfig& model, const ServingOptions& o,
                                                   core::DType kv_dtype);

// The checkpoints the hybrid cache keeps: --checkpoint-slots, or when it is left at auto (-1),
// 32 for recurrent states and, for window rings, what fits in the bytes --swa-cache full would
// give the sliding layers (--kv-tokens of them) beside the working and capture slots, at least
// three per running sequence and one more (a conversation's turn leaves its branch point, its prompt's
// end and its reply's end), at most 256.
int CheckpointSlots(const models::ModelConfig& model, const ServingOptions& o, const models::WindowRings& rings);

// The cache-relevant shape of a model the engine runs: KV bytes per element as the KV store
// holds them (kv_dtype), SSM states f32 as the state store holds them, sliding layers' KV in
// the checkpoints when `rings` has any.
cache::HybridShape ShapeOfModel(const models::ModelConfig& model, core::DType kv_dtype = core::DType::kF32,
                                const models::WindowRings& rings = {});

// policy: sglang+, marconi or marconi-static (alpha); checkpoint_slots 0 = no cache;
// draft_states: the slots speculative decoding rolls back to (cache::MemoryConfig). shape:
// the model's cache shape (ShapeOfModel), which sizes checkpoints and ranks them.
// rings: the sliding layers' window rings (WindowRingsFor), which make an attention-only model
// one with states.
core::StatusOr<HybridServing> MakeHybridServing(const models::ModelConfig& model, const cache::HybridShape& shape,
                                                int max_running, int checkpoint_slots, const std::string& policy,
                                                double alpha = 0, bool prompt_end_checkpoints = false,
                                                bool draft_states = false, const models::WindowRings& rings = {});

}  // namespace radixlm::runner
