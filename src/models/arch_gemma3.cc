// Gemma 3 (text): a dense decoder whose blocks alternate five sliding-window attention layers
// (window 512 or 1024, RoPE base 10000) with one full-attention layer (base 1e6, linear scaling
// 8 on 4B and up), q/k RMSNorm, GeGLU with the tanh GELU, a norm after the attention and after
// the MLP as well as before them, and embeddings scaled by sqrt(d_model). Conventions as
// llama.cpp's gemma3 (src/models/gemma3.cpp) and Hugging Face's Gemma3ForCausalLM define them:
//   - GGUF norms hold (1 + w) (the converter adds the one), so they are plain RMSNorm weights;
//     a Hugging Face checkpoint stores w and each norm is read with add = 1.
//   - Attention scale 1/sqrt(head_dim) (llama.cpp; 1/sqrt(d_model / heads) for the 62-block
//     27B; Hugging Face: query_pre_attn_scalar^-1/2).
//   - Which layers slide: GGUF attention.sliding_window(_pattern), llama.cpp's pattern 6
//     (blocks 5, 11, ... are global); Hugging Face layer_types or sliding_window_pattern.
#include <cmath>

#include "models/arch.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

constexpr int kPattern = 6;  // five sliding layers then one global

void Conventions(ModelConfig* c) {
  GemmaDecoderConventions(c);
  if (c->rope_theta_swa <= 0) c->rope_theta_swa = 10000.0;
  if (c->layer_window.empty()) {  // a preset: llama.cpp's default pattern with a 512-token window
    c->layer_window.assign(c->n_blocks, 512);
    for (int b = kPattern - 1; b < c->n_blocks; b += kPattern) c->layer_window[b] = 0;
  }
}

// Linear RoPE scaling of the global layers (4B and up): every frequency divided by `factor`.
void LinearRopeScaling(double factor, ModelConfig* c) {
  if (factor > 0 && factor != 1.0) c->rope_freq_factors.assign(c->head_dim / 2, static_cast<float>(factor));
}

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_RETURN_IF_ERROR(ReadAttentionGguf(g, true, &c));
  const std::string a = c.arch + ".";
  RADIXLM_ASSIGN_OR_RETURN(c.layer_window, ReadGgufSlidingWindows(g, c.n_blocks, kPattern));
  c.rope_theta_swa = g.GetFloatOr(a + "rope.freq_base_swa", 10000.0);
  Conventions(&c);
  c.final_logit_softcap = static_cast<float>(g.GetFloatOr(a + "final_logit_softcapping", 0.0));
  c.attention_multiplier = c.n_blocks == 62 ? 1.0f / std::sqrt(static_cast<float>(c.d_model / c.n_heads))
                                            : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const StatusOr<std::string> scaling_key = g.GetString(a + "rope.scaling.type");
  const std::string scaling = scaling_key.ok() ? *scaling_key : "";
  if (!scaling.empty() && scaling != "linear" && scaling != "none")
    return core::Unimplemented(g.path() + ": rope.scaling.type '" + scaling + "' (gemma3 reads linear)");
  if (scaling == "linear") LinearRopeScaling(g.GetFloatOr(a + "rope.scaling.factor", 1.0), &c);
  return c;
}

// Sliding windows from a config.json: layer_types ("sliding_attention" / "full_attention") or
// sliding_window_pattern (every Nth layer global), the window from sliding_window.
core::Status HfWindows(const json& j, const std::string& path, ModelConfig* c) {
  const int window = j.value("sliding_window", 0);
  c->layer_window.assign(c->n_blocks, window > 0 ? window : 0);
  if (window <= 0) return core::Status::Ok();
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    if (static_cast<int>(types.size()) != c->n_blocks) return core::DataLoss(path + ": layer_types has the wrong length");
    for (int b = 0; b < c->n_blocks; ++b)
      if (types[b].get<std::string>() != "sliding_attention") c->layer_window[b] = 0;
    return core::Status::Ok();
  }
  const int every = j.value("sliding_window_pattern", kPattern);
  for (int b = 0; b < c->n_blocks; ++b)
    if (every > 0 && (b + 1) % every == 0) c->layer_window[b] = 0;
  return core::Status::Ok();
}

