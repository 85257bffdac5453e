// Analytic cost of caching a prefix on a hybrid (attention + Mamba2 + MLP) model: the bytes a
// cached prefix occupies and the FLOPs a hit on it saves. Used by the hybrid prefix cache to rank
// eviction candidates (Marconi's FLOP efficiency) and by the simulator to report FLOPs saved.
//
// Two accountings (docs/hybrid-cache.md lists every formula and difference):
//  - kCorrected (default): attention with grouped-query widths, gated or plain MLP with its real
//    intermediate size, Mamba2 with expand/groups/heads/conv, KV bytes from the kv width, and an
//    SSM checkpoint of (d_inner*d_state + conv_dim*(d_conv-1)) elements per layer, the engine's
//    state layout.
//  - kReference: exactly what the Marconi artifact (ruipeterpan/marconi@0801661, utils.py)
//    computes: MHA attention 8LD^2+4L^2D, MLP 16LD^2, Mamba 12LD^2+16LDN+10LD, KV 2*L*D*2 bytes,
//    SSM state D*N*2 + (2D+2N)*4*2 bytes (it counts D*N, not expand*D*N, state elements).
// All integer arithmetic is exact (FLOP counts of long contexts overflow 2^53, and the reference
// divides exact Python integers), so ratios are formed with ExactRatio().
#pragma once

#include <cstdint>
#include <string>

namespace radixlm::cache {

using Flops = __int128;  // exact; a long SWE-bench trace saves more than 2^63 FLOPs in total

// The layer shapes that matter for caching. Counts are per model; widths per layer.
struct HybridShape {
  std::string name;
  int n_attn_layers = 0;
  int n_ssm_layers = 0;
  int n_mlp_layers = 0;
  int64_t d_model = 0;
  // Attention (0 = multi-head with q and kv width d_model).
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  // MLP (0 = the reference's 4*d_model, two projections).
  int64_t d_ff = 0;
  bool gated_mlp = false;
  // Mixture-of-experts feed-forward layers (counted in n_mlp_layers): a token runs the router
  // over moe_experts, moe_used experts of moe_ffn and the shared expert of moe_shared_ffn (its
  // active parameters; d_ff is unused when moe_used > 0).
  int64_t moe_experts = 0, moe_used = 0, moe_ffn = 0, moe_shared_ffn = 0;
  // How many of the n_mlp_layers are experts when some are dense (LFM2-8B-A1B's leading dense
  // blocks, d_ff wide); -1: all of them (when moe_used > 0).
  int n_moe_layers = -1;
  // Mamba2 mixer.
  int64_t d_state = 128, expand = 2, n_groups = 1, d_conv = 4, ssm_heads = 0;
  // The recurrent layers are Gated DeltaNet (Qwen3.5) instead: key and value heads of
  // gdn_head_dim, a [v_heads, head_dim, head_dim] state per layer; d_conv as above.
  bool delta_net = false;
  int64_t gdn_k_heads = 0, gdn_v_heads = 0, gdn_head_dim = 0;
  // The recurrent layers are LFM2's short convolutions instead: in_proj to 3 d_model, a
  // depthwise conv of d_conv taps, out_proj; a state of d_conv - 1 rows of d_model.
  bool short_conv = false;
  // Attention whose q projection also produces an output gate (doubled rows).
  bool attn_output_gate = false;
  // Bytes per stored element of the KV cache and of an SSM checkpoint.
  int kv_elem_bytes = 2, state_elem_bytes = 2;
  // Sliding-window attention layers served from window rings (counted in n_attn_layers): a
  // query attends to at most `window` keys, their KV is no cached node's (a checkpoint holds
  // it: window_state_bytes more per checkpoint).
  int n_window_layers = 0;
  int64_t window = 0;
  int64_t window_state_bytes = 0;
  // K and V values a token keeps in the paged layers when layers differ in shape or share KV
  // (Gemma 4); 0 = 2 KvDim() per paged layer.
  int64_t kv_values_per_token = 0;

