// Qwen3.5 / Qwen3.6 dense (GGUF qwen35; Hugging Face Qwen3_5ForConditionalGeneration's text
// model, model_type qwen3_5 / qwen3_5_text): blocks of a mixer then a SwiGLU MLP, the mixer a
// Gated DeltaNet (three blocks in four) or gated full attention (doubled q projection with a
// sigmoid output gate, q/k RMSNorm, partial NeoX rotary on the first rope_dim dims, GQA).
// Conventions where the two formats differ (llama.cpp's converter, conversion/qwen.py):
//  - RMSNorm weights: HF stores w and multiplies by (1 + w) (except the DeltaNet output norm);
//    GGUF stores 1 + w. radixlm keeps GGUF's, so an HF checkpoint's norms get +1 at load.
//  - ssm_a: GGUF stores -exp(A_log), HF A_log.
//  - value head j of a DeltaNet reads key head j % Hk in GGUF (the converter reorders the
//    value heads), j / (Hv / Hk) in HF (ModelConfig::gdn_tiled).
//  - the MLP's norm is GGUF's post_attention_norm (HF post_attention_layernorm).
// Multi-token-prediction blocks (GGUF blocks past block_count - nextn_predict_layers, HF
// mtp.*) and the vision tower (model.visual.*) are not read.
// qwen35moe (Qwen3.5 / 3.6-35B-A3B; HF qwen3_5_moe) is the same trunk with a mixture of experts
// in every block: softmax router, top-k always renormalised, SwiGLU experts, and a SwiGLU shared
// expert scaled by sigmoid(shared_expert_gate . x). HF checkpoints stack the experts
// (experts.gate_up_proj [E, 2I, H], gate rows first; experts.down_proj [E, H, I]).
#include <cmath>
#include <tuple>

#include "models/arch.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

void Conventions(ModelConfig* c) {
  c->qk_norm = true;
  c->qkv_bias = false;
  c->rope_layout = kernels::RopeLayout::kNeox;
  c->use_rope = true;
  c->attn_output_gate = true;
  c->mlp_norm_tensor = "post_attention_norm";
  c->ssm_conv_bias = false;
  c->block_per_sublayer = false;
  c->mlp_act = ModelConfig::MlpAct::kSiluGated;
  c->hf_tensor_prefix = "model.language_model.";  // the multimodal checkpoint's (FromHf reads which)
}

void MoeConventions(ModelConfig* c) {
  Conventions(c);
  UseExperts(c);
  c->moe.gating = MoeConfig::Gating::kSoftmax;
  c->moe.norm_weights = true;  // both llama.cpp and Qwen3_5MoeSparseMoeBlock renormalise
  c->moe.shared_gate = true;
}
bool IsMoe(const ModelConfig& c) { return c.arch == "qwen35moe"; }

// Blocks from their mixers: a DeltaNet or attention, each followed by the MLP.
void SetLayers(const std::vector<bool>& recurrent, ModelConfig* c) {
  c->layers.clear();
  for (bool r : recurrent) {
    c->layers.push_back(r ? LayerKind::kDeltaNet : LayerKind::kAttention);
    c->layers.push_back(LayerKind::kMlp);
  }
  c->n_blocks = static_cast<int>(recurrent.size());
}

