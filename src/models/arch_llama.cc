// The Llama family of decoders: llama (Llama 2/3, interleaved RoPE in GGUF), qwen2 (q/k/v
// biases), qwen3 (per-head q/k RMSNorm), and qwen3moe (Qwen3's attention with a mixture of
// experts in every block: softmax router, top-k renormalised, SwiGLU experts, no shared expert).
// One decoder block = attention + SwiGLU MLP (or experts).
#include <tuple>

#include "models/arch.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

// Each row's conventions. GGUF's llama is interleaved (llama.cpp's converter permutes q/k rows);
// every Qwen is NeoX.
template <bool kQkNorm, bool kQkvBias, kernels::RopeLayout kLayout>
void Conventions(ModelConfig* c) {
  c->qk_norm = kQkNorm;
  c->qkv_bias = kQkvBias;
  c->rope_layout = kLayout;
  c->layers = DenseLayers(c->n_blocks);
}
constexpr auto kLlamaConventions = Conventions<false, false, kernels::RopeLayout::kInterleaved>;
constexpr auto kQwen2Conventions = Conventions<false, true, kernels::RopeLayout::kNeox>;
constexpr auto kQwen3Conventions = Conventions<true, false, kernels::RopeLayout::kNeox>;
// Qwen3-MoE: llama.cpp always renormalises the chosen weights (a GGUF states no
// norm_topk_prob); a Hugging Face config's norm_topk_prob is read (FromHf).
void Qwen3MoeConventions(ModelConfig* c) {
  kQwen3Conventions(c);
  UseExperts(c);
  c->moe.gating = MoeConfig::Gating::kSoftmax;
  c->moe.norm_weights = true;
}

// The row of a config's architecture (this file's three).
const ArchSpec& RowOf(const ModelConfig& c) { return *ArchByGguf(c.arch); }

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_ASSIGN_OR_RETURN(const std::string arch, g.GetString("general.architecture"));
  const bool moe = arch == "qwen3moe";  // the dense width is unused (and may be absent)
  RADIXLM_RETURN_IF_ERROR(ReadAttentionGguf(g, !moe, &c));
  const std::string a = c.arch + ".";
  const int64_t ffn = c.ffn_dim;
  RowOf(c).conventions(&c);
  if (moe) {
    const int64_t used = g.GetIntOr(a + "expert_used_count", 0);
    RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c.arch, used > 0 ? ffn / used : 0, &c.moe));
    c.moe.norm_weights = true;  // llama.cpp's qwen3moe graph always renormalises
  }
  return c;
}

StatusOr<ModelConfig> FromHf(const json& j, const std::string& path, const std::string& dir) {
  ModelConfig c;
  c.arch = ArchByHfType(j.at("model_type").get<std::string>())->gguf_name;
  c.name = dir;
  try {
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    RADIXLM_RETURN_IF_ERROR(ReadHfSizes(j, path, &c));
    c.n_kv_heads = j.value("num_key_value_heads", c.n_heads);
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int>() : c.d_model / c.n_heads;
    c.rms_eps = j.value("rms_norm_eps", 1e-6f);
    c.rope_theta = j.value("rope_theta", 10000.0);
    c.max_context = j.value("max_position_embeddings", int64_t{4096});
    c.tied_embeddings = j.value("tie_word_embeddings", false);
    if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int32_t>();
    if (j.contains("eos_token_id")) {
      const json& e = j["eos_token_id"];
      if (e.is_number_integer()) c.eos_id = e.get<int32_t>();
      else if (e.is_array() && !e.empty()) c.eos_id = e[0].get<int32_t>();
    }
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
      const json& rs = j["rope_scaling"];
      const std::string rt = rs.value("rope_type", rs.value("type", ""));
      if (rt != "llama3") return core::Unimplemented(path + ": rope_scaling type '" + rt + "' (only llama3)");
      c.rope_scaling.factor = rs.at("factor").get<float>();
      c.rope_scaling.low_freq_factor = rs.value("low_freq_factor", 1.0f);
      c.rope_scaling.high_freq_factor = rs.value("high_freq_factor", 4.0f);
      c.rope_scaling.original_max_position = rs.value("original_max_position_embeddings", 8192);
    }
    RowOf(c).conventions(&c);
    c.qkv_bias = c.qkv_bias || j.value("attention_bias", false);
    if (c.CountLayers(LayerKind::kMoe) > 0) {
      RADIXLM_RETURN_IF_ERROR(ReadMoeHf(j, path, 0, &c.moe));
      // Qwen3MoeConfig's default is false; the published 30B-A3B states true.
      c.moe.norm_weights = j.value("norm_topk_prob", false);
      if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() && !j["mlp_only_layers"].empty())
        return core::Unimplemented(path + ": dense layers among the expert layers (mlp_only_layers)");
      if (j.value("decoder_sparse_step", 1) != 1)
        return core::Unimplemented(path + ": experts only every decoder_sparse_step blocks");
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  // Hugging Face Llama checkpoints are NeoX-ordered (it is GGUF's converter that permutes).
  c.rope_layout = kernels::RopeLayout::kNeox;
  return c;
}

