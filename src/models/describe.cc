#include "models/describe.h"

#include <algorithm>
#include <map>

#include "core/cpu_features.h"
#include "kernels/gemm_internal.h"
#include "models/ssm_state.h"

namespace radixlm::models {

using nlohmann::json;

std::string MatmulDescription(const Transformer& m) {
  // One line per distinct weight type, largest share first.
  std::map<std::string, size_t> bytes;
  auto add = [&](const kernels::PackedWeight& w) {
    for (const kernels::WeightSegment& s : w.segments()) {
      std::string what = std::string(core::DTypeName(s.storage)) + " weights x ";
      const core::Isa tier = kernels::gemm::TierOf(s, core::ActiveIsa());
      if (core::IsQuantized(s.storage)) what += std::string("int8 activations (") + (tier == core::Isa::kAvx512 ? "avx512 vnni" : core::IsaName(tier)) + ")";
      else if (s.storage == core::DType::kBF16 && s.bf16_mode == kernels::Bf16Mode::kBf16Activations)
        what += std::string("bf16 activations (") + (tier == core::Isa::kAvx512 ? "vdpbf16ps" : "scalar emulation") + ")";
      else what += std::string("f32 activations (") + core::IsaName(tier) + " fma)";
      bytes[what] += s.buf.size();
    }
  };
  const auto& w = m.weights();
  for (const auto& a : w.attention) { add(a.qkv); add(a.o); }
  for (const auto& l : w.mlp) { add(l.gate_up); add(l.down); }
  for (const auto& l : w.mamba) { add(l.in_proj); add(l.out_proj); }
  add(w.lm_head);
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [k, v] : bytes) order.push_back({v, k});
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [b, what] : order) out += (out.empty() ? "" : "; ") + what;
  return out;
}

namespace {

// KV bytes one token takes in the attention layers that keep their own KV (sliding, full).
int64_t KvBytesPerToken(const ModelConfig& c, const std::string& kv_dtype, bool sliding = true, bool full = true) {
  const int64_t element = kv_dtype == "f32" ? 4 : 2;
  return c.KvValuesPerToken(sliding, full) * element;
}

// The recurrent layers' shape and the state one sequence holds (what a checkpoint costs).
json RecurrentJson(const ModelConfig& c, const std::string& kv_dtype) {
  if (c.n_ssm_layers() == 0) return nullptr;
  const int64_t state = static_cast<int64_t>(SsmStateStore::BytesPerSlot(c)), kv = KvBytesPerToken(c, kv_dtype);
  const bool short_conv = c.CountLayers(LayerKind::kShortConv) > 0;
  json j = {{"layers", c.n_ssm_layers()}, {"d_conv", short_conv ? c.short_conv : c.ssm_conv}, {"chunk", c.ssm_chunk},
            {"scan", c.ssm_chunk > 0 ? "chunked" : "exact recurrence"},
            {"state_bytes_per_sequence", state},
            // A checkpoint weighs as much as this many tokens of KV: what the cache trades.
            {"state_as_kv_tokens", kv > 0 ? (state + kv - 1) / kv : 0}};
  if (short_conv) {
    j.update({{"kind", "short_conv"}, {"channels", c.d_model}});
  } else if (c.CountLayers(LayerKind::kDeltaNet) > 0) {
    j.update({{"kind", "gated_deltanet"}, {"key_heads", c.gdn_k_heads}, {"value_heads", c.gdn_v_heads},
              {"head_dim", c.gdn_head_dim}, {"value_head_layout", c.gdn_tiled ? "tiled" : "grouped"}});
  } else {
    j.update({{"kind", "mamba2"}, {"heads", c.ssm_heads}, {"head_dim", c.ssm_head_dim}, {"d_state", c.ssm_state},
              {"groups", c.ssm_groups}, {"norm_group", c.ssm_norm_group_size()}});
  }
  return j;
}

// Sliding-window attention (null when no layer slides): the layers of each kind, their KV bytes
// per token, and what a sequence of 32K tokens keeps when served: paged whole (--swa-cache full,
// llama.cpp's --swa-full) every position of every layer; with window rings (--swa-cache window,
// or auto's choice; at serve's default 256-token steps and 16-token blocks) the full layers'
// every position and one ring per sliding layer; and the bound a window allows (the sliding
// layers' last window + one block).
json WindowsJson(const ModelConfig& c, const std::string& kv_dtype) {
  const int window = c.sliding_window();
  if (window == 0) return nullptr;
  const int sliding = c.n_sliding_layers();
  const int full = c.n_attention_layers() - sliding;
  const int64_t full_bytes = KvBytesPerToken(c, kv_dtype, false, true), sliding_bytes = KvBytesPerToken(c, kv_dtype, true, false);
  constexpr int64_t kContext = 32768, kBlock = 16, kStep = 256;
  const int64_t ring = SsmStateStore::RingTokens(c, kBlock, kStep);
  const int64_t every = (full_bytes + sliding_bytes) * kContext;
  const int64_t rings = full_bytes * kContext + sliding_bytes * std::min(kContext, ring);
  const int64_t bound = full_bytes * kContext + sliding_bytes * std::min(kContext, window + kBlock);
  return {{"window", window}, {"sliding_layers", sliding}, {"full_layers", full},
          {"kv_bytes_per_token_full_layers", full_bytes}, {"kv_bytes_per_token_sliding_layers", sliding_bytes},
          {"rope_theta_sliding", c.rope_theta_swa > 0 ? c.rope_theta_swa : c.rope_theta},
          {"sinks", c.attn_sinks}, {"window_ring_tokens", ring}, {"window_ring_bytes", sliding_bytes * ring},
          {"kv_bytes_per_sequence_32k", every}, {"kv_bytes_per_sequence_32k_window_rings", rings},
          {"kv_bytes_per_sequence_32k_window_bound", bound}};
}

// The experts' layout and what a token reads of them (null for a dense model).
json ExpertsJson(const Transformer& m) {
  const auto& c = m.config();
  if (c.CountLayers(LayerKind::kMoe) == 0) return nullptr;
  const MoeConfig& e = c.moe;
  size_t expert_bytes = 0;
  for (const auto& l : m.weights().moe) expert_bytes += l.gate_up.nbytes() + l.down.nbytes();
  const std::string type(core::DTypeName(m.weights().moe.at(0).gate_up.storage()));
  return {{"layers", c.CountLayers(LayerKind::kMoe)}, {"experts", e.experts}, {"used", e.used}, {"ffn", e.ffn},
          {"shared_ffn", e.shared_ffn}, {"shared_gate", e.shared_gate}, {"gating", GatingName(e.gating)},
          {"selection_bias", e.selection_bias}, {"norm_weights", e.norm_weights}, {"weights_scale", e.weights_scale},
          {"groups", e.groups}, {"groups_used", e.groups_used}, {"expert_type", type},
          {"expert_bytes", expert_bytes},
          // What one decode token reads of the experts: `used` of every layer's `experts`.
          {"active_expert_bytes_per_token", expert_bytes / e.experts * e.used}};
}

// Gemma 4's per-layer shapes (null when every layer has the model-wide shape): the head shape of
// each kind, the layers that read another's KV, the per-layer input width, the MLP sizes.
json LayerShapesJson(const ModelConfig& c) {
  if (c.layer_head_dim.empty() && c.layer_kv_heads.empty() && c.layer_kv_source.empty() && c.layer_ffn.empty() &&
      c.per_layer_input == 0)
    return nullptr;
  json j = json::object();
  int shared = 0;
  for (int a = 0; a < c.n_attention_layers(); ++a) {
    const bool slides = !c.layer_window.empty() && c.layer_window[a] > 0;
    j[slides ? "sliding" : "full"] = {{"kv_heads", c.AttnKvHeads(a)}, {"head_dim", c.AttnHeadDim(a)}};
    shared += !c.OwnsKv(a);
  }
  j["shared_kv_layers"] = shared;
  j["per_layer_input"] = c.per_layer_input;
  j["ffn_dims"] = c.layer_ffn;
  return j;
}

}  // namespace

