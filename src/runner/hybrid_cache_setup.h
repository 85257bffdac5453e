// Wires a model with Mamba2 layers to the hybrid prefix cache for serving: a state store of
// the slots cache::Memory lays out (cache::Memory::StateSlots) and a hybrid cache whose
// capacity is exactly those
// checkpoint slots (KV lives in the engine's block tree, so the cache counts checkpoint bytes
// only; its FLOP model is the model's own shape).
#pragma once

#include <memory>

#include "cache/hybrid_cache.h"
#include "models/model_config.h"
#include "models/ssm_state.h"

namespace radixlm::runner {

struct HybridServing {
  std::unique_ptr<models::SsmStateStore> states;
  std::unique_ptr<cache::CheckpointCache> cache;  // null: no prefix reuse
};

// The cache-relevant shape of a model the engine runs: KV bytes per element as the KV store
// holds them (kv_dtype), SSM states f32 as the state store holds them.
cache::HybridShape ShapeOfModel(const models::ModelConfig& model, core::DType kv_dtype = core::DType::kF32);

// policy: sglang+, marconi or marconi-static (alpha); checkpoint_slots 0 = no cache;
// draft_states: the slots speculative decoding rolls back to (cache::MemoryConfig). shape:
// the model's cache shape (ShapeOfModel), which sizes checkpoints and ranks them.
core::StatusOr<HybridServing> MakeHybridServing(const models::ModelConfig& model, const cache::HybridShape& shape,
                                                int max_running, int checkpoint_slots, const std::string& policy,
                                                double alpha = 0, bool prompt_end_checkpoints = false,
                                                bool draft_states = false);

}  // namespace radixlm::runner
