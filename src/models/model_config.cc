#include "models/model_config.h"

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <string>

namespace radixlm::models {

const char* LayerKindName(LayerKind k) {
  switch (k) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kMlp: return "mlp";
    case LayerKind::kMamba2: return "mamba2";
    case LayerKind::kDeltaNet: return "deltanet";
    case LayerKind::kMoe: return "moe";
    case LayerKind::kShortConv: return "shortconv";
  }
  return "?";
}

const char* GatingName(MoeConfig::Gating g) {
  switch (g) {
    case MoeConfig::Gating::kSoftmax: return "softmax";
    case MoeConfig::Gating::kSigmoid: return "sigmoid";
    case MoeConfig::Gating::kSoftmaxChosen: return "softmax over the chosen";
  }
  return "?";
}

std::vector<LayerKind> DenseLayers(int n_blocks) {
  std::vector<LayerKind> v;
  for (int i = 0; i < n_blocks; ++i) {
    v.push_back(LayerKind::kAttention);
    v.push_back(LayerKind::kMlp);
  }
  return v;
}

int ModelConfig::CountLayers(LayerKind kind) const {
  return static_cast<int>(std::count(layers.begin(), layers.end(), kind));
}

int ModelConfig::n_ssm_layers() const {
  int n = 0;
  for (LayerKind k : layers) n += IsRecurrent(k);
  return n;
}

std::vector<int> ModelConfig::SublayerBlocks() const {
  std::vector<int> blocks;
  int block = 0;
  for (LayerKind k : layers) {
    blocks.push_back(block);
    if (block_per_sublayer || IsFeedForward(k)) ++block;
  }
  return blocks;
}

int ModelConfig::n_attention_layers() const {
  int n = 0;
  for (LayerKind k : layers) n += k == LayerKind::kAttention;
  return n;
}

namespace {
int64_t MlpMatrices(ModelConfig::MlpAct act) { return act == ModelConfig::MlpAct::kRelu2 ? 2 : 3; }
}  // namespace

namespace {
// Parameters of one sublayer, the `index`-th of its kind; a MoE sublayer's experts counted
// `experts_counted` times. A layer reading another's KV has no k / v projections.
int64_t SublayerParameters(const ModelConfig& c, LayerKind k, int64_t experts_counted, int index) {
  const int64_t d = c.d_model;
  const int64_t hd = k == LayerKind::kAttention ? c.AttnHeadDim(index) : c.head_dim;
  const int64_t q = int64_t{c.n_heads} * hd * (c.attn_output_gate ? 2 : 1);
  const int64_t kv = k == LayerKind::kAttention && c.OwnsKv(index) ? int64_t{c.AttnKvHeads(index)} * hd : 0;
  const int64_t q_out = int64_t{c.n_heads} * hd;
  const kernels::Mamba2Dims s = c.ssm_dims();
  const kernels::DeltaNetDims g = c.gdn_dims();
  switch (k) {
    case LayerKind::kAttention:
      return d + d * (q + 2 * kv) + q_out * d + (c.qk_norm ? 2 * hd : 0) + (c.qkv_bias ? q + 2 * kv : 0);
    case LayerKind::kMlp: return d + MlpMatrices(c.mlp_act) * d * c.MlpFfn(index);
    case LayerKind::kMamba2:
      return d + d * (s.d_inner() + s.conv_dim() + s.n_heads) + s.conv_dim() * (s.d_conv + 1) + 3 * s.n_heads +
             s.d_inner() + s.d_inner() * d;
    case LayerKind::kDeltaNet:  // qkv | z | b | a in, conv (no bias), dt_bias and A per value head, the output norm, out
      return d + d * (g.conv_dim() + g.value_dim() + 2 * g.v_heads) + g.conv_dim() * g.d_conv + 2 * g.v_heads +
             g.head_dim + g.value_dim() * d;
    case LayerKind::kShortConv: return d + 3 * d * d + d * c.short_conv + d * d;  // norm, in, conv, out
    case LayerKind::kMoe: {
      const MoeConfig& m = c.moe;
      const int64_t mats = MlpMatrices(c.mlp_act);
      return d + d * m.experts + (m.selection_bias ? m.experts : 0) + experts_counted * mats * d * m.ffn +
             mats * d * m.shared_ffn + (m.shared_gate ? d : 0);
    }
  }
  return 0;
}

// Every sublayer's parameters, the experts counted `experts_counted` times, and Gemma 4's
// per-layer input weights (the table, the projection and norm, each block's gate, proj, norm).
int64_t LayerParameters(const ModelConfig& c, int64_t experts_counted) {
  int64_t n = 0;
  int index[5] = {};
  for (LayerKind k : c.layers) n += SublayerParameters(c, k, experts_counted, index[static_cast<int>(k)]++);
  const int64_t P = c.per_layer_input, L = c.n_blocks;
  if (P > 0) n += c.vocab_size * L * P + c.d_model * L * P + P + L * (2 * c.d_model * P + c.d_model);
  return n;
}
}  // namespace

