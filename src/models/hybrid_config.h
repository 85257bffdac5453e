// Model configs of hybrid (attention + Mamba2) checkpoints: Hugging Face config.json of
// Mamba2ForCausalLM, NemotronHForCausalLM and GraniteMoeHybridForCausalLM (dense MLP only), and
// llama.cpp's GGUF metadata for mamba2, nemotron_h and granitehybrid. Used by the loader.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "formats/gguf.h"
#include "models/model_config.h"

namespace radixlm::models {

core::StatusOr<ModelConfig> HybridConfigFromHf(const nlohmann::json& j, const std::string& type,
                                               const std::string& path, const std::string& dir);
core::StatusOr<ModelConfig> HybridConfigFromGguf(const formats::GgufFile& g, const std::string& arch);

}  // namespace radixlm::models
