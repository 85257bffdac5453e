// LFM2 / LFM2.5 (GGUF lfm2; Liquid AI's Lfm2ForCausalLM) and LFM2-8B-A1B (lfm2moe;
// Lfm2MoeForCausalLM), as llama.cpp's lfm2 / lfm2moe read and compute them:
//   - blocks of a mixer then a feed-forward, both pre-norm residual: the mixer is a gated short
//     convolution (LayerKind::kShortConv, kernel shortconv.l_cache) where
//     attention.head_count_kv (an array) is 0, else GQA attention with q/k RMSNorm, NeoX RoPE
//     and scale 1/sqrt(head_dim); the mixer's norm is attn_norm (HF operator_norm);
//   - the feed-forward is a SwiGLU MLP (ffn_norm), or in lfm2moe past leading_dense_block_count
//     a mixture of experts: sigmoid gating (expert_gating_func 2), the choice ranked with
//     exp_probs_b, the chosen weights renormalised (expert_weights_norm) and scaled
//     (expert_weights_scale);
//   - the final norm is the tensor token_embd_norm (llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2);
//     embeddings are tied unless output.weight is present.
// Hugging Face folders (model_type lfm2 / lfm2_moe): layer_types ("conv" / "full_attention"),
// conv_L_cache, the MLP size as llama.cpp's converter derives it (block_auto_adjust_ff_dim:
// 2/3 of block_ff_dim, times block_ffn_dim_multiplier, rounded up to block_multiple_of), names
// operator_norm, conv.{in_proj,conv,out_proj}, self_attn.{q,k,v,out}_proj and
// {q,k}_layernorm, feed_forward.{w1,w3,w2} (gate, up, down), feed_forward.gate and expert_bias,
// feed_forward.experts.E.w1/w3/w2, embedding_norm (the final norm).
// Not read: the sliding-window variant (attention.sliding_window) and LFM2-ColBERT's dense_2 head.
#include <algorithm>

#include "models/arch.h"
#include "models/hybrid_config.h"
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
  c->mlp_act = ModelConfig::MlpAct::kSiluGated;
  c->mlp_norm_tensor = "ffn_norm";
  c->final_norm_tensor = "token_embd_norm";
  c->block_per_sublayer = false;
  if (c->short_conv == 0) c->short_conv = 3;
}

bool IsMoe(const ModelConfig& c) { return c.arch == "lfm2moe"; }

// The experts past the leading dense blocks (lfm2moe).
core::Status ReadExperts(const formats::GgufFile& g, ModelConfig* c) {
  const std::string a = c->arch + ".";
  RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c->arch, 0, &c->moe));
  const int64_t gating = g.GetIntOr(a + "expert_gating_func", 2);
  if (gating != 1 && gating != 2)
    return core::Unimplemented(g.path() + ": expert_gating_func " + std::to_string(gating) + " (lfm2moe reads 1 and 2)");
  c->moe.gating = gating == 1 ? MoeConfig::Gating::kSoftmax : MoeConfig::Gating::kSigmoid;
  c->moe.selection_bias = true;
  const int64_t dense = g.GetIntOr(a + "leading_dense_block_count", 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "leading_dense_block_count", dense, 0, c->n_blocks));
  int block = 0;
  for (LayerKind& k : c->layers) {
    if (IsFeedForward(k)) {
      if (block >= dense) k = LayerKind::kMoe;
      ++block;
    }
  }
  return core::Status::Ok();
}

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_RETURN_IF_ERROR(ReadGgufTrunk(g, 1, &c));
  const std::string a = c.arch + ".";
  RADIXLM_ASSIGN_OR_RETURN(const int64_t conv, g.GetInt(a + "shortconv.l_cache"));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "shortconv.l_cache", conv, 2, 64));
  const int64_t ffn = g.GetIntOr(a + "feed_forward_length", 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "feed_forward_length", ffn, IsMoe(c) ? 0 : 1, kMaxDim));
  if (g.GetIntOr(a + "attention.sliding_window", 0) > 0)
    return core::Unimplemented(g.path() + ": LFM2 with sliding-window attention is not supported yet");
  c.ffn_dim = static_cast<int>(ffn);
  c.short_conv = static_cast<int>(conv);
  c.head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", c.d_model / c.n_heads));
  c.rms_eps = static_cast<float>(g.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 1000000.0);
  c.max_context = g.GetIntOr(a + "context_length", 128000);
  for (int b = 0; b < c.n_blocks; ++b) {
    const int64_t kv = PerLayer(g, a + "attention.head_count_kv", b);
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.head_count_kv", kv, 0, kMaxHeads));
    if (kv > 0 && c.n_kv_heads > 0 && kv != c.n_kv_heads)
      return core::Unimplemented(g.path() + ": LFM2 attention layers with different kv head counts");
    if (kv > 0) c.n_kv_heads = static_cast<int>(kv);
    c.layers.push_back(kv == 0 ? LayerKind::kShortConv : LayerKind::kAttention);
    c.layers.push_back(LayerKind::kMlp);
  }
  if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;  // no attention layer: unused, but consistent
  Conventions(&c);
  if (IsMoe(c)) RADIXLM_RETURN_IF_ERROR(ReadExperts(g, &c));
  RADIXLM_RETURN_IF_ERROR(ReadGgufVocabulary(g, &c));
  return c;
}