HfTensorRef HfTensor(const ModelConfig&, const std::string& gguf_name) {
  // lm_head sits after the trunk's rules: no two rules match one name.
  static const std::vector<HfNameRule> kRules = LlamaTrunkRules("model.", "ffn_norm", {
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_q\.(weight|bias)$)"), "model.layers.$1.self_attn.q_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_k\.(weight|bias)$)"), "model.layers.$1.self_attn.k_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_v\.(weight|bias)$)"), "model.layers.$1.self_attn.v_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "model.layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_q_norm\.weight$)"), "model.layers.$1.self_attn.q_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_k_norm\.weight$)"), "model.layers.$1.self_attn.k_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate\.weight$)"), "model.layers.$1.mlp.gate_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_up\.weight$)"), "model.layers.$1.mlp.up_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "model.layers.$1.mlp.down_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.weight$)"), "model.layers.$1.mlp.gate.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up|down)_exps\.(\d+)\.weight$)"), "model.layers.$1.mlp.experts.$3.$2_proj.weight"},
  });
  return {MapHfName(kRules, gguf_name)};
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  WriteAttentionGguf(c, w);
  if (c.CountLayers(LayerKind::kMoe) > 0) WriteMoeGguf(c, w);
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json cfg = {{"model_type", c.arch}, {"num_hidden_layers", c.n_blocks}, {"intermediate_size", c.ffn_dim},
              {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
              {"rms_norm_eps", c.rms_eps}, {"rope_theta", c.rope_theta}, {"max_position_embeddings", c.max_context},
              {"hidden_act", "silu"}};
  if (c.CountLayers(LayerKind::kMoe) > 0)
    cfg.update({{"num_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used},
                {"moe_intermediate_size", c.moe.ffn}, {"norm_topk_prob", c.moe.norm_weights},
                {"decoder_sparse_step", 1}, {"mlp_only_layers", json::array()},
                {"intermediate_size", c.ffn_dim > 0 ? c.ffn_dim : c.moe.ffn * c.moe.used}});
  if (c.rope_scaling.factor > 0)
    cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  return cfg;
}

// llama.cpp's converter permutes HF q/k rows so that interleaved RoPE equals HF's NeoX RoPE;
// this is its inverse (GGUF row h*hd + 2i + j  <-  HF row h*hd + j*hd/2 + i).
std::vector<float> UnpermuteLlamaRows(const std::vector<float>& w, int n_heads, int head_dim, int64_t cols) {
  std::vector<float> out(w.size());
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const int64_t g = int64_t{h} * head_dim + 2 * i + j, hf = int64_t{h} * head_dim + j * head_dim / 2 + i;
        std::copy(w.begin() + g * cols, w.begin() + (g + 1) * cols, out.begin() + hf * cols);
      }
  return out;
}

// Llama: GGUF rows are permuted for interleaved RoPE; the checkpoint's are not.
void LlamaHfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  for (NamedTensor& t : *tensors) {
    if (t.name.find("attn_q.weight") != std::string::npos) t.data = UnpermuteLlamaRows(t.data, c.n_heads, c.head_dim, c.d_model);
    if (t.name.find("attn_k.weight") != std::string::npos) t.data = UnpermuteLlamaRows(t.data, c.n_kv_heads, c.head_dim, c.d_model);
  }
}

void NoLayoutChange(const ModelConfig&, std::vector<NamedTensor>*) {}

ArchSpec Row(const char* name, const char* hf_class, void (*conventions)(ModelConfig*),
             void (*hf_layout)(const ModelConfig&, std::vector<NamedTensor>*)) {
  return MakeArch(name, {name}, hf_class, conventions, {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, hf_layout});
}

}  // namespace

const ArchSpec& LlamaArch() {
  static const ArchSpec a = Row("llama", "LlamaForCausalLM", kLlamaConventions, LlamaHfLayout);
  return a;
}
const ArchSpec& Qwen2Arch() {
  static const ArchSpec a = Row("qwen2", "Qwen2ForCausalLM", kQwen2Conventions, NoLayoutChange);
  return a;
}
const ArchSpec& Qwen3Arch() {
  static const ArchSpec a = Row("qwen3", "Qwen3ForCausalLM", kQwen3Conventions, NoLayoutChange);
  return a;
}
const ArchSpec& Qwen3MoeArch() {
  static const ArchSpec a = [] {
    ArchSpec s = Row("qwen3moe", "Qwen3MoeForCausalLM", Qwen3MoeConventions, SplitExpertTensors);
    s.hf_model_types = {"qwen3_moe"};
    return s;
  }();
  return a;
}

}  // namespace radixlm::models