std::vector<bool> EveryNthIsAttention(int blocks, int64_t interval) {
  std::vector<bool> r;
  for (int i = 0; i < blocks; ++i) r.push_back(interval <= 0 || (i + 1) % interval != 0);
  return r;
}

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_ASSIGN_OR_RETURN(c.arch, g.GetString("general.architecture"));
  Conventions(&c);
  const std::string a = c.arch + ".";
  const StatusOr<std::string> name = g.GetString("general.name");
  c.name = name.ok() ? *name : g.path();
  auto size = [&](const std::string& key, int64_t hi, int* out) -> core::Status {
    RADIXLM_ASSIGN_OR_RETURN(int64_t v, g.GetInt(a + key));
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + key, v, 1, hi));
    *out = static_cast<int>(v);
    return core::Status::Ok();
  };
  int all_blocks = 0;
  RADIXLM_RETURN_IF_ERROR(size("embedding_length", kMaxDim, &c.d_model));
  RADIXLM_RETURN_IF_ERROR(size("block_count", kMaxBlocks, &all_blocks));
  if (IsMoe(c)) c.ffn_dim = static_cast<int>(std::clamp<int64_t>(g.GetIntOr(a + "feed_forward_length", 0), 0, kMaxDim));
  else RADIXLM_RETURN_IF_ERROR(size("feed_forward_length", kMaxDim, &c.ffn_dim));
  RADIXLM_RETURN_IF_ERROR(size("attention.head_count", kMaxHeads, &c.n_heads));
  RADIXLM_RETURN_IF_ERROR(size("ssm.time_step_rank", kMaxHeads, &c.gdn_v_heads));
  RADIXLM_RETURN_IF_ERROR(size("ssm.group_count", kMaxHeads, &c.gdn_k_heads));
  RADIXLM_RETURN_IF_ERROR(size("ssm.state_size", 4096, &c.gdn_head_dim));
  RADIXLM_RETURN_IF_ERROR(size("ssm.conv_kernel", 64, &c.ssm_conv));
  if (g.GetIntOr(a + "ssm.inner_size", 0) != int64_t{c.gdn_v_heads} * c.gdn_head_dim)
    return core::Unimplemented(g.path() + ": Gated DeltaNet value heads of another size than its key heads (ssm.inner_size)");
  c.n_kv_heads = static_cast<int>(g.GetIntOr(a + "attention.head_count_kv", c.n_heads));
  c.head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", c.d_model / c.n_heads));
  c.rope_dim = static_cast<int>(g.GetIntOr(a + "rope.dimension_count", c.head_dim / 4));
  c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 10000.0);
  if (const formats::GgufValue* s = g.Find(a + "rope.dimension_sections"))
    for (const formats::GgufValue& v : s->array) c.rope_sections.push_back(static_cast<int>(v.AsInt()));
  RADIXLM_ASSIGN_OR_RETURN(const double eps, g.GetFloat(a + "attention.layer_norm_rms_epsilon"));
  c.rms_eps = static_cast<float>(eps);
  c.max_context = g.GetIntOr(a + "context_length", 262144);
  const int64_t mtp = g.GetIntOr(a + "nextn_predict_layers", 0);
  if (mtp < 0 || mtp >= all_blocks) return core::DataLoss(g.path() + ": nextn_predict_layers " + std::to_string(mtp));
  const int blocks = all_blocks - static_cast<int>(mtp);
  std::vector<bool> recurrent = EveryNthIsAttention(blocks, g.GetIntOr(a + "full_attention_interval", 4));
  if (const formats::GgufValue* r = g.Find(a + "attention.recurrent_layers")) {
    if (static_cast<int64_t>(r->array.size()) != all_blocks)
      return core::DataLoss(g.path() + ": attention.recurrent_layers has " + std::to_string(r->array.size()) + " entries for " +
                            std::to_string(all_blocks) + " blocks");
    for (int i = 0; i < blocks; ++i) recurrent[i] = r->array[i].AsInt() != 0;
  }
  SetLayers(recurrent, &c);
  c.gdn_tiled = true;
  RADIXLM_RETURN_IF_ERROR(ReadGgufVocabulary(g, &c));
  if (IsMoe(c)) {
    MoeConventions(&c);
    const int64_t used = g.GetIntOr(a + "expert_used_count", 0);
    RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c.arch, used > 0 ? c.ffn_dim / used : 0, &c.moe));
    c.moe.norm_weights = true;
    c.moe.weights_scale = 1.0f;  // llama.cpp's qwen35moe reads neither key
    if (c.moe.shared_ffn == 0) c.moe.shared_ffn = c.ffn_dim;  // llama.cpp's fallback
    if (c.moe.shared_ffn == 0) return core::DataLoss(g.path() + ": the shared expert has no size (expert_shared_feed_forward_length)");
  }
  return c;
}

