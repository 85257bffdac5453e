// What a model is, independent of where its weights come from: sizes, the list of layers by
// kind (so hybrids of attention, MLP and Mamba2 layers fit the same description), and the
// conventions (RoPE layout, q/k norm, biases, tied embeddings).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/delta_net.h"
#include "kernels/ops.h"
#include "kernels/ssm.h"

namespace radixlm::models {

// A sublayer applies x += F(norm(x)) (pre-norm residual). A Llama/Qwen decoder block is an
// attention sublayer followed by an MLP sublayer.
// kShortConv: LFM2's gated short convolution (ModelConfig::short_conv).
enum class LayerKind { kAttention, kMlp, kMamba2, kDeltaNet, kMoe, kShortConv };
inline bool IsRecurrent(LayerKind k) {
  return k == LayerKind::kMamba2 || k == LayerKind::kDeltaNet || k == LayerKind::kShortConv;
}
// A feed-forward sublayer (dense MLP or mixture of experts): it ends a mixer + MLP block.
inline bool IsFeedForward(LayerKind k) { return k == LayerKind::kMlp || k == LayerKind::kMoe; }

// A mixture-of-experts feed-forward (LayerKind::kMoe): a router scores `experts` experts per
// token and the `used` best run, each an MLP of hidden size `ffn` with the model's activation
// (SiLU-gated, or relu^2 for Nemotron-H); their outputs are summed with the routing weights,
// plus an optional shared expert run on every token. The routing, as llama.cpp's build_moe_ffn
// and the Hugging Face definitions compute it:
//   probs = softmax(logits) | sigmoid(logits) | logits (kSoftmaxChosen)
//   chosen = the `used` largest of probs + selection bias (the bias only ranks; with groups > 1
//            only experts in the `groups_used` groups with the largest top-2 sums compete)
//   weights = probs[chosen]; kSoftmaxChosen: softmax over the chosen logits;
//   norm_weights: divided by their sum (at least 2^-14); then times weights_scale.
struct MoeConfig {
  enum class Gating { kSoftmax, kSigmoid, kSoftmaxChosen };
  int experts = 0, used = 0, ffn = 0;
  int shared_ffn = 0;            // shared expert hidden size; 0 = none
  bool shared_gate = false;      // shared expert output times sigmoid(w . x) (Qwen3.5 / Qwen3-Next MoE)
  Gating gating = Gating::kSoftmax;
  bool norm_weights = true;
  float weights_scale = 1.0f;
  bool selection_bias = false;   // a per-expert bias added to probs for the choice (exp_probs_b)
  bool router_bias = false;      // gpt-oss: a bias on the router's logits (it changes weights too)
  bool expert_bias = false;      // gpt-oss: biases on each expert's gate, up and down outputs
  int groups = 1, groups_used = 1;
  // Gemma 4 (26B-A4B): the block's dense MLP (the shared expert, shared_ffn wide) runs beside
  // the experts rather than on their input: mlp = post_norm_1(MLP(ffn_norm(x))); the router
  // reads rms_norm(x) / sqrt(d_model) * router_scale; the experts read pre_norm_2(x), each
  // output times its down_scale; moe = post_norm_2(sum); x += post_ffw_norm(mlp + moe).
  bool dense_branch = false;
};
const char* GatingName(MoeConfig::Gating g);
const char* LayerKindName(LayerKind k);

struct ModelConfig {
  std::string arch;            // "llama", "qwen2", "qwen3", "mamba2", "nemotron_h", "granitehybrid"
  std::string name;            // human-readable, e.g. "random:qwen3-0.6b" or general.name
  int64_t vocab_size = 0;
  int d_model = 0;
  int n_blocks = 0;            // decoder blocks (HF num_hidden_layers)
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn_dim = 0;
  float rms_eps = 1e-6f;
  double rope_theta = 10000.0;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kNeox;
  int rope_dim = 0;            // rotated dims per head (partial rotary, Qwen3.5: 64 of 256); 0 = head_dim
  // llama.cpp's interleaved multi-section RoPE (IMROPE) sections [t, h, w, e] over the rotated
  // pairs: for text every t/h/w pair turns with the token's position and an e pair (position 0
  // for text) does not turn. Empty: every pair turns.
  std::vector<int> rope_sections;
  kernels::Llama3RopeScaling rope_scaling;  // factor 0 = none
  kernels::YarnRopeScaling rope_yarn;       // factor 0 = none (gpt-oss)
  std::vector<float> rope_freq_factors;     // GGUF rope_freqs.weight: inv_freq[i] /= factor[i]
  bool qk_norm = false;        // Qwen3: per-head RMSNorm on q and k before RoPE
  bool qkv_bias = false;       // Qwen2: bias on the q, k, v projections
  // Qwen3.5: the q projection is doubled, each head's q followed by its output gate; the
  // attention output is multiplied by sigmoid(gate) before o_proj.
  bool attn_output_gate = false;
  bool attn_output_bias = false;  // gpt-oss: a bias on o_proj
  bool attn_sinks = false;        // gpt-oss: a learned sink logit per q head (kernels::AttentionParams::sinks)
  // A mixer + MLP block's second norm, by its GGUF stem: "ffn_norm" (Llama, Granite) or
  // "post_attention_norm" (Qwen3.5).
  std::string mlp_norm_tensor = "ffn_norm";
  // The final norm's GGUF stem: "output_norm", or LFM2's "token_embd_norm".
  std::string final_norm_tensor = "output_norm";
  // Where a Hugging Face checkpoint keeps the decoder's tensors, for architectures whose name
  // map depends on it ("model.language_model." in Qwen3.5's multimodal checkpoints).
  std::string hf_tensor_prefix;
  bool tied_embeddings = false;
  int64_t max_context = 4096;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::vector<LayerKind> layers;  // sublayers in execution order

