#include "models/hybrid_config.h"

#include <algorithm>
#include <cmath>

namespace radixlm::models {

using nlohmann::json;

core::Status ReadHybridGguf(const formats::GgufFile& g, ModelConfig* out) {
  ModelConfig& c = *out;
  const std::string a = c.arch + ".";
  const core::StatusOr<std::string> name = g.GetString("general.name");  // optional; the path when absent or not text
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
  RADIXLM_RETURN_IF_ERROR(ReadGgufVocabulary(g, &c));
  for (int64_t i = 0; i < blocks; ++i) {
    c.n_heads = std::max<int>(c.n_heads, static_cast<int>(PerLayer(g, a + "attention.head_count", i)));
    c.n_kv_heads = std::max<int>(c.n_kv_heads, static_cast<int>(PerLayer(g, a + "attention.head_count_kv", i)));
    c.ffn_dim = std::max<int>(c.ffn_dim, static_cast<int>(PerLayer(g, a + "feed_forward_length", i)));
  }
  c.head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", c.n_heads ? d / c.n_heads : 0));
  return core::Status::Ok();
}

int64_t PerLayer(const formats::GgufFile& g, const std::string& key, int64_t i) {
  const formats::GgufValue* v = g.Find(key);
  if (!v) return 0;
  if (!v->array.empty()) return i < static_cast<int64_t>(v->array.size()) ? v->array[i].AsInt() : 0;
  return v->AsInt();
}

int64_t FirstNumber(const json& j, std::initializer_list<const char*> keys, int64_t fallback) {
  for (const char* k : keys)
    if (j.contains(k) && j[k].is_number()) return j[k].get<int64_t>();
  return fallback;
}

core::Status ReadHybridHf(const json& j, const std::string& path, const std::string& dir, ModelConfig* c) {
  c->name = dir;
  c->vocab_size = j.at("vocab_size").get<int64_t>();
  const int64_t hidden = j.at("hidden_size").get<int64_t>();
  RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": hidden_size", hidden, 1, kMaxDim));
  c->d_model = static_cast<int>(hidden);
  c->tied_embeddings = j.value("tie_word_embeddings", false);
  c->max_context = FirstNumber(j, {"max_position_embeddings"}, 1 << 20);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c->bos_id = j["bos_token_id"].get<int32_t>();
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c->eos_id = j["eos_token_id"].get<int32_t>();
  c->use_rope = false;
  return core::Status::Ok();
}

void WriteHybridGguf(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufType;
  using formats::GgufValue;
  WriteGgufSizes(c, w);
  const std::string a = c.arch + ".";
  w->Set(a + "ssm.conv_kernel", GgufValue::U32(c.ssm_conv));
  w->Set(a + "ssm.inner_size", GgufValue::U32(c.ssm_heads * c.ssm_head_dim));
  w->Set(a + "ssm.state_size", GgufValue::U32(c.ssm_state));
  w->Set(a + "ssm.time_step_rank", GgufValue::U32(c.ssm_heads));
  w->Set(a + "ssm.group_count", GgufValue::U32(c.ssm_groups));
  w->Set(a + "attention.layer_norm_rms_epsilon", GgufValue::F32(c.rms_eps));
  w->Set(a + "attention.key_length", GgufValue::U32(c.head_dim));
  w->Set(a + "attention.value_length", GgufValue::U32(c.head_dim));
  // As llama.cpp's converter writes it: one q head count (llama.cpp derives the head size from
  // layer 0's count, which a per-layer array makes 0 for a Mamba2 first layer) and the kv head
  // counts per layer, 0 marking a recurrent layer.
  const std::vector<int> blocks = c.SublayerBlocks();
  std::vector<int> attn(c.n_blocks, 0);
  for (size_t li = 0; li < c.layers.size(); ++li)
    if (c.layers[li] == LayerKind::kAttention) attn[blocks[li]] = 1;
  std::vector<GgufValue> kv_heads;
  for (int b = 0; b < c.n_blocks; ++b) kv_heads.push_back(GgufValue::U32(attn[b] ? c.n_kv_heads : 0));
  w->Set(a + "attention.head_count", GgufValue::U32(c.n_heads));
  w->Set(a + "attention.head_count_kv", GgufValue::Array(GgufType::kU32, kv_heads));
}

void Mamba2HfLayout(const ModelConfig& c, std::vector<NamedTensor>* tensors) {
  const kernels::Mamba2Dims sd = c.ssm_dims();
  for (NamedTensor& t : *tensors) {
    if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0) {
      for (float& a : t.data) a = std::log(-a);
    } else if (t.name.find("ssm_conv1d.weight") != std::string::npos) {
      t.shape = {sd.conv_dim(), 1, sd.d_conv};
    }
  }
}

}  // namespace radixlm::models