int64_t ModelConfig::ParameterCount() const {
  return vocab_size * d_model * (tied_embeddings ? 1 : 2) + d_model + LayerParameters(*this, moe.experts);
}

int64_t ModelConfig::ActiveParameterCount() const {
  return vocab_size * d_model * (tied_embeddings ? 1 : 2) + d_model + LayerParameters(*this, moe.used);
}

double ModelConfig::LinearFlopsPerToken(bool with_lm_head) const {
  const kernels::Mamba2Dims s = ssm_dims();
  const kernels::DeltaNetDims g = gdn_dims();
  double f = 0;
  int a = 0, m = 0;
  for (LayerKind k : layers) {
    if (k == LayerKind::kAttention) {
      const double q = double(n_heads) * AttnHeadDim(a), qin = attn_output_gate ? 2 * q : q;
      const double kv = OwnsKv(a) ? double(AttnKvHeads(a)) * AttnHeadDim(a) : 0;
      f += 2 * (d_model * (qin + 2 * kv) + q * d_model);
      ++a;
    } else if (k == LayerKind::kMlp) {
      f += 2.0 * MlpMatrices(mlp_act) * d_model * MlpFfn(m++);
    } else if (k == LayerKind::kMamba2) {
      f += 2.0 * d_model * double(s.d_inner() + s.conv_dim() + s.n_heads) + 2.0 * s.d_inner() * d_model;
    } else if (k == LayerKind::kShortConv) {
      f += 2.0 * 4 * double(d_model) * d_model;  // in_proj (3 d) and out_proj
    } else if (k == LayerKind::kDeltaNet) {
      f += 2.0 * d_model * double(g.conv_dim() + g.value_dim() + 2 * g.v_heads) + 2.0 * double(g.value_dim()) * d_model;
    } else {  // the router, the chosen experts and the shared expert
      f += 2.0 * d_model * (moe.experts + MlpMatrices(mlp_act) * double(moe.used * int64_t{moe.ffn} + moe.shared_ffn) +
                            (moe.shared_gate ? 1 : 0));
    }
  }
  // Gemma 4's per-layer inputs: the projection of the embeddings, each block's gate and proj.
  if (per_layer_input > 0) f += 2.0 * n_blocks * per_layer_input * 3.0 * d_model;
  if (with_lm_head) f += 2.0 * d_model * vocab_size;
  return f;
}

core::Status CheckSize(const std::string& what, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return core::Status::Ok();
  return core::DataLoss(what + " is " + std::to_string(value) + "; expected " + std::to_string(lo) + " to " +
                        std::to_string(hi));
}

