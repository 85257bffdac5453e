// Random-initialised presets of real model shapes: the built-in default models until a
// trained checkpoint is given. Weights are seeded, so a preset name always means the same
// weights (see RandomSource in loader.cc for the distributions).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "models/model_config.h"

namespace radixlm::models {

struct RandomPreset {
  std::string name;
  std::string description;
  ModelConfig config;
};

const std::vector<RandomPreset>& RandomPresets();
core::StatusOr<ModelConfig> PresetConfig(const std::string& name);
uint64_t PresetSeed(const std::string& name);

inline constexpr const char* kDefaultModel = "random:qwen3-0.6b";

}  // namespace radixlm::models
