// The serving engine as the CLI builds it from --kv-tokens, --max-running and friends: shared by
// serve, replay and chat so the three run the same engine from the same options.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "engine/engine.h"
#include "models/model_config.h"
#include "runner/hybrid_cache_setup.h"
#include "runner/model_executor.h"

namespace radixlm::cli {

void AddEngineOptions(CLI::App* cmd, EngineOptions* o);
engine::EngineConfig MakeEngineConfig(const EngineOptions& o);
// State slots and the hybrid prefix cache for a model with Mamba2 layers (none otherwise).
runner::HybridServing MakeHybrid(const models::ModelConfig& model, const EngineOptions& o);
runner::PrefillCompaction MakePrefillCompaction(const EngineOptions& o);

}  // namespace radixlm::cli