namespace {
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The scalars a file states (norm epsilon, context, Granite's multipliers, llama3 RoPE scaling):
// the first out of range, "" when all are plausible.
std::string CheckScalars(const ModelConfig& c) {
  // Numbers a file states that no model can have: they would run and produce NaN logits.
  // Real checkpoints use 1e-6 to 1e-5 (BERT's layer norms 1e-12); 1e-45 is a denormal that
  // still runs, and only differs in the last bits: refused as no model's.
  if (!(std::isfinite(c.rms_eps) && c.rms_eps >= 1e-12f && c.rms_eps <= 0.1f))
    return "the norm epsilon must be in [1e-12, 0.1], not " + Num(c.rms_eps);
  if (c.max_context <= 0) return "the context length must be positive";
  // Scales a Granite config states: 0, 1e-45 or 1e39 would load and make every logit NaN or
  // inf. Real checkpoints use 1 to ~100 (logits_scaling 8, embedding_multiplier 12, ...).
  for (const auto& [name, v] : {std::pair{"logits_scaling", c.logits_scaling}, {"embedding_multiplier", c.embedding_multiplier},
                                {"residual_multiplier", c.residual_multiplier}})
    if (!(std::isfinite(v) && std::abs(v) >= 1e-6f && std::abs(v) <= 1e6f))
      return std::string(name) + " must be a finite number of magnitude 1e-6 to 1e6, not " + Num(v);
  if (!(std::isfinite(c.attention_multiplier) && c.attention_multiplier >= 0 && c.attention_multiplier <= 1e6f) ||
      (c.attention_multiplier != 0 && c.attention_multiplier < 1e-6f))
    return "attention_multiplier must be 0 (1/sqrt(head_dim)) or a finite number in [1e-6, 1e6], not " +
           Num(c.attention_multiplier);
  if (c.rope_scaling.factor != 0) {  // llama3 scaling: a factor stretches the wavelengths, >= 1
    const kernels::Llama3RopeScaling& r = c.rope_scaling;
    if (!(std::isfinite(r.factor) && r.factor >= 1 && r.factor <= 1e4f))
      return "rope_scaling factor must be in [1, 1e4], not " + Num(r.factor);
    if (!(std::isfinite(r.low_freq_factor) && std::isfinite(r.high_freq_factor) && r.low_freq_factor > 0 &&
          r.high_freq_factor > r.low_freq_factor && r.original_max_position > 0))
      return "rope_scaling needs 0 < low_freq_factor < high_freq_factor and a positive original_max_position_embeddings";
  }
  return "";
}

// The sizes of the mixers the model has (attention, Mamba2, Gated DeltaNet): the first
// inconsistency, "" when none.
std::string CheckMixers(const ModelConfig& c) {
  if (c.n_attention_layers() > 0) {
    // 1e4 to 1e8 in real checkpoints (Qwen3.5 1e7); 1e38 runs but leaves no rotation at all.
    if (c.use_rope && !(std::isfinite(c.rope_theta) && c.rope_theta > 1.0 && c.rope_theta <= 1e12))
      return "rope_theta must be a finite number in (1, 1e12], not " + Num(c.rope_theta);
    if (c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0) return "attention sizes must be positive";
    if (c.n_heads % c.n_kv_heads != 0) return "n_heads must be a multiple of n_kv_heads";
    if (c.n_heads / c.n_kv_heads > 16) return "more than 16 query heads per kv head is not supported";
    if (c.use_rope && c.head_dim % 2 != 0) return "head_dim must be even for RoPE";
  }
  if (c.CountLayers(LayerKind::kMamba2) > 0) {
    if (c.ssm_heads <= 0 || c.ssm_head_dim <= 0 || c.ssm_state <= 0 || c.ssm_groups <= 0 || c.ssm_conv < 2)
      return "Mamba2 sizes must be positive (and d_conv >= 2)";
    if (c.ssm_heads % c.ssm_groups != 0) return "Mamba2 heads must be a multiple of the groups";
    if ((c.ssm_heads * c.ssm_head_dim) % c.ssm_norm_group_size() != 0) return "gated-norm group must divide d_inner";
    if (c.ssm_chunk < 0) return "the Mamba2 scan chunk must be 0 (exact recurrence) or positive";
  }
  if (c.CountLayers(LayerKind::kShortConv) > 0 && (c.short_conv < 2 || c.short_conv > 64))
    return "the short convolution's kernel must be 2 to 64 tokens";
  if (c.CountLayers(LayerKind::kDeltaNet) > 0) {
    if (c.gdn_k_heads <= 0 || c.gdn_v_heads <= 0 || c.gdn_head_dim <= 0 || c.ssm_conv < 2)
      return "Gated DeltaNet sizes must be positive (and the conv kernel >= 2)";
    if (c.gdn_k_heads > kMaxHeads || c.gdn_v_heads > kMaxHeads || c.gdn_head_dim > 4096)
      return "implausible Gated DeltaNet sizes";
    if (c.gdn_v_heads % c.gdn_k_heads != 0) return "Gated DeltaNet value heads must be a multiple of its key heads";
  }
  return "";
}

// The mixture of experts' sizes, groups and weights scale: the first inconsistency, "" when none.
std::string CheckMoe(const MoeConfig& m) {
  if (m.experts <= 0 || m.used <= 0 || m.ffn <= 0) return "mixture-of-experts sizes must be positive";
  if (m.experts > 4096 || m.ffn > kMaxDim || m.shared_ffn < 0 || m.shared_ffn > kMaxDim) return "implausible expert sizes";
  if (m.used > m.experts) return "more experts used per token than there are experts";
  if (m.groups < 1 || m.groups_used < 1 || m.groups_used > m.groups || m.experts % m.groups != 0 ||
      (m.groups > 1 && m.used > (m.experts / m.groups) * m.groups_used))
    return "expert groups must divide the experts and hold the experts used";
  if (!(std::isfinite(m.weights_scale) && m.weights_scale > 0 && m.weights_scale <= 1e6f))
    return "the expert weights scale must be a finite positive number, not " + Num(m.weights_scale);
  return "";
}

// Per-layer head shapes, KV sources and MLP sizes (Gemma 4): the first inconsistency, "" when none.
std::string CheckPerLayerShapes(const ModelConfig& c) {
  const size_t n_attn = static_cast<size_t>(c.n_attention_layers());
  for (const std::vector<int>* v : {&c.layer_head_dim, &c.layer_kv_heads, &c.layer_kv_source})
    if (!v->empty() && v->size() != n_attn) return "per-layer attention shapes need one entry per attention layer";
  if (!c.layer_ffn.empty() && c.layer_ffn.size() != static_cast<size_t>(c.CountLayers(LayerKind::kMlp)))
    return "per-layer MLP sizes need one entry per MLP layer";
  for (int f : c.layer_ffn)
    if (f <= 0 || f > kMaxDim) return "an MLP size must be positive and at most 2^20";
  for (int a = 0; a < static_cast<int>(n_attn); ++a) {
    const int hd = c.AttnHeadDim(a), kv = c.AttnKvHeads(a), src = c.KvSource(a);
    if (hd <= 0 || hd > 4096 || kv <= 0 || kv > kMaxHeads) return "per-layer head sizes must be positive and plausible";
    if (c.n_heads % kv != 0 || c.n_heads / kv > 16) return "a layer's kv heads must divide n_heads (at most 16 q heads each)";
    if (c.use_rope && hd % 2 != 0) return "head dims must be even for RoPE";
    if (src < 0 || src > a) return "a layer reads the KV of itself or of an earlier layer";
    const bool slides = !c.layer_window.empty() && c.layer_window[a] > 0;
    const bool src_slides = !c.layer_window.empty() && c.layer_window[src] > 0;
    if (src != a && (!c.OwnsKv(src) || c.AttnHeadDim(src) != hd || c.AttnKvHeads(src) != kv || slides != src_slides ||
                     (slides && c.layer_window[src] != c.layer_window[a])))
      return "a layer sharing KV must read a layer of its own kind and shape that keeps its KV";
  }
  if (c.rope_dim_swa < 0 || c.rope_dim_swa % 2 != 0) return "the sliding layers' rotary dims must be even";
  if (c.per_layer_input < 0 || c.per_layer_input > 1 << 16) return "implausible per-layer input width";
  return "";
}

}  // namespace

std::string ModelConfig::Validate() const {
  if (vocab_size <= 0 || d_model <= 0) return "sizes must be positive";
  if (layers.empty()) return "model has no layers";
  // Upper bounds first, so the products below cannot overflow.
  if (vocab_size > kMaxVocab || d_model > kMaxDim || ffn_dim > kMaxDim || layers.size() > 3 * size_t{kMaxBlocks})
    return "implausible sizes (vocabulary, width, MLP or layer count)";
  if (n_heads > kMaxHeads || n_kv_heads > kMaxHeads || head_dim > kMaxDim || ssm_heads > kMaxHeads ||
      ssm_head_dim > kMaxDim || ssm_state > kMaxDim || ssm_groups > kMaxHeads || ssm_conv > 1024 ||
      int64_t{ssm_heads} * ssm_head_dim > kMaxDim || int64_t{n_heads} * head_dim > kMaxDim)
    return "implausible attention or Mamba2 sizes";
  if (std::string problem = CheckScalars(*this); !problem.empty()) return problem;
  if (std::string problem = CheckMixers(*this); !problem.empty()) return problem;
  if (CountLayers(LayerKind::kMlp) > 0 && ffn_dim <= 0) return "the MLP size must be positive";
  if (CountLayers(LayerKind::kMoe) > 0) {
    if (std::string problem = CheckMoe(moe); !problem.empty()) return problem;
  }
  if (rope_dim < 0 || rope_dim > head_dim || rope_dim % 2 != 0) return "the rotary dims must be even and at most head_dim";
  if (!layer_window.empty() && layer_window.size() != static_cast<size_t>(n_attention_layers()))
    return "one sliding window entry per attention layer";
  if (std::string problem = CheckPerLayerShapes(*this); !problem.empty()) return problem;
  for (int w : layer_window)
    if (w < 0 || w > (1 << 24)) return "a sliding window must be between 0 and 2^24 tokens";
  return "";
}

int ModelConfig::AttnHeadDim(int a) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[a]; }
int ModelConfig::AttnKvHeads(int a) const { return layer_kv_heads.empty() ? n_kv_heads : layer_kv_heads[a]; }
int ModelConfig::KvSource(int a) const { return layer_kv_source.empty() ? a : layer_kv_source[a]; }
int ModelConfig::MlpFfn(int m) const { return layer_ffn.empty() ? ffn_dim : layer_ffn[m]; }

