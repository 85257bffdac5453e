// What the Mamba2 hybrids (mamba2, nemotron_h, granitehybrid: models/arch_mamba2.cc and
// arch_granite_hybrid.cc) share when read and exported: llama.cpp's GGUF keys for the Mamba2
// mixer and the model's sizes, per-layer arrays, and the Hugging Face layouts of the mixer's
// tensors (A as A_log, conv1d as [conv_dim, 1, d_conv]).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "formats/gguf.h"
#include "models/arch.h"
#include "models/model_config.h"

namespace radixlm::models {

// Sizes, the Mamba2 mixer's keys, vocabulary, norm epsilon and context of a hybrid GGUF, and
// the widest attention / MLP sizes over its per-layer arrays. Layer kinds are the row's.
core::Status ReadHybridGguf(const formats::GgufFile& g, ModelConfig* c);
// A per-layer metadata value of `key` (an array, or one scalar for every layer); 0 when absent.
int64_t PerLayer(const formats::GgufFile& g, const std::string& key, int64_t layer);
// vocab_size, hidden_size, tied embeddings, context, BOS/EOS of a hybrid config.json.
core::Status ReadHybridHf(const nlohmann::json& j, const std::string& path, const std::string& dir, ModelConfig* c);
// First of `keys` that is a number, else `fallback`.
int64_t FirstNumber(const nlohmann::json& j, std::initializer_list<const char*> keys, int64_t fallback);
// The keys every hybrid GGUF carries (sizes, the Mamba2 mixer, per-layer kv heads and MLP).
void WriteHybridGguf(const ModelConfig& c, formats::GgufWriter* w);
// The Mamba2 mixer's Hugging Face layouts: A as A_log, conv1d as [conv_dim, 1, d_conv].
void Mamba2HfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors);

}  // namespace radixlm::models
