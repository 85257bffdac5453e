// Resolves the simulator's --model argument to the layer shapes the cache cost model needs.
//   marconi-7b, marconi-7b-n128, marconi-7b-n16   the paper's 7B hybrid (24 SSM, 4 attention,
//                                                  28 MLP layers, d_model 4096, fp16)
//   nemotron-h-8b, granite-4.0-h-tiny             public hybrid configs (shapes only)
//   FILE.json                                      a Hugging Face config.json: Nemotron-H
//                                                  (hybrid_override_pattern), Jamba/Granite-H
//                                                  (layers_block_type / layer_types), a dense
//                                                  transformer, or Marconi's keys
//                                                  (num_ssm_layers, num_attn_layers,
//                                                  num_mlp_layers, d, n)
//   anything else                                  a model the engine loads (GGUF, HF folder,
//                                                  random:NAME): attention-only, KV bytes from
//                                                  the engine's own KV layout (f32)
#pragma once

#include <string>

#include "cache/cost_model.h"
#include "core/status.h"
#include "models/model_config.h"

namespace radixlm::sim {

core::StatusOr<cache::HybridShape> ResolveModelShape(const std::string& spec);

// The cache-relevant shape of a model the engine runs (f32 KV and SSM states, as the engine
// stores them).
cache::HybridShape ShapeOfModel(const models::ModelConfig& model);

}  // namespace radixlm::sim
