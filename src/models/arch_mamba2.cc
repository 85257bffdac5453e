// Mamba2 (Mamba2ForCausalLM: every block a Mamba2 mixer) and Nemotron-H (NemotronHForCausalLM:
// one sublayer per block from a pattern of Mamba2 'M', attention without positions '*' and
// relu² MLP '-'). Both name their checkpoints' tensors under "backbone." and give every
// sublayer a block of its own with one norm. nemotron_h_moe (Nemotron-3-Nano-30B-A3B; HF
// nemotron_h with 'E' blocks) puts a mixture of experts in the feed-forward blocks: sigmoid
// router, a per-expert correction bias that only ranks, group-limited top-k, weights optionally
// renormalised then times routed_scaling_factor; relu² experts and an ungated relu² shared
// expert. Latent expert projections (moe_latent_size, the Super models) are not supported.
#include "models/arch.h"
#include "models/hybrid_config.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

void Mamba2Conventions(ModelConfig* c) {
  c->block_per_sublayer = true;
  c->use_rope = false;
  c->qk_norm = c->qkv_bias = false;
}
void NemotronHConventions(ModelConfig* c) {
  Mamba2Conventions(c);
  c->mlp_act = ModelConfig::MlpAct::kRelu2;
}
void NemotronHMoeConventions(ModelConfig* c) {
  NemotronHConventions(c);
  UseExperts(c);
  c->moe.gating = MoeConfig::Gating::kSigmoid;
  c->moe.selection_bias = true;
  c->moe.shared_gate = false;
}
bool IsMamba2(const ModelConfig& c) { return ArchByGguf(c.arch) == &Mamba2Arch(); }
bool IsMoe(const ModelConfig& c) { return c.arch == "nemotron_h_moe"; }

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_ASSIGN_OR_RETURN(c.arch, g.GetString("general.architecture"));
  RADIXLM_RETURN_IF_ERROR(ReadHybridGguf(g, &c));
  ArchByGguf(c.arch)->conventions(&c);
  const std::string a = c.arch + ".";
  if (IsMamba2(c)) {
    c.layers.assign(c.n_blocks, LayerKind::kMamba2);
    return c;
  }
  // Nemotron-H: the kind of each block from llama.cpp's per-layer arrays (kv heads > 0:
  // attention; MLP width > 0: MLP; neither: Mamba2).
  for (int64_t i = 0; i < c.n_blocks; ++i) {
    if (PerLayer(g, a + "attention.head_count_kv", i) > 0) c.layers.push_back(LayerKind::kAttention);
    else if (PerLayer(g, a + "feed_forward_length", i) > 0) c.layers.push_back(LayerKind::kMlp);
    else c.layers.push_back(LayerKind::kMamba2);
  }
  if (IsMoe(c)) {  // llama.cpp: every feed-forward block is experts
    if (g.GetIntOr(a + "moe_latent_size", 0) > 0)
      return core::Unimplemented(g.path() + ": latent expert projections (moe_latent_size)");
    c.moe.norm_weights = false;  // expert_weights_norm's default
    const int64_t used = g.GetIntOr(a + "expert_used_count", 0);
    RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c.arch, used > 0 ? c.ffn_dim / used : 0, &c.moe));
    c.ffn_dim = 0;
    NemotronHMoeConventions(&c);
  }
  return c;
}

