// gpt-oss (OpenAI's open-weight mixture of experts, GGUF "gpt-oss", Hugging Face
// GptOssForCausalLM): every block is attention then experts. Conventions as llama.cpp's
// openai-moe graph (src/models/openai-moe.cpp) computes them:
//   - attention with q/k/v and o biases and a learned sink logit per q head in every softmax
//     (kernels::AttentionParams::sinks); even blocks slide over a 128-token window, odd blocks
//     see the whole prefix (llama.cpp's swa pattern 2, or an attention.sliding_window_pattern
//     array); both kinds use NeoX RoPE with YaRN (factor 32 over 4096, beta 32 / 1, rounded
//     correction dims, cos and sin times 0.1 ln 32 + 1): llama.cpp reads no yarn_beta keys for it;
//   - the MoE's norm is post_attention_norm; the router (with a bias) picks the top-k raw logits
//     and softmaxes over the chosen (no renormalisation); experts have biases on gate, up and
//     down and the clamped SwiGLU (kernels::SwigluOaiMul); the experts are MXFP4 in released
//     files (core::DType::kMXFP4).
// Hugging Face folders store the experts as MXFP4 blocks with gate and up rows interleaved;
// they are not read (a clear error): the GGUF is what people run.
#include "models/arch.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

constexpr int kPattern = 2;  // sliding, full, sliding, ...

void Conventions(ModelConfig* c) {
  c->qk_norm = false;
  c->qkv_bias = true;
  c->attn_output_bias = true;
  c->attn_sinks = true;
  c->rope_layout = kernels::RopeLayout::kNeox;
  c->layers = DenseLayers(c->n_blocks);
  UseExperts(c);
  c->mlp_norm_tensor = "post_attention_norm";
  c->mlp_act = ModelConfig::MlpAct::kSwigluOai;
  c->moe.gating = MoeConfig::Gating::kSoftmaxChosen;
  c->moe.norm_weights = false;
  c->moe.router_bias = true;
  c->moe.expert_bias = true;
  if (c->layer_window.empty()) {
    c->layer_window.assign(c->n_blocks, 128);
    for (int b = kPattern - 1; b < c->n_blocks; b += kPattern) c->layer_window[b] = 0;
  }
}

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_RETURN_IF_ERROR(ReadAttentionGguf(g, false, &c));
  const std::string a = c.arch + ".";
  if (g.GetIntOr(a + "attention.sliding_window", 0) <= 0)
    return core::DataLoss(g.path() + ": " + a + "attention.sliding_window is missing or 0 (llama.cpp requires a window)");
  RADIXLM_ASSIGN_OR_RETURN(c.layer_window, ReadGgufSlidingWindows(g, c.n_blocks, kPattern));
  Conventions(&c);
  RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c.arch, 0, &c.moe));
  c.moe.norm_weights = false;  // llama.cpp's graph: softmax over the chosen, never renormalised
  c.moe.weights_scale = 1.0f;
  const core::StatusOr<std::string> scaling = g.GetString(a + "rope.scaling.type");
  if (scaling.ok() && *scaling == "yarn") {
    c.rope_yarn.factor = static_cast<float>(g.GetFloatOr(a + "rope.scaling.factor", 0.0));
    c.rope_yarn.original_max_position = static_cast<int>(g.GetIntOr(a + "rope.scaling.original_context_length", 4096));
    if (!(c.rope_yarn.factor >= 1.0f)) return core::DataLoss(g.path() + ": a YaRN factor below 1");
  } else if (scaling.ok() && *scaling != "none") {
    return core::Unimplemented(g.path() + ": rope.scaling.type '" + *scaling + "' (gpt-oss reads yarn)");
  }
  return c;
}

StatusOr<ModelConfig> FromHf(const json&, const std::string& path, const std::string&) {
  return core::Unimplemented(path + ": gpt-oss Hugging Face folders (MXFP4 expert blocks with interleaved gate and up "
                                    "rows) are not read; use its GGUF (llama.cpp's convert_hf_to_gguf.py writes one)");
}

HfTensorRef HfTensor(const ModelConfig&, const std::string& gguf_name) {
  static const std::vector<HfNameRule> kRules = LlamaTrunkRules("model.", "post_attention_norm", {
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.(weight|bias)$)"), "model.layers.$1.self_attn.$2_proj.$3"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.(weight|bias)$)"), "model.layers.$1.self_attn.o_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_sinks\.weight$)"), "model.layers.$1.self_attn.sinks"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.(weight|bias)$)"), "model.layers.$1.mlp.router.$2"},
  });
  return {MapHfName(kRules, gguf_name)};
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufValue;
  WriteAttentionGguf(c, w);
  WriteMoeGguf(c, w);
  const std::string a = c.arch + ".";
  w->Set(a + "attention.sliding_window", GgufValue::U32(c.sliding_window()));
  if (c.rope_yarn.factor > 0) {
    w->Set(a + "rope.scaling.type", GgufValue::Str("yarn"));
    w->Set(a + "rope.scaling.factor", GgufValue::F32(c.rope_yarn.factor));
    w->Set(a + "rope.scaling.original_context_length", GgufValue::U32(c.rope_yarn.original_max_position));
  }
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json cfg = {{"model_type", "gpt_oss"}, {"num_hidden_layers", c.n_blocks}, {"intermediate_size", c.moe.ffn},
              {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
              {"rms_norm_eps", c.rms_eps}, {"rope_theta", c.rope_theta}, {"max_position_embeddings", c.max_context},
              {"num_local_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used},
              {"sliding_window", c.sliding_window()}, {"layer_types", HfLayerTypes(c)}, {"swiglu_limit", 7.0}};
  if (c.rope_yarn.factor > 0)
    cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", c.rope_yarn.factor}, {"beta_fast", c.rope_yarn.beta_fast},
                           {"beta_slow", c.rope_yarn.beta_slow}, {"truncate", c.rope_yarn.truncate},
                           {"original_max_position_embeddings", c.rope_yarn.original_max_position}};
  return cfg;
}

// No random preset has this architecture (export starts from one), so its Hugging Face layout
// is never written; the tensors keep their GGUF layout.
void HfLayout(const ModelConfig&, std::vector<NamedTensor>*) {}

}  // namespace

const ArchSpec& GptOssArch() {
  static const ArchSpec a = MakeArch("gpt-oss", {"gpt_oss"}, "GptOssForCausalLM", Conventions,
                                     {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
