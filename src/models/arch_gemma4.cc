// Gemma 4 (text, dense): Gemma 3's decoder (GeGLU with the tanh GELU, pre and post norms,
// q/k norms, embeddings scaled by sqrt(d_model), sliding-window and global layers) with what
// llama.cpp's gemma4 (src/models/gemma4.cpp, convert: conversion/gemma.py) does differently:
//   - which layers slide: attention.sliding_window_pattern, a bool per block (required);
//   - head sizes by kind: key_length (global, 512 on the released models) and key_length_swa
//     (sliding, 256); head_count_kv may be an array (fewer kv heads on global layers);
//   - attention scale 1; q and k RMS-normed with weights, V RMS-normed without one; norms are
//     plain weights (not 1 + w);
//   - RoPE: sliding layers base rope.freq_base_swa over rope.dimension_count_swa dims; global
//     layers base rope.freq_base over the whole head, with rope_freqs.weight dividing each pair's
//     frequency ("proportional" RoPE: 1 for the pairs that turn, 1e30 for the rest);
//   - attention.shared_kv_layers: the last N blocks compute only q and attend over the KV of
//     the last earlier block of their kind (llama.cpp's n_layer_kv_from_start);
//   - a layer without attn_v uses its K projection (before the k norm) as V;
//   - per-layer embeddings (embedding_length_per_layer_input > 0, E2B / E4B) and
//     layer_output_scale (models/per_layer_input.cc);
//   - feed_forward_length may be an array (double-wide MLPs on the shared blocks);
//   - final_logit_softcapping optional, tied embeddings;
//   - the 26B-A4B's experts (blk.N.ffn_gate_inp present): every block's feed-forward is the
//     dense MLP beside softmax-routed experts, top-k renormalised (MoeConfig::dense_branch).
// Not read: Hugging Face folders (convert them with llama.cpp's convert_hf_to_gguf.py).
#include <cmath>

#include "models/arch.h"
#include "models/hybrid_config.h"
#include "models/moe_config.h"

namespace radixlm::models {
namespace {

using core::StatusOr;
using nlohmann::json;

void Conventions(ModelConfig* c) {
  GemmaDecoderConventions(c);
  c->v_norm = true;
  c->attn_v_optional = true;
  c->attention_multiplier = 1.0f;
}

// Per block: the head size and kv heads of its kind, the KV it reads, its MLP size.
core::Status ReadLayerShapes(const formats::GgufFile& g, ModelConfig* c) {
  const std::string a = c->arch + ".";
  RADIXLM_ASSIGN_OR_RETURN(const int64_t hd_swa, g.GetInt(a + "attention.key_length_swa"));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.key_length_swa", hd_swa, 2, 4096));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.key_length", c->head_dim, 2, 4096));
  if (g.GetIntOr(a + "attention.value_length", c->head_dim) != c->head_dim ||
      g.GetIntOr(a + "attention.value_length_swa", hd_swa) != hd_swa)
    return core::DataLoss(g.path() + ": gemma4 needs value heads the size of key heads");
  const int64_t shared = g.GetIntOr(a + "attention.shared_kv_layers", 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.shared_kv_layers", shared, 0, c->n_blocks - 1));
  const int first_shared = c->n_blocks - static_cast<int>(shared);
  int max_kv = 0;
  for (int b = 0; b < c->n_blocks; ++b) {
    const bool slides = c->layer_window[b] > 0;
    const int64_t kv = PerLayer(g, a + "attention.head_count_kv", b);
    const int64_t ffn = PerLayer(g, a + "feed_forward_length", b);
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.head_count_kv", kv, 1, kMaxHeads));
    RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "feed_forward_length", ffn, 1, kMaxDim));
    c->layer_head_dim.push_back(static_cast<int>(slides ? hd_swa : c->head_dim));
    c->layer_kv_heads.push_back(static_cast<int>(kv));
    c->layer_ffn.push_back(static_cast<int>(ffn));
    max_kv = std::max(max_kv, static_cast<int>(kv));
    // llama.cpp: a shared block reads block first_shared - 2 if it slides, else first_shared - 1.
    c->layer_kv_source.push_back(b < first_shared ? b : first_shared - (slides ? 2 : 1));
    if (c->layer_kv_source.back() < 0) return core::DataLoss(g.path() + ": shared_kv_layers leaves no layer to share");
  }
  c->n_kv_heads = max_kv;
  for (int f : c->layer_ffn) c->ffn_dim = std::max(c->ffn_dim, f);
  return core::Status::Ok();
}