  // Mamba2 mixer (ssm_heads > 0 when the model has Mamba2 layers).
  int ssm_heads = 0, ssm_head_dim = 0, ssm_state = 0, ssm_groups = 1, ssm_conv = 4;
  int ssm_norm_group = 0;      // gated-norm group size; 0 = the whole d_inner (HF Mamba2, Granite)
  bool ssm_conv_bias = true;
  // The scan: 0 = the exact recurrence (kernels::Mamba2ScanRecurrent: bitwise the same however
  // a sequence's tokens are split into steps, which is what lets a checkpoint, a preemption or
  // a step budget never change an answer); N > 0 = the chunked (SSD) form with chunks of N
  // tokens, whose bits depend on where a chunk starts. A runtime choice, not the file's.
  int ssm_chunk = 0;
  // Gated DeltaNet mixer (kernels/delta_net.h; gdn_v_heads > 0 when the model has one): key
  // and value heads of head_dim each; its conv kernel is ssm_conv. gdn_tiled: value head j
  // reads key head j % k_heads (llama.cpp's GGUF layout) rather than j / (v / k) (HF's).
  int gdn_k_heads = 0, gdn_v_heads = 0, gdn_head_dim = 0;
  bool gdn_tiled = true;
  kernels::DeltaNetDims gdn_dims() const { return {gdn_k_heads, gdn_v_heads, gdn_head_dim, ssm_conv, gdn_tiled}; }
  // LFM2's short convolution (LayerKind::kShortConv): in_proj to B, C, x [d_model each];
  // y = C * conv(B * x) over a window of short_conv tokens (depthwise, no bias, no activation);
  // out_proj. Its state is the last short_conv - 1 values of B * x (tiny: a checkpoint is cheap).
  int short_conv = 0;
  kernels::Mamba2Dims short_conv_dims() const { return kernels::DepthwiseConvDims(d_model, short_conv); }
  MoeConfig moe;  // experts > 0 when the model has LayerKind::kMoe sublayers
  // Hybrid conventions.
  // The feed-forward's activation: SiLU(gate) * up (Llama), GELU-tanh(gate) * up (Gemma's
  // GeGLU), gpt-oss's clamped SwiGLU (g = min(gate, 7): g sigmoid(1.702 g) (clamp(up, -7, 7) +
  // 1)), or relu(x)^2 with no gate (Nemotron-H).
  enum class MlpAct { kSiluGated, kGeluTanhGated, kSwigluOai, kRelu2 };
  MlpAct mlp_act = MlpAct::kSiluGated;
  bool mlp_gated() const { return mlp_act != MlpAct::kRelu2; }
  bool use_rope = true;        // Nemotron-H and Granite-4.0-H attention has no positions
  // Nemotron-H and Mamba2: every sublayer is a block of its own with one norm ("attn_norm");
  // Llama/Qwen/Granite: a block is a mixer then an MLP ("attn_norm", "ffn_norm").
  bool block_per_sublayer = false;
  float embedding_multiplier = 1.0f, residual_multiplier = 1.0f;
  float attention_multiplier = 0.0f;  // attention scale; 0 = 1/sqrt(head_dim)
  float logits_scaling = 1.0f;        // logits are divided by this (Granite)
  float final_logit_softcap = 0.0f;   // > 0: logits = c tanh(logits / c) (Gemma 2 / 4)