// The RoPE parameters: in rope_parameters (transformers 5) or at the text config's top level.
void ReadRope(const json& t, ModelConfig* c) {
  const json& r = t.contains("rope_parameters") && t["rope_parameters"].is_object() ? t["rope_parameters"] : t;
  c->rope_theta = r.value("rope_theta", t.value("rope_theta", 10000000.0));
  const double partial = r.value("partial_rotary_factor", t.value("partial_rotary_factor", 0.25));
  c->rope_dim = static_cast<int>(c->head_dim * partial);
  const json* sections = r.contains("mrope_section") ? &r["mrope_section"] : nullptr;
  if (!sections && t.contains("rope_scaling") && t["rope_scaling"].is_object() && t["rope_scaling"].contains("mrope_section"))
    sections = &t["rope_scaling"]["mrope_section"];
  if (sections && sections->is_array()) {
    for (const json& s : *sections) c->rope_sections.push_back(s.get<int>());
    while (c->rope_sections.size() < 4) c->rope_sections.push_back(0);
  }
}

StatusOr<ModelConfig> FromHf(const json& j, const std::string& path, const std::string& dir) {
  ModelConfig c;
  const std::string type = j.value("model_type", "");
  c.arch = type.rfind("qwen3_5_moe", 0) == 0 ? "qwen35moe" : "qwen35";
  c.name = dir;
  Conventions(&c);
  // The multimodal checkpoint nests the language model's config and tensors.
  const bool nested = j.contains("text_config") && j["text_config"].is_object();
  const json& t = nested ? j["text_config"] : j;
  c.hf_tensor_prefix = nested || type == "qwen3_5" || type == "qwen3_5_moe" ? "model.language_model." : "model.";
  try {
    c.vocab_size = t.at("vocab_size").get<int64_t>();
    // The MoE's dense width is unused (and may be absent).
    if (IsMoe(c)) c.ffn_dim = static_cast<int>(std::clamp<int64_t>(t.value("intermediate_size", int64_t{0}), 0, kMaxDim));
    else {
      const int64_t v = t.at("intermediate_size").get<int64_t>();
      RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": intermediate_size", v, 1, kMaxDim));
      c.ffn_dim = static_cast<int>(v);
    }
    for (auto [key, out, hi] : {std::tuple{"hidden_size", &c.d_model, kMaxDim}, {"num_hidden_layers", &c.n_blocks, kMaxBlocks},
                                {"num_attention_heads", &c.n_heads, kMaxHeads},
                                {"linear_num_key_heads", &c.gdn_k_heads, kMaxHeads},
                                {"linear_num_value_heads", &c.gdn_v_heads, kMaxHeads},
                                {"linear_key_head_dim", &c.gdn_head_dim, int64_t{4096}},
                                {"linear_conv_kernel_dim", &c.ssm_conv, int64_t{64}}}) {
      const int64_t v = t.at(key).get<int64_t>();
      RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": " + key, v, 1, hi));
      *out = static_cast<int>(v);
    }
    if (t.value("linear_value_head_dim", c.gdn_head_dim) != c.gdn_head_dim)
      return core::Unimplemented(path + ": Gated DeltaNet value heads of another size than its key heads");
    c.n_kv_heads = t.value("num_key_value_heads", c.n_heads);
    c.head_dim = t.contains("head_dim") ? t["head_dim"].get<int>() : c.d_model / c.n_heads;
    c.rms_eps = t.value("rms_norm_eps", 1e-6f);
    c.max_context = t.value("max_position_embeddings", int64_t{262144});
    c.tied_embeddings = t.value("tie_word_embeddings", j.value("tie_word_embeddings", false));
    if (!t.value("attn_output_gate", true)) return core::Unimplemented(path + ": Qwen3.5 attention without its output gate");
    ReadRope(t, &c);
    std::vector<bool> recurrent = EveryNthIsAttention(c.n_blocks, t.value("full_attention_interval", 4));
    if (t.contains("layer_types")) {
      const json& types = t["layer_types"];
      if (!types.is_array() || static_cast<int64_t>(types.size()) != c.n_blocks)
        return core::DataLoss(path + ": layer_types must list num_hidden_layers entries");
      for (int i = 0; i < c.n_blocks; ++i) {
        const std::string kind = types[i].get<std::string>();
        if (kind != "linear_attention" && kind != "full_attention") return core::Unimplemented(path + ": layer type '" + kind + "'");
        recurrent[i] = kind == "linear_attention";
      }
    }
    SetLayers(recurrent, &c);
    c.gdn_tiled = false;  // HF: value head j reads key head j / (Hv / Hk)
    const json& eos = t.contains("eos_token_id") ? t["eos_token_id"] : j.value("eos_token_id", json());
    if (eos.is_number_integer()) c.eos_id = eos.get<int32_t>();
    if (IsMoe(c)) {
      MoeConventions(&c);
      RADIXLM_RETURN_IF_ERROR(ReadMoeHf(t, path, 0, &c.moe));
      c.moe.norm_weights = true;
      c.moe.weights_scale = 1.0f;
      if (c.moe.shared_ffn == 0) return core::Unimplemented(path + ": Qwen3.5 MoE without its shared expert");
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

// HF norms multiply by (1 + w): +1 at load (the DeltaNet output norm is plain).
HfTensorRef HfTensor(const ModelConfig& c, const std::string& gguf_name) {
  static const std::vector<HfNameRule> kRules = LlamaTrunkRules("", "post_attention_norm", {
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "layers.$1.self_attn.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k)_norm\.weight$)"), "layers.$1.self_attn.$2_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up|down)\.weight$)"), "layers.$1.mlp.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_qkv\.weight$)"), "layers.$1.linear_attn.in_proj_qkv.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_gate\.weight$)"), "layers.$1.linear_attn.in_proj_z.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_beta\.weight$)"), "layers.$1.linear_attn.in_proj_b.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_alpha\.weight$)"), "layers.$1.linear_attn.in_proj_a.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_conv1d\.weight$)"), "layers.$1.linear_attn.conv1d.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_dt\.bias$)"), "layers.$1.linear_attn.dt_bias"},
      {std::regex(R"(^blk\.(\d+)\.ssm_a$)"), "layers.$1.linear_attn.A_log"},
      {std::regex(R"(^blk\.(\d+)\.ssm_norm\.weight$)"), "layers.$1.linear_attn.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_out\.weight$)"), "layers.$1.linear_attn.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.weight$)"), "layers.$1.mlp.gate.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up|down)_shexp\.weight$)"), "layers.$1.mlp.shared_expert.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp_shexp\.weight$)"), "layers.$1.mlp.shared_expert_gate.weight"},
      // whole stacked tensors (export): gate_exps carries gate | up (HfLayout)
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_exps\.weight$)"), "layers.$1.mlp.experts.gate_up_proj"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down_exps\.weight$)"), "layers.$1.mlp.experts.down_proj"},
  });
  if (gguf_name == "output.weight") return {"lm_head.weight"};
  // One expert: a matrix of the stacked gate_up_proj [E, 2I, H] (gate rows first) or down_proj.
  if (const HfTensorRef e = StackedExpert(gguf_name); e.expert >= 0) {
    const bool down = e.name.find("ffn_down_exps") != std::string::npos;
    HfTensorRef ref{c.hf_tensor_prefix + MapHfName(kRules, down ? e.name : std::regex_replace(e.name, std::regex("_up_exps"), "_gate_exps"))};
    ref.expert = e.expert;
    if (!down) {
      ref.row_begin = e.name.find("ffn_up_exps") != std::string::npos ? c.moe.ffn : 0;
      ref.rows = c.moe.ffn;
    }
    return ref;
  }
  HfTensorRef ref{c.hf_tensor_prefix + MapHfName(kRules, gguf_name)};
  const bool plus_one = gguf_name.find("norm.weight") != std::string::npos && gguf_name.find("ssm_norm") == std::string::npos;
  if (plus_one) ref.add = 1.0f;
  return ref;
}

