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
//   anything else                                  handed to `engine_model` (the CLI resolves
//                                                  a model the engine loads: GGUF, HF folder,
//                                                  random:NAME, with the engine's own layouts)
#pragma once

#include <functional>
#include <string>

#include "cache/cost_model.h"
#include "core/status.h"

namespace radixlm::sim {

// The shape of a model the engine loads; the simulator does not depend on model code, so the
// composition root supplies it.
using EngineModelShape = std::function<core::StatusOr<cache::HybridShape>(const std::string& spec)>;

core::StatusOr<cache::HybridShape> ResolveModelShape(const std::string& spec, const EngineModelShape& engine_model = nullptr);

}  // namespace radixlm::sim