// The 26B-A4B: experts in every block beside its dense MLP (the shared expert, ffn_dim wide);
// softmax over all experts, the top `used` renormalised (llama.cpp: LLM_FFN_GELU, norm_w true).
core::Status ReadExperts(const formats::GgufFile& g, ModelConfig* c) {
  RADIXLM_RETURN_IF_ERROR(ReadMoeGguf(g, c->arch, 0, &c->moe));
  for (int f : c->layer_ffn)
    if (f != c->ffn_dim) return core::Unimplemented(g.path() + ": gemma4 experts with MLP sizes that differ by block");
  c->layer_ffn.clear();
  c->moe.gating = MoeConfig::Gating::kSoftmax;
  c->moe.norm_weights = true;
  c->moe.weights_scale = 1.0f;
  c->moe.dense_branch = true;
  c->moe.shared_ffn = c->ffn_dim;
  UseExperts(c);
  return core::Status::Ok();
}

StatusOr<ModelConfig> FromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_RETURN_IF_ERROR(ReadGgufTrunk(g, 2, &c));
  const std::string a = c.arch + ".";
  RADIXLM_ASSIGN_OR_RETURN(const int64_t head_dim, g.GetInt(a + "attention.key_length"));
  c.head_dim = static_cast<int>(head_dim);
  c.rms_eps = static_cast<float>(g.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 1e6);
  c.rope_theta_swa = g.GetFloatOr(a + "rope.freq_base_swa", 1e4);
  c.max_context = g.GetIntOr(a + "context_length", 131072);
  if (!g.Find(a + "attention.sliding_window_pattern"))
    return core::DataLoss(g.path() + ": gemma4 needs attention.sliding_window_pattern");
  RADIXLM_ASSIGN_OR_RETURN(c.layer_window, ReadGgufSlidingWindows(g, c.n_blocks, 0));
  RADIXLM_RETURN_IF_ERROR(ReadLayerShapes(g, &c));
  if (g.GetIntOr(a + "rope.dimension_count", c.head_dim) != c.head_dim)
    return core::Unimplemented(g.path() + ": gemma4 global layers rotate the whole head (proportional RoPE via rope_freqs)");
  c.rope_dim_swa = static_cast<int>(g.GetIntOr(a + "rope.dimension_count_swa", 0));
  for (int b = 0; b < c.n_blocks; ++b)
    if (c.layer_window[b] > 0 && c.rope_dim_swa > c.layer_head_dim[b])
      return core::DataLoss(g.path() + ": rope.dimension_count_swa exceeds the sliding head size");
  const int64_t pl = g.GetIntOr(a + "embedding_length_per_layer_input", 0);
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "embedding_length_per_layer_input", pl, 0, kMaxDim));
  c.per_layer_input = static_cast<int>(pl);
  Conventions(&c);
  c.final_logit_softcap = static_cast<float>(g.GetFloatOr(a + "final_logit_softcapping", 0.0));
  if (g.tensors().Find(Blk(0, "ffn_gate_inp.weight"))) RADIXLM_RETURN_IF_ERROR(ReadExperts(g, &c));
  RADIXLM_RETURN_IF_ERROR(ReadGgufVocabulary(g, &c));
  return c;
}

StatusOr<ModelConfig> FromHf(const json&, const std::string& path, const std::string&) {
  return core::Unimplemented(path + ": Gemma 4 is read from GGUF files; convert the folder with llama.cpp's "
                             "convert_hf_to_gguf.py");
}

HfTensorRef HfTensor(const ModelConfig&, const std::string& gguf_name) { return {gguf_name}; }

core::Status GgufMetadata(const ModelConfig&, formats::GgufWriter*) {
  return core::Unimplemented("gemma4 export: radixlm reads Gemma 4 files but does not write them");
}

json HfConfig(const ModelConfig&) { return json::object(); }

void HfLayout(const ModelConfig&, std::vector<NamedTensor>*) {}

}  // namespace

const ArchSpec& Gemma4Arch() {
  static const ArchSpec a = MakeArch("gemma4", {}, "Gemma4ForCausalLM", Conventions,
                                     {FromGguf, FromHf, HfTensor, GgufMetadata, HfConfig, HfLayout});
  return a;
}

}  // namespace radixlm::models
