#include "models/arch.h"

#include <algorithm>
#include <array>
#include <functional>
#include <tuple>

namespace radixlm::models {
namespace {

// The registry: one row per architecture.
const std::vector<std::reference_wrapper<const ArchSpec>>& Rows() {
  static const std::vector<std::reference_wrapper<const ArchSpec>> rows = {
      LlamaArch(), Qwen2Arch(), Qwen3Arch(), Qwen3MoeArch(), Mamba2Arch(), NemotronHArch(), NemotronHMoeArch(), GraniteHybridArch(), Qwen35Arch(), Qwen35MoeArch(),
      Gemma3Arch(), Gemma4Arch(), GptOssArch(), Lfm2Arch(), Lfm2MoeArch(),
  };
  return rows;
}

}  // namespace

const ArchSpec* ArchByGguf(std::string_view name) {
  for (const ArchSpec& a : Rows())
    if (a.gguf_name == name) return &a;
  return nullptr;
}

const ArchSpec* ArchByHfType(std::string_view model_type) {
  for (const ArchSpec& a : Rows())
    for (const std::string& t : a.hf_model_types)
      if (t == model_type) return &a;
  return nullptr;
}

std::string SupportedGgufArchs() {
  std::string s;
  for (const ArchSpec& a : Rows()) s += (s.empty() ? "" : ", ") + a.gguf_name;
  return s;
}

std::string SupportedHfTypes() {
  std::string s;
  for (const ArchSpec& a : Rows())
    for (const std::string& t : a.hf_model_types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

std::string Blk(int block, const char* what) { return "blk." + std::to_string(block) + "." + what; }

std::string ExpertName(int block, const char* stem, int64_t expert) {
  return "blk." + std::to_string(block) + "." + stem + "." + std::to_string(expert) + ".weight";
}

HfTensorRef StackedExpert(const std::string& name) {
  static const std::regex kExpert(R"(^(blk\.\d+\.\w+_(?:exps|experts))\.(\d+)\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, kExpert) || m[2].length() > 6) return {name};
  HfTensorRef r{m[1].str() + ".weight"};
  r.expert = std::stoll(m[2].str());
  return r;
}

void SplitExpertTensors(const ModelConfig&, std::vector<NamedTensor>* tensors) {
  static const std::regex kStacked(R"(^blk\.(\d+)\.(\w+_exps)\.weight$)");
  std::vector<NamedTensor> out;
  for (NamedTensor& t : *tensors) {
    std::smatch m;
    if (t.shape.size() != 3 || !std::regex_match(t.name, m, kStacked)) {
      out.push_back(std::move(t));
      continue;
    }
    const int64_t per = t.shape[1] * t.shape[2];
    for (int64_t e = 0; e < t.shape[0]; ++e)
      out.push_back({ExpertName(std::stoi(m[1].str()), m[2].str().c_str(), e), {t.shape[1], t.shape[2]},
                     std::vector<float>(t.data.begin() + e * per, t.data.begin() + (e + 1) * per), {}});
  }
  *tensors = std::move(out);
}

void FuseExpertGateUp(NamedTensor* gate, const NamedTensor& up) {
  const int64_t E = gate->shape[0], per = gate->shape[1] * gate->shape[2];
  std::vector<float> fused;
  fused.reserve(2 * E * per);
  for (int64_t e = 0; e < E; ++e) {
    fused.insert(fused.end(), gate->data.begin() + e * per, gate->data.begin() + (e + 1) * per);
    fused.insert(fused.end(), up.data.begin() + e * per, up.data.begin() + (e + 1) * per);
  }
  gate->data = std::move(fused);
  gate->shape[1] *= 2;
}

std::string MapHfName(const std::vector<HfNameRule>& rules, const std::string& gguf_name) {
  for (const HfNameRule& r : rules)
    if (std::regex_match(gguf_name, r.pattern)) return std::regex_replace(gguf_name, r.pattern, r.replacement);
  return gguf_name;
}

std::vector<HfNameRule> LlamaTrunkRules(const std::string& prefix, const std::string& mlp_norm, std::vector<HfNameRule> rules) {
  std::vector<HfNameRule> out = {
      {std::regex(R"(^token_embd\.weight$)"), prefix + "embed_tokens.weight"},
      {std::regex(R"(^output_norm\.weight$)"), prefix + "norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), prefix + "layers.$1.input_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.)" + mlp_norm + R"(\.weight$)"), prefix + "layers.$1.post_attention_layernorm.weight"},
  };
  out.insert(out.end(), std::make_move_iterator(rules.begin()), std::make_move_iterator(rules.end()));
  return out;
}

ArchSpec MakeArch(std::string gguf_name, std::vector<std::string> hf_model_types, std::string hf_class,
                  void (*conventions)(ModelConfig*), const ArchFunctions& f) {
  ArchSpec a;
  a.gguf_name = std::move(gguf_name);
  a.hf_model_types = std::move(hf_model_types);
  a.hf_class = std::move(hf_class);
  a.from_gguf = f.from_gguf;
  a.from_hf = f.from_hf;
  a.conventions = conventions;
  a.hf_tensor = f.hf_tensor;
  a.gguf_metadata = f.gguf_metadata;
  a.hf_config = f.hf_config;
  a.hf_layout = f.hf_layout;
  return a;
}

core::Status ReadGgufVocabulary(const formats::GgufFile& g, ModelConfig* c) {
  c->tied_embeddings = g.tensors().Find("output.weight") == nullptr;
  const formats::TensorEntry* emb = g.tensors().Find("token_embd.weight");
  if (!emb || emb->shape.size() != 2) return core::DataLoss(g.path() + ": missing or malformed token_embd.weight");
  c->vocab_size = emb->shape[0];
  c->bos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.bos_token_id", -1));
  c->eos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.eos_token_id", -1));
  return core::Status::Ok();
}

void WriteGgufSizes(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufValue;
  const std::string a = c.arch + ".";
  w->Set(a + "context_length", GgufValue::U32(static_cast<uint32_t>(std::min<int64_t>(c.max_context, 1 << 30))));
  w->Set(a + "embedding_length", GgufValue::U32(c.d_model));
  w->Set(a + "block_count", GgufValue::U32(c.n_blocks));
}

core::Status ReadGgufTrunk(const formats::GgufFile& g, int min_blocks, ModelConfig* c) {
  RADIXLM_ASSIGN_OR_RETURN(c->arch, g.GetString("general.architecture"));
  const std::string a = c->arch + ".";
  const core::StatusOr<std::string> name = g.GetString("general.name");  // optional; the path when absent or not text
  c->name = name.ok() ? *name : g.path();
  RADIXLM_ASSIGN_OR_RETURN(const int64_t d, g.GetInt(a + "embedding_length"));
  RADIXLM_ASSIGN_OR_RETURN(const int64_t blocks, g.GetInt(a + "block_count"));
  RADIXLM_ASSIGN_OR_RETURN(const int64_t heads, g.GetInt(a + "attention.head_count"));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "embedding_length", d, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "block_count", blocks, min_blocks, kMaxBlocks));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.head_count", heads, 1, kMaxHeads));
  c->d_model = static_cast<int>(d);
  c->n_blocks = static_cast<int>(blocks);
  c->n_heads = static_cast<int>(heads);
  return core::Status::Ok();
}

core::Status ReadAttentionGguf(const formats::GgufFile& g, bool ffn_required, ModelConfig* c) {
  RADIXLM_RETURN_IF_ERROR(ReadGgufTrunk(g, 1, c));
  const std::string a = c->arch + ".";
  int64_t ffn = 0;
  if (ffn_required) {
    RADIXLM_ASSIGN_OR_RETURN(ffn, g.GetInt(a + "feed_forward_length"));
  } else {
    ffn = g.GetIntOr(a + "feed_forward_length", 0);
  }
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "feed_forward_length", ffn, ffn_required ? 1 : 0, kMaxDim));
  c->ffn_dim = static_cast<int>(ffn);
  const int64_t d = c->d_model, heads = c->n_heads;
  c->n_kv_heads = static_cast<int>(g.GetIntOr(a + "attention.head_count_kv", heads));
  c->head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", d / heads));
  c->rms_eps = static_cast<float>(g.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c->rope_theta = g.GetFloatOr(a + "rope.freq_base", 10000.0);
  c->max_context = g.GetIntOr(a + "context_length", 4096);
  const int64_t rot = g.GetIntOr(a + "rope.dimension_count", c->head_dim);
  if (rot != c->head_dim)
    return core::Unimplemented(g.path() + ": partial rotary embeddings (rope.dimension_count " + std::to_string(rot) + ")");
  return ReadGgufVocabulary(g, c);
}

core::Status ReadHfSizes(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  for (auto [key, out, hi] : {std::tuple{"hidden_size", &c->d_model, kMaxDim}, {"num_hidden_layers", &c->n_blocks, kMaxBlocks},
                              {"intermediate_size", &c->ffn_dim, kMaxDim}, {"num_attention_heads", &c->n_heads, kMaxHeads}}) {
    const int64_t v = j.at(key).get<int64_t>();
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": " + key, v, 1, hi));
    *out = static_cast<int>(v);
  }
  return core::Status::Ok();
}

