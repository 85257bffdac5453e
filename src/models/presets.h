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
  // The bundled tokenizer family whose vocabulary the preset has (tokenizer::Tokenizer::Named);
  // empty: none fits, a tokenizer must be given.
  std::string tokenizer;
};

const std::vector<RandomPreset>& RandomPresets();
core::StatusOr<ModelConfig> PresetConfig(const std::string& name);
uint64_t PresetSeed(const std::string& name);
// The preset's bundled tokenizer family ("" when none fits or there is no such preset).
std::string PresetTokenizer(const std::string& name);

inline constexpr const char* kDefaultModel = "random:qwen3-0.6b";

}  // namespace radixlm::models
