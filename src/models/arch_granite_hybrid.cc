// Granite-4.0-H (GraniteMoeHybridForCausalLM; GGUF granitehybrid): each layer a mixer (Mamba2
// or attention, which has no positions unless the file says RoPE) followed by a SwiGLU MLP, with
// Granite's embedding, residual, attention and logits scales. Dense models (Micro, 1B, 350M)
// have only the shared MLP; Tiny and Small have experts in every layer (top-k of the router's
// logits, softmax over those; SwiGLU experts) plus the ungated shared MLP, the residual scale
// applying to their sum. The checkpoint stacks each MLP's gate and up in one input_linear
// (experts: [E, 2I, H], gate rows first); llama.cpp's feed_forward_length is the expert width.
#include "models/arch.h"
#include "models/hybrid_config.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

void Conventions(ModelConfig* c) {
  c->qk_norm = c->qkv_bias = false;
  if (c->CountLayers(LayerKind::kMoe) > 0 || c->moe.experts > 0) {
    UseExperts(c);
    c->moe.gating = MoeConfig::Gating::kSoftmax;  // softmax, top-k, renormalised = softmax over the top-k logits
    c->moe.norm_weights = true;
    c->moe.shared_gate = false;
  }
}
bool HasExperts(const ModelConfig& c) { return c.moe.experts > 0; }

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  c.arch = "granitehybrid";
  RADIXLM_RETURN_IF_ERROR(ReadHybridGguf(g, &c));
  const std::string a = c.arch + ".";
  for (int64_t i = 0; i < c.n_blocks; ++i) {
    c.layers.push_back(PerLayer(g, a + "attention.head_count_kv", i) > 0 ? LayerKind::kAttention : LayerKind::kMamba2);
    c.layers.push_back(LayerKind::kMlp);
  }
  if (g.GetIntOr(a + "expert_count", 0) > 0) {  // every layer's MLP is experts (+ the shared MLP)
    RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c.arch, c.ffn_dim, &c.moe));
    c.moe.ffn = c.ffn_dim;  // llama.cpp: feed_forward_length is the expert width
    c.moe.weights_scale = 1.0f;
    c.ffn_dim = 0;
  } else {
    c.ffn_dim = static_cast<int>(g.GetIntOr(a + "expert_shared_feed_forward_length", c.ffn_dim));
  }
  Conventions(&c);
  c.embedding_multiplier = static_cast<float>(g.GetFloatOr(a + "embedding_scale", 1.0));
  c.residual_multiplier = static_cast<float>(g.GetFloatOr(a + "residual_scale", 1.0));
  c.attention_multiplier = static_cast<float>(g.GetFloatOr(a + "attention.scale", 0.0));
  c.logits_scaling = static_cast<float>(g.GetFloatOr(a + "logit_scale", 1.0));
  // Granite's switch for positional embeddings, as llama.cpp reads it: RoPE unless the file says
  // rope.scaling.finetuned = false (Granite-4.0-H is NoPE; Bamba-style files use RoPE), in
  // ggml's "normal" layout (adjacent pairs; the converter permutes q/k rows for it).
  c.use_rope = g.GetBoolOr(a + "rope.scaling.finetuned", true);
  if (c.use_rope) {
    c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 10000.0);
    c.rope_layout = kernels::RopeLayout::kInterleaved;
    const int64_t rot = g.GetIntOr(a + "rope.dimension_count", c.head_dim);
    if (rot != c.head_dim)
      return core::Unimplemented(g.path() + ": partial rotary embeddings (rope.dimension_count " + std::to_string(rot) + ")");
  }
  return c;
}