nlohmann::json HfLayerTypes(const ModelConfig& c) {
  nlohmann::json types = nlohmann::json::array();
  for (int x : c.layer_window) types.push_back(x > 0 ? "sliding_attention" : "full_attention");
  return types;
}

core::StatusOr<std::vector<int>> ReadGgufSlidingWindows(const formats::GgufFile& g, int n_blocks, int64_t every) {
  const core::StatusOr<std::string> arch = g.GetString("general.architecture");
  const std::string a = (arch.ok() ? *arch : std::string()) + ".";
  const int64_t window = g.GetIntOr(a + "attention.sliding_window", 0);
  if (window <= 0) return std::vector<int>(n_blocks, 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.sliding_window", window, 1, 1 << 24));
  std::vector<int> out(n_blocks, static_cast<int>(window));
  if (const formats::GgufValue* v = g.Find(a + "attention.sliding_window_pattern"); v && v->type == formats::GgufType::kArray) {
    if (static_cast<int>(v->array.size()) < n_blocks)
      return core::DataLoss(g.path() + ": " + a + "attention.sliding_window_pattern has " + std::to_string(v->array.size()) +
                            " entries for " + std::to_string(n_blocks) + " blocks");
    for (int b = 0; b < n_blocks; ++b)
      if (!v->array[b].is_integer() && v->array[b].type != formats::GgufType::kBool)
        return core::DataLoss(g.path() + ": " + a + "attention.sliding_window_pattern is not an array of bools");
    for (int b = 0; b < n_blocks; ++b)
      if (v->array[b].AsInt() == 0) out[b] = 0;
    return out;
  }
  every = g.GetIntOr(a + "attention.sliding_window_pattern", every);
  if (every < 0) return core::DataLoss(g.path() + ": a negative " + a + "attention.sliding_window_pattern");
  for (int b = 0; b < n_blocks; ++b)
    if (every > 0 && b % every == every - 1) out[b] = 0;  // llama.cpp's set_swa_pattern: the last of each `every`
  return out;
}

void WriteAttentionGguf(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufValue;
  WriteGgufSizes(c, w);
  const std::string a = c.arch + ".";
  w->Set(a + "feed_forward_length", GgufValue::U32(c.ffn_dim));
  w->Set(a + "attention.head_count", GgufValue::U32(c.n_heads));
  w->Set(a + "attention.head_count_kv", GgufValue::U32(c.n_kv_heads));
  w->Set(a + "attention.key_length", GgufValue::U32(c.head_dim));
  w->Set(a + "attention.value_length", GgufValue::U32(c.head_dim));
  w->Set(a + "attention.layer_norm_rms_epsilon", GgufValue::F32(c.rms_eps));
  w->Set(a + "rope.freq_base", GgufValue::F32(static_cast<float>(c.rope_theta)));
  w->Set(a + "rope.dimension_count", GgufValue::U32(c.rope_dim > 0 ? c.rope_dim : c.head_dim));
}

}  // namespace radixlm::models