// The dense MLP's size as llama.cpp's converter computes it (conversion/lfm2.py).
int64_t HfFeedForward(const json& j) {
  int64_t ff = j.contains("block_ff_dim") ? j["block_ff_dim"].get<int64_t>() : j.value("intermediate_size", int64_t{0});
  if (!j.value("block_auto_adjust_ff_dim", false)) return ff;
  ff = 2 * ff / 3;
  if (j.contains("block_ffn_dim_multiplier") && j["block_ffn_dim_multiplier"].is_number())
    ff = static_cast<int64_t>(j["block_ffn_dim_multiplier"].get<double>() * static_cast<double>(ff));
  const int64_t multiple = std::max<int64_t>(1, j.value("block_multiple_of", int64_t{256}));
  return multiple * ((ff + multiple - 1) / multiple);
}

// Which blocks attend: layer_types, else full_attn_idxs.
StatusOr<std::vector<bool>> HfAttentionBlocks(const json& j, const std::string& path, int blocks) {
  std::vector<bool> attn(blocks, false);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    if (static_cast<int>(j["layer_types"].size()) != blocks) return core::DataLoss(path + ": layer_types has the wrong length");
    for (int b = 0; b < blocks; ++b) attn[b] = j["layer_types"][b].get<std::string>() == "full_attention";
  } else if (j.contains("full_attn_idxs") && j["full_attn_idxs"].is_array()) {
    for (const json& i : j["full_attn_idxs"]) {
      const int64_t b = i.get<int64_t>();
      if (b < 0 || b >= blocks) return core::DataLoss(path + ": full_attn_idxs names a block that does not exist");
      attn[b] = true;
    }
  } else {
    return core::DataLoss(path + ": LFM2 needs layer_types or full_attn_idxs");
  }
  return attn;
}

StatusOr<ModelConfig> FromHf(const json& j, const std::string& path, const std::string& dir) {
  ModelConfig c;
  c.name = dir;
  try {
    c.arch = j.at("model_type").get<std::string>() == "lfm2_moe" ? "lfm2moe" : "lfm2";
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    c.d_model = static_cast<int>(j.at("hidden_size").get<int64_t>());
    c.n_blocks = static_cast<int>(j.at("num_hidden_layers").get<int64_t>());
    c.n_heads = static_cast<int>(j.at("num_attention_heads").get<int64_t>());
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": hidden_size", c.d_model, 1, kMaxDim));
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": num_hidden_layers", c.n_blocks, 1, kMaxBlocks));
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": num_attention_heads", c.n_heads, 1, kMaxHeads));
    c.n_kv_heads = static_cast<int>(j.value("num_key_value_heads", int64_t{c.n_heads}));
    c.head_dim = c.d_model / c.n_heads;
    c.ffn_dim = static_cast<int>(std::clamp<int64_t>(HfFeedForward(j), 0, kMaxDim));
    c.short_conv = static_cast<int>(j.value("conv_L_cache", int64_t{3}));
    if (j.value("conv_bias", false)) return core::Unimplemented(path + ": LFM2 with a conv bias");
    c.rms_eps = j.value("norm_eps", 1e-5f);
    c.rope_theta = j.value("rope_theta", 1000000.0);
    c.max_context = j.value("max_position_embeddings", int64_t{128000});
    c.tied_embeddings = j.value("tie_word_embeddings", j.value("tie_embedding", true));
    c.bos_id = j.contains("bos_token_id") && j["bos_token_id"].is_number_integer() ? j["bos_token_id"].get<int32_t>() : -1;
    c.eos_id = j.contains("eos_token_id") && j["eos_token_id"].is_number_integer() ? j["eos_token_id"].get<int32_t>() : -1;
    RADIXLM_ASSIGN_OR_RETURN(const std::vector<bool> attn, HfAttentionBlocks(j, path, c.n_blocks));
    for (bool a : attn) {
      c.layers.push_back(a ? LayerKind::kAttention : LayerKind::kShortConv);
      c.layers.push_back(LayerKind::kMlp);
    }
    Conventions(&c);
    if (IsMoe(c)) {
      RADIXLM_RETURN_IF_ERROR(ReadMoeHf(j, path, 0, &c.moe));
      c.moe.gating = MoeConfig::Gating::kSigmoid;
      c.moe.selection_bias = j.value("use_expert_bias", true);
      const int64_t dense = j.value("num_dense_layers", int64_t{0});
      RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": num_dense_layers", dense, 0, c.n_blocks));
      for (size_t i = 2 * dense + 1; i < c.layers.size(); i += 2) c.layers[i] = LayerKind::kMoe;
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