  // Sliding-window attention (Gemma 3 / 4, gpt-oss): the attention layers whose `layer_window`
  // entry is nonzero attend only that many last keys (kernels::AttentionParams::window), with
  // RoPE base rope_theta_swa; the others attend the whole prefix with rope_theta. Empty: none.
  std::vector<int> layer_window;   // per attention layer, in execution order
  double rope_theta_swa = 0.0;     // 0 = rope_theta
  int sliding_window() const;      // the largest window (0 when no layer slides)
  int n_sliding_layers() const;    // attention layers with a window
  // Gemma: the attention and the MLP outputs are RMS-normed (post_attention_norm,
  // post_ffw_norm) before their residual adds.
  bool post_norms = false;

  // Per-layer shapes (Gemma 4); each empty = the model-wide value for every layer.
  //   layer_head_dim / layer_kv_heads: per attention layer (sliding layers 256 dims, global
  //     ones 512 with fewer kv heads);
  //   layer_kv_source: per attention layer, the attention layer whose K/V it attends over: itself,
  //     or an earlier layer of the same shape (Gemma 4's shared-KV layers compute only q and
  //     hold no KV of their own);
  //   layer_ffn: per dense MLP layer (Gemma 4 doubles the shared-KV layers' MLP).
  std::vector<int> layer_head_dim, layer_kv_heads, layer_kv_source, layer_ffn;
  int rope_dim_swa = 0;        // the sliding layers' rotated dims; 0 = their head dim
  bool v_norm = false;         // Gemma 4: V is RMS-normed (no weight) before the cache
  bool attn_v_optional = false;  // Gemma 4: a layer without attn_v uses its K projection as V
  // Gemma 4 per-layer embeddings (PLE): per block a width-`per_layer_input` input from a token
  // table and a projection of the embeddings, gated into the residual after the block's MLP.
  int per_layer_input = 0;
  int AttnHeadDim(int attention_layer) const;
  int AttnKvHeads(int attention_layer) const;
  int KvSource(int attention_layer) const;
  bool OwnsKv(int attention_layer) const { return KvSource(attention_layer) == attention_layer; }
  int MlpFfn(int mlp_layer) const;
  int max_head_dim() const;
  int64_t max_kv_dim() const;  // the widest attention layer's n_kv_heads x head_dim
  int max_ffn() const;
  // K and V values one token stores across the attention layers that own their KV, counting the
  // sliding ones, the full ones, or both.
  int64_t KvValuesPerToken(bool sliding, bool full) const;

  // Recurrent layers (Mamba2 and Gated DeltaNet): those whose state the SSM state store holds.
  int n_ssm_layers() const;
  int CountLayers(LayerKind kind) const;
  kernels::Mamba2Dims ssm_dims() const {
    return {ssm_heads, ssm_head_dim, ssm_state, ssm_groups, ssm_conv};
  }
  int ssm_norm_group_size() const { return ssm_norm_group ? ssm_norm_group : ssm_heads * ssm_head_dim; }
  // The block (GGUF blk.N / HF layers.N) each sublayer belongs to.
  std::vector<int> SublayerBlocks() const;

  int n_attention_layers() const;
  // Parameters, counting a tied embedding once; ActiveParameterCount counts only the experts a
  // token uses (and the embedding row it reads once, as the total does).
  int64_t ParameterCount() const;
  int64_t ActiveParameterCount() const;
  // Matmul FLOPs per token excluding attention scores (2 x active non-embedding parameters +
  // lm_head).
  double LinearFlopsPerToken(bool with_lm_head) const;
  std::string Validate() const;  // empty when consistent
};

// Sizes read from a file are untrusted: each is checked against a plausible range before any
// arithmetic uses it (a zero head count would divide by zero, a negative block count ask for
// 2^64 layers). `what` names the file and the field in the error.
constexpr int64_t kMaxBlocks = 4096, kMaxDim = 1 << 20, kMaxHeads = 4096, kMaxVocab = 1 << 24;
core::Status CheckSize(const std::string& what, int64_t value, int64_t lo, int64_t hi);

// Dense decoder: n_blocks x [attention, mlp].
std::vector<LayerKind> DenseLayers(int n_blocks);

}  // namespace radixlm::models