StatusOr<ModelConfig> FromHf(const json& j, const std::string& path, const std::string& dir) {
  ModelConfig c;
  c.arch = "granitehybrid";
  Conventions(&c);
  try {
    RADIXLM_RETURN_IF_ERROR(ReadHybridHf(j, path, dir, &c));
    c.ssm_heads = static_cast<int>(FirstNumber(j, {"mamba_n_heads"}, 0));
    c.ssm_head_dim = static_cast<int>(FirstNumber(j, {"mamba_d_head"}, 64));
    c.ssm_state = static_cast<int>(FirstNumber(j, {"mamba_d_state"}, 128));
    c.ssm_groups = static_cast<int>(FirstNumber(j, {"mamba_n_groups"}, 1));
    c.ssm_conv = static_cast<int>(FirstNumber(j, {"mamba_d_conv"}, 4));
    c.ssm_conv_bias = j.value("mamba_conv_bias", true);
    const int64_t heads = j.at("num_attention_heads").get<int64_t>();
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": num_attention_heads", heads, 1, kMaxHeads));
    c.n_heads = static_cast<int>(heads);
    c.n_kv_heads = static_cast<int>(FirstNumber(j, {"num_key_value_heads"}, c.n_heads));
    c.head_dim = c.d_model / c.n_heads;
    c.ffn_dim = static_cast<int>(FirstNumber(j, {"shared_intermediate_size", "intermediate_size"}, 0));
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
    if (FirstNumber(j, {"num_local_experts"}, 0) > 0) {
      RADIXLM_RETURN_IF_ERROR(ReadMoeHf(j, path, FirstNumber(j, {"intermediate_size"}, 0), &c.moe));
      c.ffn_dim = 0;
      Conventions(&c);
      // GraniteMoeHybridTopKGating: top-k of the logits, softmax over those.
      c.moe.gating = MoeConfig::Gating::kSoftmaxChosen;
      c.moe.norm_weights = false;
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path + ": " + e.what());
  }
  return c;
}

HfTensorRef HfTensor(const ModelConfig& c, const std::string& gguf_name) {
  // lm_head sits after the trunk's rules: no two rules match one name.
  static const std::vector<HfNameRule> kRules = LlamaTrunkRules("model.", "ffn_norm", {
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_in\.weight$)"), "model.layers.$1.mamba.in_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_conv1d\.(weight|bias)$)"), "model.layers.$1.mamba.conv1d.$2"},
      {std::regex(R"(^blk\.(\d+)\.ssm_dt\.bias$)"), "model.layers.$1.mamba.dt_bias"},
      {std::regex(R"(^blk\.(\d+)\.ssm_a$)"), "model.layers.$1.mamba.A_log"},
      {std::regex(R"(^blk\.(\d+)\.ssm_d$)"), "model.layers.$1.mamba.D"},
      {std::regex(R"(^blk\.(\d+)\.ssm_norm\.weight$)"), "model.layers.$1.mamba.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_out\.weight$)"), "model.layers.$1.mamba.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "model.layers.$1.self_attn.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "model.layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up)\.weight$)"), "model.layers.$1.shared_mlp.input_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "model.layers.$1.shared_mlp.output_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up)_shexp\.weight$)"), "model.layers.$1.shared_mlp.input_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down_shexp\.weight$)"), "model.layers.$1.shared_mlp.output_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_inp\.weight$)"), "model.layers.$1.block_sparse_moe.router.layer.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(gate|up)_exps\.weight$)"), "model.layers.$1.block_sparse_moe.input_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down_exps\.weight$)"), "model.layers.$1.block_sparse_moe.output_linear.weight"},
  });
  const HfTensorRef expert = StackedExpert(gguf_name);
  HfTensorRef ref{MapHfName(kRules, expert.name)};
  ref.expert = expert.expert;
  // input_linear = [gate; up]: each is half of its rows.
  const bool is_expert = expert.expert >= 0;
  const int64_t width = is_expert ? c.moe.ffn : gguf_name.find("_shexp") != std::string::npos ? c.moe.shared_ffn : c.ffn_dim;
  if (gguf_name.find(".ffn_gate") != std::string::npos && gguf_name.find("ffn_gate_inp") == std::string::npos) ref.rows = width;
  if (gguf_name.find(".ffn_up") != std::string::npos) ref.row_begin = ref.rows = width;
  return ref;
}