StatusOr<ModelConfig> FromHf(const json& j, const std::string& path, const std::string& dir) {
  ModelConfig c;
  c.arch = ArchByHfType(j.at("model_type").get<std::string>())->gguf_name;
  ArchByGguf(c.arch)->conventions(&c);
  // An untrusted size, checked before any arithmetic uses it.
  auto sized = [&](const char* key, int64_t value, int64_t hi, int* out) {
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": " + key, value, 1, hi));
    *out = static_cast<int>(value);
    return core::Status::Ok();
  };
  try {
    RADIXLM_RETURN_IF_ERROR(ReadHybridHf(j, path, dir, &c));
    c.ssm_conv_bias = j.value("use_conv_bias", true);
    c.rms_eps = j.value("layer_norm_epsilon", 1e-5f);
    if (IsMamba2(c)) {
      RADIXLM_RETURN_IF_ERROR(sized("num_heads", j.at("num_heads").get<int64_t>(), kMaxHeads, &c.ssm_heads));
      c.ssm_head_dim = static_cast<int>(FirstNumber(j, {"head_dim"}, 64));
      c.ssm_state = static_cast<int>(FirstNumber(j, {"state_size"}, 128));
      c.ssm_groups = static_cast<int>(FirstNumber(j, {"n_groups"}, 1));
      c.ssm_conv = static_cast<int>(FirstNumber(j, {"conv_kernel"}, 4));
      RADIXLM_RETURN_IF_ERROR(sized("num_hidden_layers", j.at("num_hidden_layers").get<int64_t>(), kMaxBlocks, &c.n_blocks));
      c.layers.assign(c.n_blocks, LayerKind::kMamba2);
      c.ssm_norm_group = 0;  // HF's MambaRMSNormGated normalises the whole d_inner
      return c;
    }
    RADIXLM_RETURN_IF_ERROR(sized("mamba_num_heads", FirstNumber(j, {"mamba_num_heads"}, 0), kMaxHeads, &c.ssm_heads));
    RADIXLM_RETURN_IF_ERROR(sized("mamba_head_dim", FirstNumber(j, {"mamba_head_dim"}, 64), 4096, &c.ssm_head_dim));
    c.ssm_state = static_cast<int>(FirstNumber(j, {"ssm_state_size", "mamba_d_state"}, 128));
    RADIXLM_RETURN_IF_ERROR(sized("n_groups", FirstNumber(j, {"n_groups", "mamba_n_groups"}, 1), kMaxHeads, &c.ssm_groups));
    c.ssm_conv = static_cast<int>(FirstNumber(j, {"conv_kernel", "mamba_d_conv"}, 4));
    c.ssm_norm_group = c.ssm_heads * c.ssm_head_dim / c.ssm_groups;  // grouped (Zamba2RMSNormGated)
    RADIXLM_RETURN_IF_ERROR(sized("num_attention_heads", j.at("num_attention_heads").get<int64_t>(), kMaxHeads, &c.n_heads));
    c.n_kv_heads = static_cast<int>(FirstNumber(j, {"num_key_value_heads"}, c.n_heads));
    c.head_dim = static_cast<int>(FirstNumber(j, {"head_dim", "attention_head_dim"}, c.d_model / c.n_heads));
    c.ffn_dim = static_cast<int>(FirstNumber(j, {"intermediate_size"}, 0));
    if (j.value("mlp_hidden_act", std::string("relu2")) != "relu2")
      return core::Unimplemented(path + ": Nemotron-H MLP activation other than relu2");
    const std::string pattern = j.at("hybrid_override_pattern").get<std::string>();
    const bool moe = pattern.find('E') != std::string::npos;
    for (char ch : pattern) {
      if (ch == 'M') c.layers.push_back(LayerKind::kMamba2);
      else if (ch == '*') c.layers.push_back(LayerKind::kAttention);
      else if (ch == '-' && !moe) c.layers.push_back(LayerKind::kMlp);
      else if (ch == 'E') c.layers.push_back(LayerKind::kMoe);
      else return core::Unimplemented(path + ": hybrid_override_pattern layer '" + std::string(1, ch) + "'" +
                                      (ch == '-' ? " (dense MLP blocks beside expert blocks)" : ""));
    }
    c.n_blocks = static_cast<int>(c.layers.size());
    if (moe) {
      if (FirstNumber(j, {"moe_latent_size"}, 0) > 0)
        return core::Unimplemented(path + ": latent expert projections (moe_latent_size)");
      c.arch = "nemotron_h_moe";
      c.moe.norm_weights = false;
      RADIXLM_RETURN_IF_ERROR(ReadMoeHf(j, path, 0, &c.moe));
      c.ffn_dim = 0;
      NemotronHMoeConventions(&c);
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

HfTensorRef HfTensor(const ModelConfig&, const std::string& gguf_name) {
  static const std::vector<HfNameRule> kRules = {
      {std::regex(R"(^token_embd\.weight$)"), "backbone.embeddings.weight"},
      {std::regex(R"(^output_norm\.weight$)"), "backbone.norm_f.weight"},
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), "backbone.layers.$1.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_in\.weight$)"), "backbone.layers.$1.mixer.in_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_conv1d\.(weight|bias)$)"), "backbone.layers.$1.mixer.conv1d.$2"},
      {std::regex(R"(^blk\.(\d+)\.ssm_dt\.bias$)"), "backbone.layers.$1.mixer.dt_bias"},
      {std::regex(R"(^blk\.(\d+)\.ssm_a$)"), "backbone.layers.$1.mixer.A_log"},
      {std::regex(R"(^blk\.(\d+)\.ssm_d$)"), "backbone.layers.$1.mixer.D"},
      {std::regex(R"(^blk\.(\d+)\.ssm_norm\.weight$)"), "backbone.layers.$1.mixer.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_out\.weight$)"), "backbone.layers.$1.mixer.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "backbone.layers.$1.mixer.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "backbone.layers.$1.mixer.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(up|down)\.weight$)"), "backbone.layers.$1.mixer.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.weight$)"), "backbone.layers.$1.mixer.gate.weight"},
      {std::regex(R"(^blk\.(\d+)\.exp_probs_b\.bias$)"), "backbone.layers.$1.mixer.gate.e_score_correction_bias"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(up|down)_exps\.(\d+)\.weight$)"), "backbone.layers.$1.mixer.experts.$3.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(up|down)_shexp\.weight$)"), "backbone.layers.$1.mixer.shared_experts.$2_proj.weight"},
  };
  return {MapHfName(kRules, gguf_name)};
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufType;
  using formats::GgufValue;
  if (c.ssm_norm_group_size() != c.ssm_heads * c.ssm_head_dim / c.ssm_groups)
    return core::Unimplemented("GGUF (llama.cpp) normalises the gated norm per group; " + c.name + " does not");
  WriteHybridGguf(c, w);
  const std::string a = c.arch + ".";
  if (IsMamba2(c)) {
    w->Set(a + "feed_forward_length", GgufValue::U32(0));
    return core::Status::Ok();
  }
  // llama.cpp's nemotron_h loader requires the plain key too (it falls back to it for RMS).
  w->Set(a + "attention.layer_norm_epsilon", GgufValue::F32(c.rms_eps));
  std::vector<GgufValue> ffn;
  for (LayerKind k : c.layers) ffn.push_back(GgufValue::U32(k == LayerKind::kMlp ? c.ffn_dim : k == LayerKind::kMoe ? c.moe.ffn : 0));
  w->Set(a + "feed_forward_length", GgufValue::Array(GgufType::kU32, ffn));
  if (IsMoe(c)) WriteMoeGguf(c, w);
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  if (IsMamba2(c))
    return {{"num_hidden_layers", c.n_blocks}, {"num_heads", c.ssm_heads}, {"head_dim", c.ssm_head_dim},
            {"state_size", c.ssm_state}, {"n_groups", c.ssm_groups}, {"conv_kernel", c.ssm_conv},
            {"expand", c.ssm_heads * c.ssm_head_dim / c.d_model}, {"use_conv_bias", c.ssm_conv_bias}, {"use_bias", false},
            {"layer_norm_epsilon", c.rms_eps},
            {"chunk_size", c.ssm_chunk > 0 ? c.ssm_chunk : 256}};  // HF's default; ours is a runtime choice
  std::string pattern;
  for (LayerKind k : c.layers)
    pattern += k == LayerKind::kMamba2 ? 'M' : k == LayerKind::kAttention ? '*' : k == LayerKind::kMoe ? 'E' : '-';
  json cfg = {{"num_hidden_layers", c.layers.size()}, {"hybrid_override_pattern", pattern},
          {"mamba_num_heads", c.ssm_heads}, {"mamba_head_dim", c.ssm_head_dim}, {"ssm_state_size", c.ssm_state},
          {"n_groups", c.ssm_groups}, {"conv_kernel", c.ssm_conv}, {"use_conv_bias", c.ssm_conv_bias},
          {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
          {"intermediate_size", c.ffn_dim}, {"mlp_hidden_act", "relu2"}, {"layer_norm_epsilon", c.rms_eps},
          {"use_bias", false}, {"mamba_hidden_act", "silu"}};
  if (IsMoe(c))
    cfg.update({{"n_routed_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used},
                {"moe_intermediate_size", c.moe.ffn}, {"moe_shared_expert_intermediate_size", c.moe.shared_ffn},
                {"n_shared_experts", c.moe.shared_ffn > 0 ? 1 : 0}, {"norm_topk_prob", c.moe.norm_weights},
                {"routed_scaling_factor", c.moe.weights_scale}, {"n_group", c.moe.groups}, {"topk_group", c.moe.groups_used},
                {"intermediate_size", c.moe.ffn}});
  return cfg;
}

void NemotronHHfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  Mamba2HfLayout(c, tensors);
  SplitExpertTensors(c, tensors);
}

ArchSpec Row(const char* name, const char* hf_class, void (*conventions)(ModelConfig*)) {
  return MakeArch(name, {name}, hf_class, conventions, {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, Mamba2HfLayout});
}

}  // namespace

const ArchSpec& Mamba2Arch() {
  static const ArchSpec a = Row("mamba2", "Mamba2ForCausalLM", Mamba2Conventions);
  return a;
}
const ArchSpec& NemotronHArch() {
  static const ArchSpec a = Row("nemotron_h", "NemotronHForCausalLM", NemotronHConventions);
  return a;
}
const ArchSpec& NemotronHMoeArch() {
  static const ArchSpec a = [] {
    ArchSpec s = Row("nemotron_h_moe", "NemotronHForCausalLM", NemotronHMoeConventions);
    s.hf_model_types = {"nemotron_h"};  // read through nemotron_h's row (the pattern says which)
    s.hf_layout = NemotronHHfLayout;
    return s;
  }();
  return a;
}

}  // namespace radixlm::models