// llama.cpp's IMROPE sections for a rope_dim: Qwen's [11, 11, 10] of 32 pairs, scaled.
std::vector<int> Sections(const ModelConfig& c) {
  if (!c.rope_sections.empty()) return c.rope_sections;
  const int pairs = (c.rope_dim > 0 ? c.rope_dim : c.head_dim) / 2;
  const int t = (pairs + 2) / 3, h = (pairs + 1) / 3;
  return {t, h, pairs - t - h, 0};
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufType;
  using formats::GgufValue;
  const std::string a = c.arch + ".";
  WriteAttentionGguf(c, w);
  std::vector<GgufValue> sections;
  for (int s : Sections(c)) sections.push_back(GgufValue::I32(s));
  w->Set(a + "rope.dimension_sections", GgufValue::Array(GgufType::kI32, sections));
  w->Set(a + "ssm.conv_kernel", GgufValue::U32(c.ssm_conv));
  w->Set(a + "ssm.inner_size", GgufValue::U32(c.gdn_v_heads * c.gdn_head_dim));
  w->Set(a + "ssm.state_size", GgufValue::U32(c.gdn_head_dim));
  w->Set(a + "ssm.time_step_rank", GgufValue::U32(c.gdn_v_heads));
  w->Set(a + "ssm.group_count", GgufValue::U32(c.gdn_k_heads));
  std::vector<GgufValue> recurrent;
  for (LayerKind k : c.layers)
    if (!IsFeedForward(k)) recurrent.push_back(GgufValue::Bool(k == LayerKind::kDeltaNet));
  w->Set(a + "attention.recurrent_layers", GgufValue::Array(GgufType::kBool, recurrent));
  w->Set(a + "full_attention_interval", GgufValue::U32(4));
  if (IsMoe(c)) WriteMoeGguf(c, w);
  if (!c.gdn_tiled && c.gdn_v_heads != c.gdn_k_heads)
    return core::Unimplemented("a GGUF keeps the DeltaNet's value heads tiled; " + c.name + " groups them");
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json types = json::array();
  for (LayerKind k : c.layers)
    if (!IsFeedForward(k)) types.push_back(k == LayerKind::kDeltaNet ? "linear_attention" : "full_attention");
  const std::vector<int> s = Sections(c);
  json text = {{"model_type", "qwen3_5_text"}, {"vocab_size", c.vocab_size}, {"hidden_size", c.d_model},
               {"num_hidden_layers", c.n_blocks}, {"intermediate_size", c.ffn_dim}, {"num_attention_heads", c.n_heads},
               {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim}, {"rms_norm_eps", c.rms_eps},
               {"max_position_embeddings", c.max_context}, {"tie_word_embeddings", c.tied_embeddings},
               {"attn_output_gate", true}, {"hidden_act", "silu"}, {"layer_types", types}, {"full_attention_interval", 4},
               {"linear_num_key_heads", c.gdn_k_heads}, {"linear_num_value_heads", c.gdn_v_heads},
               {"linear_key_head_dim", c.gdn_head_dim}, {"linear_value_head_dim", c.gdn_head_dim},
               {"linear_conv_kernel_dim", c.ssm_conv},
               {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta},
                                    {"partial_rotary_factor", double(c.rope_dim) / c.head_dim},
                                    {"mrope_section", {s[0], s[1], s[2]}}, {"mrope_interleaved", true}}}};
  if (c.eos_id >= 0) text["eos_token_id"] = c.eos_id;
  if (IsMoe(c))
    text.update({{"model_type", "qwen3_5_moe_text"}, {"num_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used},
                 {"moe_intermediate_size", c.moe.ffn}, {"shared_expert_intermediate_size", c.moe.shared_ffn}});
  return {{"text_config", text}};
}

