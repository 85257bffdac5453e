#include "sim/model_shape.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>


namespace radixlm::sim {
namespace {

using nlohmann::json;

int64_t First(const json& j, std::initializer_list<const char*> keys, int64_t fallback) {
  for (const char* k : keys)
    if (j.contains(k) && j[k].is_number()) return j[k].get<int64_t>();
  return fallback;
}

core::StatusOr<cache::HybridShape> ShapeFromJson(const json& j, const std::string& name) {
  cache::HybridShape s;
  s.name = name;
  if (j.contains("num_ssm_layers") || j.contains("num_attn_layers")) {  // Marconi's keys
    s.n_ssm_layers = static_cast<int>(First(j, {"num_ssm_layers"}, 0));
    s.n_attn_layers = static_cast<int>(First(j, {"num_attn_layers"}, 0));
    s.n_mlp_layers = static_cast<int>(First(j, {"num_mlp_layers"}, 0));
    s.d_model = First(j, {"d", "d_model", "hidden_size"}, 0);
    s.d_state = First(j, {"n", "d_state"}, 128);
  } else {
    s.d_model = First(j, {"hidden_size", "d_model"}, 0);
    const int64_t n_layers = First(j, {"num_hidden_layers", "n_layer"}, 0);
    s.n_heads = First(j, {"num_attention_heads"}, 0);
    s.n_kv_heads = First(j, {"num_key_value_heads"}, s.n_heads);
    s.head_dim = First(j, {"head_dim", "attention_head_dim"}, s.n_heads ? s.d_model / s.n_heads : 0);
    s.d_ff = First(j, {"intermediate_size", "ffn_hidden_size"}, 0);
    s.d_state = First(j, {"ssm_state_size", "mamba_d_state", "state_size", "d_state"}, 128);
    s.expand = First(j, {"mamba_expand", "expand"}, 2);
    s.n_groups = First(j, {"n_groups", "mamba_n_groups"}, 1);
    s.d_conv = First(j, {"conv_kernel", "mamba_d_conv", "d_conv"}, 4);
    s.ssm_heads = First(j, {"mamba_num_heads"}, 0);
    // Mixtures of experts (Qwen3-MoE, Qwen3.5-MoE, Granite-4.0-H-Tiny, Nemotron-3-Nano): the active
    // experts' FLOPs per token.
    s.moe_experts = First(j, {"num_experts", "num_local_experts", "n_routed_experts"}, 0);
    if (s.moe_experts > 0) {
      s.moe_used = First(j, {"num_experts_per_tok"}, 1);
      s.moe_ffn = First(j, {"moe_intermediate_size", "intermediate_size"}, 0);
      s.moe_shared_ffn = First(j, {"shared_expert_intermediate_size", "shared_intermediate_size",
                                   "moe_shared_expert_intermediate_size"}, 0);
    }
    const std::string act = j.value("hidden_act", j.value("mlp_hidden_act", std::string("silu")));
    s.gated_mlp = act == "silu" || act == "swiglu" || act == "gelu_pytorch_tanh";
    if (j.contains("hybrid_override_pattern")) {  // Nemotron-H: M mamba, * attention, - MLP
      for (char c : j["hybrid_override_pattern"].get<std::string>()) {
        s.n_ssm_layers += c == 'M';
        s.n_attn_layers += c == '*';
        s.n_mlp_layers += c == '-' || c == 'E';
      }
      s.gated_mlp = false;  // squared-ReLU MLP, two projections
    } else if (j.contains("layers_block_type") || j.contains("layer_types")) {
      // Jamba / Granite-4.0-H: each layer is a mixer (mamba or attention) followed by an MLP.
      const json& types = j.contains("layers_block_type") ? j["layers_block_type"] : j["layer_types"];
      for (const auto& t : types) {
        const std::string kind = t.get<std::string>();
        s.n_ssm_layers += kind == "mamba";
        s.n_attn_layers += kind == "attention";
      }
      s.n_mlp_layers = static_cast<int>(types.size());
    } else {
      s.n_attn_layers = s.n_mlp_layers = static_cast<int>(n_layers);
    }
    const std::string dtype = j.value("torch_dtype", std::string("bfloat16"));
    s.kv_elem_bytes = s.state_elem_bytes = dtype == "float32" ? 4 : 2;
    if (j.contains("mamba_ssm_cache_dtype") && j["mamba_ssm_cache_dtype"] == "float32") s.state_elem_bytes = 4;
  }
  if (s.d_model <= 0 || s.n_attn_layers + s.n_ssm_layers <= 0)
    return core::InvalidArgument(name + ": config needs hidden_size and at least one mixer layer");
  return s;
}

}  // namespace

core::StatusOr<cache::HybridShape> ResolveModelShape(const std::string& spec, const EngineModelShape& engine_model) {
  if (spec == "marconi-7b" || spec == "marconi-7b-n128") return cache::Marconi7BShape(128);
  if (spec == "marconi-7b-n16") return cache::Marconi7BShape(16);
  if (spec == "nemotron-h-8b") {
    // nvidia/Nemotron-H-8B-Base-8K config.json (shapes only).
    json j = {{"hidden_size", 4096}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
              {"head_dim", 128}, {"intermediate_size", 21504}, {"ssm_state_size", 128},
              {"n_groups", 8}, {"conv_kernel", 4}, {"expand", 2}, {"mamba_num_heads", 128},
              {"hybrid_override_pattern", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"}};
    return ShapeFromJson(j, spec);
  }
  if (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json") {
    std::ifstream in(spec);
    if (!in) return core::NotFound("cannot open model config " + spec);
    try {
      return ShapeFromJson(json::parse(in), std::filesystem::path(spec).filename().string());
    } catch (const json::exception& e) {
      return core::InvalidArgument(spec + ": " + e.what());
    }
  }
  if (!engine_model) return core::NotFound("'" + spec + "' is not a known model shape or a config.json");
  return engine_model(spec);
}


}  // namespace radixlm::sim
