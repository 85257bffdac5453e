#include "models/hybrid_config.h"

#include <algorithm>

namespace radixlm::models {

using core::StatusOr;
using formats::TensorEntry;
using nlohmann::json;

// Mamba2ForCausalLM, NemotronHForCausalLM, GraniteMoeHybridForCausalLM (dense MLP only).
StatusOr<ModelConfig> HybridConfigFromHf(const json& j, const std::string& type, const std::string& path,
                                         const std::string& dir) {
  ModelConfig c;
  c.name = dir;
  auto first = [&](std::initializer_list<const char*> keys, int64_t fallback) -> int64_t {
    for (const char* k : keys)
      if (j.contains(k) && j[k].is_number()) return j[k].get<int64_t>();
    return fallback;
  };
  // An untrusted size, checked before any arithmetic uses it.
  auto sized = [&](const char* key, int64_t value, int64_t hi, int* out) {
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": " + key, value, 1, hi));
    *out = static_cast<int>(value);
    return core::Status::Ok();
  };
  try {
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    RADIXLM_RETURN_IF_ERROR(sized("hidden_size", j.at("hidden_size").get<int64_t>(), kMaxDim, &c.d_model));
    c.tied_embeddings = j.value("tie_word_embeddings", false);
    c.max_context = first({"max_position_embeddings"}, 1 << 20);
    if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int32_t>();
    if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_id = j["eos_token_id"].get<int32_t>();
    c.use_rope = false;
    if (type == "mamba2") {
      c.arch = "mamba2";
      c.block_per_sublayer = true;
      RADIXLM_RETURN_IF_ERROR(sized("num_heads", j.at("num_heads").get<int64_t>(), kMaxHeads, &c.ssm_heads));
      c.ssm_head_dim = static_cast<int>(first({"head_dim"}, 64));
      c.ssm_state = static_cast<int>(first({"state_size"}, 128));
      c.ssm_groups = static_cast<int>(first({"n_groups"}, 1));
      c.ssm_conv = static_cast<int>(first({"conv_kernel"}, 4));
      c.ssm_conv_bias = j.value("use_conv_bias", true);
      c.rms_eps = j.value("layer_norm_epsilon", 1e-5f);
      RADIXLM_RETURN_IF_ERROR(sized("num_hidden_layers", j.at("num_hidden_layers").get<int64_t>(), kMaxBlocks, &c.n_blocks));
      c.layers.assign(c.n_blocks, LayerKind::kMamba2);
      c.ssm_norm_group = 0;  // HF's MambaRMSNormGated normalises the whole d_inner
    } else if (type == "nemotron_h") {
      c.arch = "nemotron_h";
      c.block_per_sublayer = true;
      RADIXLM_RETURN_IF_ERROR(sized("mamba_num_heads", first({"mamba_num_heads"}, 0), kMaxHeads, &c.ssm_heads));
      RADIXLM_RETURN_IF_ERROR(sized("mamba_head_dim", first({"mamba_head_dim"}, 64), 4096, &c.ssm_head_dim));
      c.ssm_state = static_cast<int>(first({"ssm_state_size", "mamba_d_state"}, 128));
      RADIXLM_RETURN_IF_ERROR(sized("n_groups", first({"n_groups", "mamba_n_groups"}, 1), kMaxHeads, &c.ssm_groups));
      c.ssm_conv = static_cast<int>(first({"conv_kernel", "mamba_d_conv"}, 4));
      c.ssm_conv_bias = j.value("use_conv_bias", true);
      c.ssm_norm_group = c.ssm_heads * c.ssm_head_dim / c.ssm_groups;  // grouped (Zamba2RMSNormGated)
      RADIXLM_RETURN_IF_ERROR(sized("num_attention_heads", j.at("num_attention_heads").get<int64_t>(), kMaxHeads, &c.n_heads));
      c.n_kv_heads = static_cast<int>(first({"num_key_value_heads"}, c.n_heads));
      c.head_dim = static_cast<int>(first({"head_dim", "attention_head_dim"}, c.d_model / c.n_heads));
      c.ffn_dim = j.at("intermediate_size").get<int>();
      c.mlp_act = ModelConfig::MlpAct::kRelu2;
      if (j.value("mlp_hidden_act", std::string("relu2")) != "relu2")
        return core::Unimplemented(path + ": Nemotron-H MLP activation other than relu2");
      c.rms_eps = j.value("layer_norm_epsilon", 1e-5f);
      const std::string pattern = j.at("hybrid_override_pattern").get<std::string>();
      for (char ch : pattern) {
        if (ch == 'M') c.layers.push_back(LayerKind::kMamba2);
        else if (ch == '*') c.layers.push_back(LayerKind::kAttention);
        else if (ch == '-') c.layers.push_back(LayerKind::kMlp);
        else return core::Unimplemented(path + ": hybrid_override_pattern layer '" + std::string(1, ch) + "' (MoE) is not supported");
      }
      c.n_blocks = static_cast<int>(c.layers.size());
    } else {
      c.arch = "granitehybrid";
      if (first({"num_local_experts"}, 0) > 0) return core::Unimplemented(path + ": Granite-4.0-H with MoE experts");
      c.ssm_heads = static_cast<int>(first({"mamba_n_heads"}, 0));
      c.ssm_head_dim = static_cast<int>(first({"mamba_d_head"}, 64));
      c.ssm_state = static_cast<int>(first({"mamba_d_state"}, 128));
      c.ssm_groups = static_cast<int>(first({"mamba_n_groups"}, 1));
      c.ssm_conv = static_cast<int>(first({"mamba_d_conv"}, 4));
      c.ssm_conv_bias = j.value("mamba_conv_bias", true);
      RADIXLM_RETURN_IF_ERROR(sized("num_attention_heads", j.at("num_attention_heads").get<int64_t>(), kMaxHeads, &c.n_heads));
      c.n_kv_heads = static_cast<int>(first({"num_key_value_heads"}, c.n_heads));
      c.head_dim = c.d_model / c.n_heads;
      c.ffn_dim = static_cast<int>(first({"shared_intermediate_size", "intermediate_size"}, 0));
      c.rms_eps = j.value("rms_norm_eps", 1e-6f);
      c.embedding_multiplier = j.value("embedding_multiplier", 1.0f);
      c.residual_multiplier = j.value("residual_multiplier", 1.0f);
      c.attention_multiplier = j.value("attention_multiplier", 0.0f);
      c.logits_scaling = j.value("logits_scaling", 1.0f);
      c.use_rope = j.value("position_embedding_type", std::string("nope")) == "rope";
      c.rope_theta = j.value("rope_theta", 10000.0);
      const json& types = j.contains("layer_types") ? j["layer_types"] : j.at("layers_block_type");
      for (const auto& t : types) {
        const std::string kind = t.get<std::string>();
        if (kind != "mamba" && kind != "attention") return core::Unimplemented(path + ": layer type '" + kind + "'");
        c.layers.push_back(kind == "mamba" ? LayerKind::kMamba2 : LayerKind::kAttention);
        c.layers.push_back(LayerKind::kMlp);
      }
      c.n_blocks = static_cast<int>(types.size());
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

// llama.cpp's hybrid GGUFs: which layers are recurrent comes from per-layer arrays
// (attention.head_count_kv 0 = Mamba2; Nemotron-H's feed_forward_length > 0 = MLP).
StatusOr<ModelConfig> HybridConfigFromGguf(const formats::GgufFile& g, const std::string& arch) {
  ModelConfig c;
  c.arch = arch;
  const std::string a = arch + ".";
  const StatusOr<std::string> name = g.GetString("general.name");  // optional; the path when absent or not text
  c.name = name.ok() ? *name : g.path();
  RADIXLM_ASSIGN_OR_RETURN(int64_t d, g.GetInt(a + "embedding_length"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t blocks, g.GetInt(a + "block_count"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t heads_ssm, g.GetInt(a + "ssm.time_step_rank"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t inner, g.GetInt(a + "ssm.inner_size"));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "embedding_length", d, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "block_count", blocks, 1, kMaxBlocks));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "ssm.time_step_rank", heads_ssm, 1, kMaxHeads));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "ssm.inner_size", inner, 1, kMaxDim));
  c.d_model = static_cast<int>(d);
  c.n_blocks = static_cast<int>(blocks);
  c.ssm_heads = static_cast<int>(heads_ssm);
  c.ssm_head_dim = static_cast<int>(inner / heads_ssm);
  c.ssm_state = static_cast<int>(g.GetIntOr(a + "ssm.state_size", 128));
  c.ssm_groups = static_cast<int>(g.GetIntOr(a + "ssm.group_count", 1));
  c.ssm_conv = static_cast<int>(g.GetIntOr(a + "ssm.conv_kernel", 4));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "ssm.group_count", c.ssm_groups, 1, kMaxHeads));
  c.ssm_norm_group = static_cast<int>(inner / c.ssm_groups);  // llama.cpp normalises per group
  c.rms_eps = static_cast<float>(g.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.max_context = g.GetIntOr(a + "context_length", 1 << 20);
  c.use_rope = false;
  c.tied_embeddings = g.tensors().Find("output.weight") == nullptr;
  const TensorEntry* emb = g.tensors().Find("token_embd.weight");
  if (!emb || emb->shape.size() != 2) return core::DataLoss(g.path() + ": missing or malformed token_embd.weight");
  c.vocab_size = emb->shape[0];
  c.bos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.bos_token_id", -1));
  c.eos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.eos_token_id", -1));
  // A per-layer value: an array, or one scalar for every layer.
  auto per_layer = [&](const std::string& key, int64_t i) -> int64_t {
    const formats::GgufValue* v = g.Find(a + key);
    if (!v) return 0;
    if (!v->array.empty()) return i < static_cast<int64_t>(v->array.size()) ? v->array[i].AsInt() : 0;
    return v->AsInt();
  };
  for (int64_t i = 0; i < blocks; ++i) {
    c.n_heads = std::max<int>(c.n_heads, static_cast<int>(per_layer("attention.head_count", i)));
    c.n_kv_heads = std::max<int>(c.n_kv_heads, static_cast<int>(per_layer("attention.head_count_kv", i)));
    c.ffn_dim = std::max<int>(c.ffn_dim, static_cast<int>(per_layer("feed_forward_length", i)));
  }
  c.head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", c.n_heads ? d / c.n_heads : 0));
  if (arch == "mamba2") {
    c.block_per_sublayer = true;
    c.layers.assign(blocks, LayerKind::kMamba2);
  } else if (arch == "nemotron_h") {
    c.block_per_sublayer = true;
    c.mlp_act = ModelConfig::MlpAct::kRelu2;
    for (int64_t i = 0; i < blocks; ++i) {
      if (per_layer("attention.head_count_kv", i) > 0) c.layers.push_back(LayerKind::kAttention);
      else if (per_layer("feed_forward_length", i) > 0) c.layers.push_back(LayerKind::kMlp);
      else c.layers.push_back(LayerKind::kMamba2);
    }
  } else {  // granitehybrid: a mixer and a SwiGLU MLP per layer
    if (g.Find(a + "expert_count") && g.GetIntOr(a + "expert_count", 0) > 0)
      return core::Unimplemented(g.path() + ": Granite-4.0-H with MoE experts");
    c.ffn_dim = static_cast<int>(g.GetIntOr(a + "expert_shared_feed_forward_length", c.ffn_dim));
    for (int64_t i = 0; i < blocks; ++i) {
      c.layers.push_back(per_layer("attention.head_count_kv", i) > 0 ? LayerKind::kAttention : LayerKind::kMamba2);
      c.layers.push_back(LayerKind::kMlp);
    }
    c.embedding_multiplier = static_cast<float>(g.GetFloatOr(a + "embedding_scale", 1.0));
    c.residual_multiplier = static_cast<float>(g.GetFloatOr(a + "residual_scale", 1.0));
    c.attention_multiplier = static_cast<float>(g.GetFloatOr(a + "attention.scale", 0.0));
    c.logits_scaling = static_cast<float>(g.GetFloatOr(a + "logit_scale", 1.0));
    // Granite's switch for positional embeddings, as llama.cpp reads it: RoPE unless the file
    // says rope.scaling.finetuned = false (Granite-4.0-H is NoPE; Bamba-style files use RoPE),
    // in ggml's "normal" layout (adjacent pairs; the converter permutes q/k rows for it).
    c.use_rope = g.GetBoolOr(a + "rope.scaling.finetuned", true);
    if (c.use_rope) {
      c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 10000.0);
      c.rope_layout = kernels::RopeLayout::kInterleaved;
      const int64_t rot = g.GetIntOr(a + "rope.dimension_count", c.head_dim);
      if (rot != c.head_dim)
        return core::Unimplemented(g.path() + ": partial rotary embeddings (rope.dimension_count " + std::to_string(rot) + ")");
    }
  }
  return c;
}

}  // namespace radixlm::models