// Rows [first, first + heads x per) of t, per value head, from GGUF's tiled order (head j = r Hk
// + g) to HF's grouped one (head g R + r, R = Hv / Hk).
void GroupValueHeads(const ModelConfig& c, int64_t first, int64_t per, NamedTensor* t) {
  const int64_t hv = c.gdn_v_heads, hk = c.gdn_k_heads, R = hv / hk;
  const int64_t cols = t->shape.size() > 1 ? t->data.size() / t->shape[0] : 1;
  const std::vector<float> old = t->data;
  for (int64_t hf = 0; hf < hv; ++hf) {
    const int64_t j = (hf % R) * hk + hf / R;
    std::copy(old.begin() + (first + j * per) * cols, old.begin() + (first + (j + 1) * per) * cols,
              t->data.begin() + (first + hf * per) * cols);
  }
}

// The same for columns (ssm_out's inputs are the value heads).
void GroupValueHeadColumns(const ModelConfig& c, NamedTensor* t) {
  const int64_t hv = c.gdn_v_heads, hk = c.gdn_k_heads, R = hv / hk, per = c.gdn_head_dim, cols = t->shape[1];
  const std::vector<float> old = t->data;
  for (int64_t row = 0; row < t->shape[0]; ++row)
    for (int64_t hf = 0; hf < hv; ++hf) {
      const int64_t j = (hf % R) * hk + hf / R;
      std::copy(old.begin() + row * cols + j * per, old.begin() + row * cols + (j + 1) * per,
                t->data.begin() + row * cols + hf * per);
    }
}