HfTensorRef HfTensor(const ModelConfig&, const std::string& gguf_name) {
  static const std::vector<HfNameRule> kRules = {
      {std::regex(R"(^token_embd\.weight$)"), "model.embed_tokens.weight"},
      {std::regex(R"(^token_embd_norm\.weight$)"), "model.embedding_norm.weight"},
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), "model.layers.$1.operator_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_norm\.weight$)"), "model.layers.$1.ffn_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.shortconv\.(in_proj|conv|out_proj)\.weight$)"), "model.layers.$1.conv.$2.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "model.layers.$1.self_attn.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "model.layers.$1.self_attn.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k)_norm\.weight$)"), "model.layers.$1.self_attn.$2_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate\.weight$)"), "model.layers.$1.feed_forward.w1.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_up\.weight$)"), "model.layers.$1.feed_forward.w3.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "model.layers.$1.feed_forward.w2.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.weight$)"), "model.layers.$1.feed_forward.gate.weight"},
      {std::regex(R"(^blk\.(\d+)\.exp_probs_b\.bias$)"), "model.layers.$1.feed_forward.expert_bias"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_exps\.(\d+)\.weight$)"), "model.layers.$1.feed_forward.experts.$2.w1.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_up_exps\.(\d+)\.weight$)"), "model.layers.$1.feed_forward.experts.$2.w3.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down_exps\.(\d+)\.weight$)"), "model.layers.$1.feed_forward.experts.$2.w2.weight"},
  };
  return {MapHfName(kRules, gguf_name)};
}

// Export (random presets): the keys FromGguf reads.
core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufType;
  using formats::GgufValue;
  const std::string a = c.arch + ".";
  WriteAttentionGguf(c, w);
  w->Set(a + "shortconv.l_cache", GgufValue::U32(c.short_conv));
  std::vector<GgufValue> kv;
  for (LayerKind k : c.layers)
    if (!IsFeedForward(k)) kv.push_back(GgufValue::U32(k == LayerKind::kAttention ? c.n_kv_heads : 0));
  w->Set(a + "attention.head_count_kv", GgufValue::Array(GgufType::kU32, std::move(kv)));
  if (IsMoe(c)) {
    WriteMoeGguf(c, w);  // with expert_gating_func
    int dense = 0;
    for (LayerKind k : c.layers) dense += k == LayerKind::kMlp;
    w->Set(a + "leading_dense_block_count", GgufValue::U32(dense));
  }
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json types = json::array();
  for (LayerKind k : c.layers)
    if (!IsFeedForward(k)) types.push_back(k == LayerKind::kAttention ? "full_attention" : "conv");
  json cfg = {{"num_hidden_layers", c.n_blocks}, {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
              {"block_ff_dim", c.ffn_dim}, {"intermediate_size", c.ffn_dim}, {"block_auto_adjust_ff_dim", false},
              {"conv_L_cache", c.short_conv}, {"conv_bias", false}, {"norm_eps", c.rms_eps}, {"rope_theta", c.rope_theta},
              {"max_position_embeddings", c.max_context}, {"layer_types", types}};
  if (IsMoe(c)) {
    int dense = 0;
    for (LayerKind k : c.layers) dense += k == LayerKind::kMlp;
    cfg.update({{"num_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used}, {"moe_intermediate_size", c.moe.ffn},
                {"num_dense_layers", dense}, {"norm_topk_prob", c.moe.norm_weights},
                {"routed_scaling_factor", c.moe.weights_scale}, {"use_expert_bias", c.moe.selection_bias}});
  }
  return cfg;
}

// The conv kernel as HF's Conv1d stores it, [d_model, 1, L]; experts one module each.
void HfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  SplitExpertTensors(c, tensors);
  for (NamedTensor& t : *tensors)
    if (t.name.find("shortconv.conv.weight") != std::string::npos) t.shape = {c.d_model, 1, c.short_conv};
}

}  // namespace

const ArchSpec& Lfm2Arch() {
  static const ArchSpec a =
      MakeArch("lfm2", {"lfm2"}, "Lfm2ForCausalLM", Conventions, {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

const ArchSpec& Lfm2MoeArch() {
  static const ArchSpec a = MakeArch("lfm2moe", {"lfm2_moe"}, "Lfm2MoeForCausalLM", Conventions,
                                     {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