int ModelConfig::max_head_dim() const {
  int h = head_dim;
  for (int x : layer_head_dim) h = std::max(h, x);
  return h;
}

int64_t ModelConfig::max_kv_dim() const {
  int64_t m = 0;
  for (int a = 0; a < n_attention_layers(); ++a) m = std::max<int64_t>(m, int64_t{AttnKvHeads(a)} * AttnHeadDim(a));
  return m;
}

int ModelConfig::max_ffn() const {
  int f = ffn_dim;
  for (int x : layer_ffn) f = std::max(f, x);
  return f;
}

int64_t ModelConfig::KvValuesPerToken(bool sliding, bool full) const {
  int64_t n = 0;
  for (int a = 0; a < n_attention_layers(); ++a) {
    const bool slides = !layer_window.empty() && layer_window[a] > 0;
    if (OwnsKv(a) && (slides ? sliding : full)) n += 2 * int64_t{AttnKvHeads(a)} * AttnHeadDim(a);
  }
  return n;
}

int ModelConfig::n_sliding_layers() const {
  int n = 0;
  for (int w : layer_window) n += w > 0;
  return n;
}

int ModelConfig::sliding_window() const {
  int w = 0;
  for (int x : layer_window) w = std::max(w, x);
  return w;
}

}  // namespace radixlm::models