// To the checkpoint's layouts: norms back to w (from 1 + w), A_log, conv1d [conv_dim, 1, K],
// and GGUF's tiled value heads in the grouped order HF expects.
void HfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  const int64_t key_dim = int64_t{c.gdn_k_heads} * c.gdn_head_dim, S = c.gdn_head_dim;
  auto ends = [](const std::string& name, const char* suffix) {
    const std::string s = suffix;
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  for (NamedTensor& t : *tensors) {
    if (c.gdn_v_heads != c.gdn_k_heads) {
      if (ends(t.name, ".attn_qkv.weight") || ends(t.name, ".ssm_conv1d.weight")) GroupValueHeads(c, 2 * key_dim, S, &t);
      if (ends(t.name, ".attn_gate.weight")) GroupValueHeads(c, 0, S, &t);
      if (ends(t.name, ".ssm_beta.weight") || ends(t.name, ".ssm_alpha.weight") || ends(t.name, ".ssm_dt.bias") ||
          ends(t.name, ".ssm_a"))
        GroupValueHeads(c, 0, 1, &t);
      if (ends(t.name, ".ssm_out.weight")) GroupValueHeadColumns(c, &t);
    }
    const bool norm = t.name.find("norm.weight") != std::string::npos && t.name.find("ssm_norm") == std::string::npos;
    if (norm)
      for (float& x : t.data) x -= 1.0f;
    if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0)
      for (float& x : t.data) x = std::log(-x);
    if (t.name.find("ssm_conv1d.weight") != std::string::npos) t.shape = {t.shape[0], 1, t.shape[1]};
  }
  // Experts: gate [E, I, H] and up [E, I, H] become gate_up_proj [E, 2I, H] (under gate's name).
  for (size_t i = 0; i < tensors->size(); ++i) {
    NamedTensor& g = (*tensors)[i];
    if (!ends(g.name, ".ffn_gate_exps.weight") || i + 1 >= tensors->size()) continue;
    FuseExpertGateUp(&g, (*tensors)[i + 1]);
    tensors->erase(tensors->begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
}

}  // namespace

const ArchSpec& Qwen35MoeArch() {
  static const ArchSpec a = [] {
    ArchSpec s = Qwen35Arch();
    s.gguf_name = "qwen35moe";
    s.hf_model_types = {"qwen3_5_moe", "qwen3_5_moe_text"};
    s.hf_class = "Qwen3_5MoeForConditionalGeneration";
    s.conventions = MoeConventions;
    return s;
  }();
  return a;
}

const ArchSpec& Qwen35Arch() {
  static const ArchSpec a = MakeArch("qwen35", {"qwen3_5", "qwen3_5_text"}, "Qwen3_5ForConditionalGeneration", Conventions,
                                      {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