  // Sequences carry states (SSM layers or window rings): a hit needs a checkpoint.
  bool HasStates() const { return n_ssm_layers > 0 || window_state_bytes > 0; }
  int64_t QDim() const { return n_heads && head_dim ? n_heads * head_dim : d_model; }
  int64_t KvDim() const { return n_kv_heads && head_dim ? n_kv_heads * head_dim : d_model; }
  int64_t DInner() const { return expand * d_model; }
  int64_t ConvDim() const { return DInner() + 2 * n_groups * d_state; }
  int64_t SsmHeads() const { return ssm_heads ? ssm_heads : DInner() / 64; }
  int64_t GdnValueDim() const { return gdn_v_heads * gdn_head_dim; }
  int64_t GdnConvDim() const { return 2 * gdn_k_heads * gdn_head_dim + GdnValueDim(); }
};

enum class Accounting { kCorrected, kReference };

class CostModel {
 public:
  CostModel(HybridShape shape, Accounting accounting) : shape_(std::move(shape)), acc_(accounting) {}

  const HybridShape& shape() const { return shape_; }
  Accounting accounting() const { return acc_; }

  // Per-layer FLOPs of running `tokens` tokens through one layer of each kind (forward only).
  Flops AttentionFlops(int64_t tokens) const;
  // One sliding-window layer (shape().window; the causal pairs end `window` keys back).
  Flops WindowAttentionFlops(int64_t tokens) const;
  // Every attention layer: full ones and sliding ones.
  Flops AllAttentionFlops(int64_t tokens) const;
  Flops MlpFlops(int64_t tokens) const;
  // Every feed-forward layer's: MlpFlops per layer, dense and expert layers each as they are.
  Flops AllMlpFlops(int64_t tokens) const;
  Flops SsmFlops(int64_t tokens) const;
  // Bytes of one SSM checkpoint of one layer, and of the KV of `tokens` tokens of one layer.
  int64_t SsmStateBytesPerLayer() const;
  int64_t KvBytesPerLayer(int64_t tokens) const;

  // Whole model: bytes of one checkpoint (all SSM layers) and KV of `tokens` (all attention layers).
  int64_t CheckpointBytes() const { return shape_.n_ssm_layers * SsmStateBytesPerLayer() + shape_.window_state_bytes; }
  int64_t KvBytes(int64_t tokens) const {
    if (shape_.kv_values_per_token > 0 && acc_ == Accounting::kCorrected)
      return tokens * shape_.kv_values_per_token * shape_.kv_elem_bytes;
    return (shape_.n_attn_layers - shape_.n_window_layers) * KvBytesPerLayer(tokens);
  }

  // FLOPs a hit of `tokens` prefix tokens saves (the simulator's "FLOPs saved" metric).
  Flops PrefixFlops(int64_t tokens) const;
  // FLOPs a cached node saves beyond its parent: the node's edge covers tokens
  // [parent_len, parent_len + edge_len). The reference subtracts the parent's *attention* FLOPs
  // from the MLP term (its bug, kept in kReference).
  Flops NodeMarginalFlops(int64_t parent_len, int64_t edge_len) const;
  // Bytes charged to a node when ranking it: the reference charges the KV of the whole prefix
  // plus one checkpoint; corrected charges what evicting it frees (edge KV + checkpoint).
  int64_t NodeRankingBytes(int64_t parent_len, int64_t edge_len) const;

 private:
  HybridShape shape_;
  Accounting acc_;
};

// num/den rounded once to the nearest double (ties to even), as Python's int/int true division.
double ExactRatio(Flops num, Flops den);
std::string FlopsToString(Flops value);

// The paper's 7B hybrid (arXiv 2406.07887 as configured in Marconi): 24 SSM, 4 attention,
// 28 MLP layers, d_model 4096, MHA, fp16. d_state is 128 or 16.
HybridShape Marconi7BShape(int64_t d_state);

}  // namespace radixlm::cache