StatusOr<ModelConfig> FromHf(const json& top, const std::string& path, const std::string& dir) {
  ModelConfig c;
  c.arch = "gemma3";
  c.name = dir;
  // Gemma3ForConditionalGeneration keeps the text model's config in text_config and its tensors
  // under language_model.model.
  const bool multimodal = top.contains("text_config") && top["text_config"].is_object();
  const json& j = multimodal ? top["text_config"] : top;
  c.hf_tensor_prefix = multimodal ? "language_model.model." : "model.";
  try {
    c.vocab_size = j.value("vocab_size", int64_t{262208});
    RADIXLM_RETURN_IF_ERROR(ReadHfSizes(j, path, &c));
    c.n_kv_heads = j.value("num_key_value_heads", c.n_heads);
    c.head_dim = j.value("head_dim", 256);
    c.rms_eps = j.value("rms_norm_eps", 1e-6f);
    c.rope_theta = j.value("rope_theta", 1000000.0);
    c.rope_theta_swa = j.value("rope_local_base_freq", 10000.0);
    c.max_context = j.value("max_position_embeddings", int64_t{131072});
    c.tied_embeddings = j.value("tie_word_embeddings", true);
    c.bos_id = j.value("bos_token_id", 2);
    c.eos_id = j.contains("eos_token_id") && j["eos_token_id"].is_number_integer() ? j["eos_token_id"].get<int32_t>() : 1;
    RADIXLM_RETURN_IF_ERROR(HfWindows(j, path, &c));
    Conventions(&c);
    const double pre = j.value("query_pre_attn_scalar", static_cast<double>(c.head_dim));
    c.attention_multiplier = static_cast<float>(1.0 / std::sqrt(pre));
    if (j.contains("final_logit_softcapping") && j["final_logit_softcapping"].is_number())
      c.final_logit_softcap = j["final_logit_softcapping"].get<float>();
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
      const json& rs = j["rope_scaling"];
      const std::string type = rs.value("rope_type", rs.value("type", ""));
      if (type != "linear") return core::Unimplemented(path + ": rope_scaling type '" + type + "' (gemma3 reads linear)");
      LinearRopeScaling(rs.at("factor").get<double>(), &c);
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

HfTensorRef HfTensor(const ModelConfig& c, const std::string& gguf_name) {
  static const std::vector<HfNameRule> kRules = LlamaTrunkRules("", "post_attention_norm", {
      {std::regex(R"(^blk\.(\d+)\.attn_q\.weight$)"), "layers.$1.self_attn.q_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_k\.weight$)"), "layers.$1.self_attn.k_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_v\.weight$)"), "layers.$1.self_attn.v_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_q_norm\.weight$)"), "layers.$1.self_attn.q_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_k_norm\.weight$)"), "layers.$1.self_attn.k_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_norm\.weight$)"), "layers.$1.pre_feedforward_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.post_ffw_norm\.weight$)"), "layers.$1.post_feedforward_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate\.weight$)"), "layers.$1.mlp.gate_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_up\.weight$)"), "layers.$1.mlp.up_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "layers.$1.mlp.down_proj.weight"},
  });
  if (gguf_name == "output.weight") return {"lm_head.weight"};
  const std::string prefix = c.hf_tensor_prefix.empty() ? "model." : c.hf_tensor_prefix;
  HfTensorRef r{prefix + MapHfName(kRules, gguf_name)};
  if (gguf_name.size() > 11 && gguf_name.ends_with("norm.weight")) r.add = 1.0f;  // HF stores w of (1 + w)
  return r;
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufType;
  using formats::GgufValue;
  WriteAttentionGguf(c, w);
  const std::string a = c.arch + ".";
  const int window = c.sliding_window();
  if (window > 0) {
    w->Set(a + "attention.sliding_window", GgufValue::U32(window));
    std::vector<GgufValue> pattern;
    for (int x : c.layer_window) {
      if (x != 0 && x != window) return core::Unimplemented("gemma3 export: sliding windows of different sizes");
      pattern.push_back(GgufValue::Bool(x > 0));
    }
    w->Set(a + "attention.sliding_window_pattern", GgufValue::Array(GgufType::kBool, std::move(pattern)));
    w->Set(a + "rope.freq_base_swa", GgufValue::F32(static_cast<float>(c.rope_theta_swa)));
  }
  if (!c.rope_freq_factors.empty()) {
    w->Set(a + "rope.scaling.type", GgufValue::Str("linear"));
    w->Set(a + "rope.scaling.factor", GgufValue::F32(c.rope_freq_factors[0]));
  }
  if (c.final_logit_softcap > 0) w->Set(a + "final_logit_softcapping", GgufValue::F32(c.final_logit_softcap));
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json cfg = {{"model_type", "gemma3_text"}, {"num_hidden_layers", c.n_blocks}, {"intermediate_size", c.ffn_dim},
              {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
              {"rms_norm_eps", c.rms_eps}, {"rope_theta", c.rope_theta}, {"rope_local_base_freq", c.rope_theta_swa},
              {"max_position_embeddings", c.max_context}, {"hidden_activation", "gelu_pytorch_tanh"},
              {"sliding_window", c.sliding_window()}, {"layer_types", HfLayerTypes(c)},
              {"query_pre_attn_scalar", c.attention_multiplier > 0 ? 1.0 / (double{c.attention_multiplier} * c.attention_multiplier)
                                                                   : static_cast<double>(c.head_dim)},
              {"final_logit_softcapping", nullptr}, {"attn_logit_softcapping", nullptr}};
  if (c.final_logit_softcap > 0) cfg["final_logit_softcapping"] = c.final_logit_softcap;
  if (!c.rope_freq_factors.empty()) cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_freq_factors[0]}};
  return cfg;
}

// The checkpoint stores each norm's w of (1 + w).
void HfLayout(const ModelConfig&, std::vector<NamedTensor>* tensors) {
  for (NamedTensor& t : *tensors)
    if (t.name.ends_with("norm.weight"))
      for (float& x : t.data) x -= 1.0f;
}

}  // namespace

void GemmaDecoderConventions(ModelConfig* c) {
  c->qk_norm = true;
  c->qkv_bias = false;
  c->rope_layout = kernels::RopeLayout::kNeox;
  c->layers = DenseLayers(c->n_blocks);
  c->mlp_act = ModelConfig::MlpAct::kGeluTanhGated;
  c->post_norms = true;
  c->mlp_norm_tensor = "ffn_norm";
  c->embedding_multiplier = std::sqrt(static_cast<float>(c->d_model));
}

const ArchSpec& Gemma3Arch() {
  static const ArchSpec a =
      MakeArch("gemma3", {"gemma3_text", "gemma3"}, "Gemma3ForCausalLM", Conventions,
               {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
