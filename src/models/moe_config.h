// What the mixture-of-experts architectures (qwen3moe, qwen35moe, granitehybrid with experts,
// nemotron_h_moe) share when read and exported: llama.cpp's GGUF keys for the experts, the
// Hugging Face config fields, and turning a dense layer list into its MoE one. Each row sets its
// own routing conventions (ModelConfig::moe: gating, normalisation, scale) as its family
// defines them; these helpers read only the sizes and the keys a file may state.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "formats/gguf.h"
#include "models/model_config.h"

namespace radixlm::models {

// <arch>.expert_count, expert_used_count, expert_feed_forward_length (else `ffn_fallback`),
// expert_shared_feed_forward_length, expert_group_count / expert_group_used_count, and where
// present expert_weights_norm and expert_weights_scale (0 = none, as llama.cpp reads it).
core::Status ReadMoeGguf(const formats::GgufFile& g, const std::string& arch, int64_t ffn_fallback, MoeConfig* m);
// The same keys for an export.
void WriteMoeGguf(const ModelConfig& c, formats::GgufWriter* w);
// Hugging Face: num_experts | num_local_experts | n_routed_experts, num_experts_per_tok,
// moe_intermediate_size (else `ffn_fallback`), shared_expert_intermediate_size |
// shared_intermediate_size | moe_shared_expert_intermediate_size, norm_topk_prob (when stated),
// routed_scaling_factor, n_group / topk_group.
core::Status ReadMoeHf(const nlohmann::json& t, const std::string& path, int64_t ffn_fallback, MoeConfig* m);
// Every dense feed-forward sublayer becomes a mixture of experts.
void UseExperts(ModelConfig* c);

}  // namespace radixlm::models