core::Status GgufMetadata(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufValue;
  WriteHybridGguf(c, w);
  const std::string a = c.arch + ".";
  // llama.cpp: with experts, feed_forward_length is their width and the shared MLP's is its own key.
  w->Set(a + "feed_forward_length", GgufValue::U32(HasExperts(c) ? c.moe.ffn : c.ffn_dim));
  // llama.cpp applies RoPE to a granitehybrid file unless this says false.
  w->Set(a + "rope.scaling.finetuned", GgufValue::Bool(c.use_rope));
  if (c.use_rope) {
    w->Set(a + "rope.freq_base", GgufValue::F32(static_cast<float>(c.rope_theta)));
    w->Set(a + "rope.dimension_count", GgufValue::U32(c.head_dim));
  }
  if (HasExperts(c)) {
    WriteMoeGguf(c, w);  // with expert_shared_feed_forward_length
  } else {
    w->Set(a + "expert_shared_feed_forward_length", GgufValue::U32(c.ffn_dim));
  }
  w->Set(a + "embedding_scale", GgufValue::F32(c.embedding_multiplier));
  w->Set(a + "residual_scale", GgufValue::F32(c.residual_multiplier));
  w->Set(a + "attention.scale", GgufValue::F32(c.attention_multiplier));
  w->Set(a + "logit_scale", GgufValue::F32(c.logits_scaling));
  return core::Status::Ok();
}

json HfConfig(const ModelConfig& c) {
  json types = json::array();
  for (LayerKind k : c.layers)
    if (!IsFeedForward(k)) types.push_back(k == LayerKind::kMamba2 ? "mamba" : "attention");
  json cfg = {{"num_hidden_layers", c.n_blocks}, {"layer_types", types}, {"mamba_n_heads", c.ssm_heads},
          {"mamba_d_head", c.ssm_head_dim}, {"mamba_d_state", c.ssm_state}, {"mamba_n_groups", c.ssm_groups},
          {"mamba_d_conv", c.ssm_conv}, {"mamba_expand", c.ssm_heads * c.ssm_head_dim / c.d_model},
          {"mamba_conv_bias", c.ssm_conv_bias}, {"mamba_proj_bias", false},
          {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
          {"shared_intermediate_size", c.ffn_dim}, {"num_local_experts", 0}, {"rms_norm_eps", c.rms_eps},
          {"embedding_multiplier", c.embedding_multiplier}, {"residual_multiplier", c.residual_multiplier},
          {"attention_multiplier", c.attention_multiplier}, {"logits_scaling", c.logits_scaling},
          {"position_embedding_type", c.use_rope ? "rope" : "nope"}, {"rope_theta", c.rope_theta},
          {"hidden_act", "silu"}};
  if (HasExperts(c))
    cfg.update({{"num_local_experts", c.moe.experts}, {"num_experts_per_tok", c.moe.used},
                {"intermediate_size", c.moe.ffn}, {"shared_intermediate_size", c.moe.shared_ffn}});
  return cfg;
}

// The Mamba2 mixer's layouts, and each MLP's gate and up stacked into one input_linear (the
// experts' per expert: [E, 2I, H]).
void HfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  Mamba2HfLayout(c, tensors);
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < tensors->size(); ++i) {
    NamedTensor& t = (*tensors)[i];
    const bool gate = t.name.find("ffn_gate.weight") != std::string::npos || t.name.find("ffn_gate_shexp.weight") != std::string::npos;
    const bool gate_exps = t.name.find("ffn_gate_exps.weight") != std::string::npos;
    if ((gate || gate_exps) && i + 1 < tensors->size()) {
      NamedTensor& up = (*tensors)[i + 1];  // the exporter lists gate, then up
      if (gate) {
        t.shape[0] *= 2;
        t.data.insert(t.data.end(), up.data.begin(), up.data.end());
      } else {
        FuseExpertGateUp(&t, up);
      }
      out.push_back(std::move(t));
      ++i;
      continue;
    }
    out.push_back(std::move(t));
  }
  *tensors = std::move(out);
}

}  // namespace

const ArchSpec& GraniteHybridArch() {
  static const ArchSpec a = MakeArch("granitehybrid", {"granitemoehybrid"}, "GraniteMoeHybridForCausalLM", Conventions,
                                      {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