json ModelInfoJson(const Transformer& m, const std::string& kv_dtype) {
  const auto& c = m.config();
  json layers = json::array();
  for (auto k : c.layers) layers.push_back(LayerKindName(k));
  return {{"name", c.name}, {"architecture", c.arch}, {"parameters", c.ParameterCount()},
          {"total_parameters", c.ParameterCount()}, {"active_parameters", c.ActiveParameterCount()},
          {"experts", ExpertsJson(m)},
          {"dtype", std::string(core::DTypeName(m.weight_dtype()))}, {"weight_type", m.weights().TypeSummary()},
          {"matmul", MatmulDescription(m)}, {"kv_dtype", kv_dtype}, {"isa", core::IsaName(core::ActiveIsa())},
          {"weights_bytes", m.weights().nbytes()},
          {"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"n_blocks", c.n_blocks},
          {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
          {"rope_dim", c.rope_dim > 0 ? c.rope_dim : c.head_dim}, {"attn_output_gate", c.attn_output_gate},
          {"ffn_dim", c.ffn_dim}, {"rope_theta", c.rope_theta}, {"rms_eps", c.rms_eps},
          {"rope_layout", c.rope_layout == kernels::RopeLayout::kNeox ? "neox" : "interleaved"},
          {"qk_norm", c.qk_norm}, {"qkv_bias", c.qkv_bias}, {"tied_embeddings", c.tied_embeddings},
          {"max_context", c.max_context}, {"layer_kinds", layers}, {"use_rope", c.use_rope},
          {"rope_sections", c.rope_sections}, {"ssm", RecurrentJson(c, kv_dtype)},
          {"sliding_window", WindowsJson(c, kv_dtype)}, {"layer_shapes", LayerShapesJson(c)}};
}

}  // namespace radixlm::models
