#include "models/moe_config.h"

namespace radixlm::models {

using core::Status;

namespace {
// A key that is one number, or a per-layer array whose entries are all that number.
core::StatusOr<int64_t> Uniform(const formats::GgufFile& g, const std::string& key, int64_t fallback) {
  const formats::GgufValue* v = g.Find(key);
  if (!v) return fallback;
  if (v->array.empty()) return v->AsInt();
  int64_t first = -1;
  for (const formats::GgufValue& e : v->array) {
    const int64_t x = e.AsInt();
    if (x == 0) continue;  // layers without experts
    if (first >= 0 && x != first) return core::Unimplemented(g.path() + ": " + key + " differs from layer to layer");
    first = x;
  }
  return first < 0 ? fallback : first;
}
}  // namespace

Status ReadMoeGguf(const formats::GgufFile& g, const std::string& arch, int64_t ffn_fallback, MoeConfig* m) {
  const std::string a = arch + ".";
  RADIXLM_ASSIGN_OR_RETURN(const int64_t experts, g.GetInt(a + "expert_count"));
  RADIXLM_ASSIGN_OR_RETURN(const int64_t used, Uniform(g, a + "expert_used_count", 0));
  RADIXLM_ASSIGN_OR_RETURN(const int64_t ffn, Uniform(g, a + "expert_feed_forward_length", ffn_fallback));
  RADIXLM_ASSIGN_OR_RETURN(const int64_t shared, Uniform(g, a + "expert_shared_feed_forward_length", 0));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_count", experts, 1, 4096));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_used_count", used, 1, experts));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_feed_forward_length", ffn, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_shared_feed_forward_length", shared, 0, kMaxDim));
  m->experts = static_cast<int>(experts);
  m->used = static_cast<int>(used);
  m->ffn = static_cast<int>(ffn);
  m->shared_ffn = static_cast<int>(shared);
  const int64_t groups = g.GetIntOr(a + "expert_group_count", 0), groups_used = g.GetIntOr(a + "expert_group_used_count", 0);
  if (groups > 1) {
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_group_count", groups, 2, experts));
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "expert_group_used_count", groups_used, 1, groups));
    m->groups = static_cast<int>(groups);
    m->groups_used = static_cast<int>(groups_used);
  }
  if (const formats::GgufValue* norm = g.Find(a + "expert_weights_norm")) m->norm_weights = norm->AsInt() != 0;
  const double scale = g.GetFloatOr(a + "expert_weights_scale", 0.0);
  m->weights_scale = scale == 0.0 ? 1.0f : static_cast<float>(scale);
  return Status::Ok();
}

void WriteMoeGguf(const ModelConfig& c, formats::GgufWriter* w) {
  using formats::GgufValue;
  const std::string a = c.arch + ".";
  const MoeConfig& m = c.moe;
  w->Set(a + "expert_count", GgufValue::U32(m.experts));
  w->Set(a + "expert_used_count", GgufValue::U32(m.used));
  w->Set(a + "expert_feed_forward_length", GgufValue::U32(m.ffn));
  if (m.shared_ffn > 0) w->Set(a + "expert_shared_feed_forward_length", GgufValue::U32(m.shared_ffn));
  if (m.groups > 1) {
    w->Set(a + "expert_group_count", GgufValue::U32(m.groups));
    w->Set(a + "expert_group_used_count", GgufValue::U32(m.groups_used));
  }
  w->Set(a + "expert_weights_norm", GgufValue::Bool(m.norm_weights));
  if (m.weights_scale != 1.0f) w->Set(a + "expert_weights_scale", GgufValue::F32(m.weights_scale));
  w->Set(a + "expert_gating_func", GgufValue::U32(m.gating == MoeConfig::Gating::kSigmoid ? 2 : 1));
}

Status ReadMoeHf(const nlohmann::json& t, const std::string& path, int64_t ffn_fallback, MoeConfig* m) {
  auto first = [&](std::initializer_list<const char*> keys, int64_t fallback) -> int64_t {
    for (const char* k : keys)
      if (t.contains(k) && t[k].is_number_integer()) return t[k].get<int64_t>();
    return fallback;
  };
  const int64_t experts = first({"num_experts", "num_local_experts", "n_routed_experts"}, 0);
  const int64_t used = first({"num_experts_per_tok"}, 0);
  const int64_t ffn = first({"moe_intermediate_size"}, ffn_fallback);
  const int64_t shared =
      first({"shared_expert_intermediate_size", "shared_intermediate_size", "moe_shared_expert_intermediate_size"}, 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": the expert count", experts, 1, 4096));
  RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": num_experts_per_tok", used, 1, experts));
  RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": the expert MLP size", ffn, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": the shared expert size", shared, 0, kMaxDim));
  m->experts = static_cast<int>(experts);
  m->used = static_cast<int>(used);
  m->ffn = static_cast<int>(ffn);
  m->shared_ffn = static_cast<int>(shared);
  if (t.contains("norm_topk_prob") && t["norm_topk_prob"].is_boolean()) m->norm_weights = t["norm_topk_prob"].get<bool>();
  if (t.contains("routed_scaling_factor") && t["routed_scaling_factor"].is_number())
    m->weights_scale = t["routed_scaling_factor"].get<float>();
  const int64_t groups = first({"n_group"}, 1), groups_used = first({"topk_group"}, 1);
  if (groups > 1) {
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": n_group", groups, 2, experts));
    RADIXLM_RETURN_IF_ERROR(CheckSize(path + ": topk_group", groups_used, 1, groups));
    m->groups = static_cast<int>(groups);
    m->groups_used = static_cast<int>(groups_used);
  }
  return Status::Ok();
}

void UseExperts(ModelConfig* c) {
  for (LayerKind& k : c->layers)
    if (k == LayerKind::kMlp) k = LayerKind::kMoe;
}

}  // namespace radixlm::models
