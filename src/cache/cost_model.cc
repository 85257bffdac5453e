#include "cache/cost_model.h"

#include <algorithm>
#include <cmath>

namespace radixlm::cache {

Flops CostModel::AttentionFlops(int64_t tokens) const {
  const Flops l = tokens, d = shape_.d_model;
  if (acc_ == Accounting::kReference) return 8 * l * d * d + 4 * l * l * d;
  const Flops q = shape_.QDim(), kv = shape_.KvDim(), q_in = shape_.attn_output_gate ? 2 * q : q;
  // Q (and gate), K, V and output projections, then QK^T and AV over the causal pairs (key <= query).
  return 2 * l * d * (q_in + 2 * kv) + 2 * l * q * d + 2 * q * l * (l + 1);
}

Flops CostModel::WindowAttentionFlops(int64_t tokens) const {
  const Flops l = tokens, w = shape_.window;
  if (w == 0 || l <= w || acc_ == Accounting::kReference) return AttentionFlops(tokens);
  const Flops q = shape_.QDim(), kv = shape_.KvDim(), q_in = shape_.attn_output_gate ? 2 * q : q;
  const Flops pairs = w * (w + 1) / 2 + (l - w) * w;  // key in (query - window, query]
  return 2 * l * shape_.d_model * (q_in + 2 * kv) + 2 * l * q * shape_.d_model + 4 * q * pairs;
}

Flops CostModel::AllAttentionFlops(int64_t tokens) const {
  return (shape_.n_attn_layers - shape_.n_window_layers) * AttentionFlops(tokens) +
         shape_.n_window_layers * WindowAttentionFlops(tokens);
}

Flops CostModel::MlpFlops(int64_t tokens) const {
  const Flops l = tokens, d = shape_.d_model;
  if (acc_ == Accounting::kReference) return 16 * l * d * d;
  if (shape_.moe_used > 0)  // the router, then only the chosen experts and the shared one
    return 2 * l * d * shape_.moe_experts +
           (shape_.gated_mlp ? 6 : 4) * l * d * (Flops{shape_.moe_used} * shape_.moe_ffn + shape_.moe_shared_ffn);
  const Flops ff = shape_.d_ff ? shape_.d_ff : 4 * shape_.d_model;
  return (shape_.gated_mlp ? 6 : 4) * l * d * ff;
}

Flops CostModel::AllMlpFlops(int64_t tokens) const {
  if (acc_ == Accounting::kReference || shape_.moe_used == 0 || shape_.n_moe_layers < 0)
    return shape_.n_mlp_layers * MlpFlops(tokens);
  const Flops l = tokens, d = shape_.d_model, ff = shape_.d_ff ? shape_.d_ff : 4 * shape_.d_model;
  const Flops dense = (shape_.gated_mlp ? 6 : 4) * l * d * ff;
  return (shape_.n_mlp_layers - shape_.n_moe_layers) * dense + shape_.n_moe_layers * MlpFlops(tokens);
}

Flops CostModel::SsmFlops(int64_t tokens) const {
  const Flops l = tokens, d = shape_.d_model, n = shape_.d_state;
  if (acc_ == Accounting::kReference) return 12 * l * d * d + 16 * l * d * n + 10 * l * d;
  if (shape_.short_conv) return 8 * l * d * d + 2 * l * d * shape_.d_conv + 2 * l * d;  // in + out, conv, gates
  if (shape_.delta_net) {
    const Flops vd = shape_.GdnValueDim(), conv = shape_.GdnConvDim(), hv = shape_.gdn_v_heads, s = shape_.gdn_head_dim;
    return 2 * l * d * (conv + vd + 2 * hv)  // in: q | k | v, z, beta, alpha
           + 2 * l * conv * shape_.d_conv    // depthwise causal conv
           + 10 * l * hv * s * s             // decay, S^T k, the rank-1 update, S^T q
           + 10 * l * vd                     // l2 norms, the gated output norm
           + 2 * l * vd * d;                 // out
  }
  const Flops inner = shape_.DInner(), conv = shape_.ConvDim(), heads = shape_.SsmHeads();
  return 2 * l * d * (inner + conv + heads)  // in_proj: z, xBC, dt
         + 2 * l * conv * shape_.d_conv      // depthwise causal conv
         + 8 * l * inner * n                 // state update and readout
         + 8 * l * inner                     // D skip, gate, norm
         + 2 * l * inner * d;                // out_proj
}

int64_t CostModel::SsmStateBytesPerLayer() const {
  const int64_t d = shape_.d_model, n = shape_.d_state;
  if (acc_ == Accounting::kReference) return d * n * 2 + (2 * d + 2 * n) * 4 * 2;
  if (shape_.short_conv) return (shape_.d_conv - 1) * d * shape_.state_elem_bytes;
  if (shape_.delta_net)  // models/ssm_state.h: the [v_heads, S, S] state + the conv window
    return (shape_.gdn_v_heads * shape_.gdn_head_dim * shape_.gdn_head_dim + shape_.GdnConvDim() * (shape_.d_conv - 1)) *
           shape_.state_elem_bytes;
  // The engine's state layout (models/ssm_state.h): [ssm_heads, d_state, head_dim] recurrent
  // state + the last d_conv - 1 inputs of the convolution, [d_conv - 1, conv_dim].
  return (shape_.DInner() * n + shape_.ConvDim() * (shape_.d_conv - 1)) * shape_.state_elem_bytes;
}

int64_t CostModel::KvBytesPerLayer(int64_t tokens) const {
  if (acc_ == Accounting::kReference) return 2 * tokens * shape_.d_model * 2;
  return 2 * tokens * shape_.KvDim() * shape_.kv_elem_bytes;
}

Flops CostModel::PrefixFlops(int64_t tokens) const {
  return shape_.n_ssm_layers * SsmFlops(tokens) + AllAttentionFlops(tokens) + AllMlpFlops(tokens);
}

Flops CostModel::NodeMarginalFlops(int64_t parent_len, int64_t edge_len) const {
  const int64_t total = parent_len + edge_len;
  const Flops ssm = shape_.n_ssm_layers * SsmFlops(edge_len);
  const Flops attn = AllAttentionFlops(total) - AllAttentionFlops(parent_len);
  // The reference subtracts the parent's attention FLOPs from the MLP term (its bug, kept).
  const Flops mlp = acc_ == Accounting::kReference ? shape_.n_mlp_layers * (MlpFlops(total) - AttentionFlops(parent_len))
                                                   : AllMlpFlops(total) - AllMlpFlops(parent_len);
  return ssm + attn + mlp;
}

int64_t CostModel::NodeRankingBytes(int64_t parent_len, int64_t edge_len) const {
  if (acc_ == Accounting::kReference) return CheckpointBytes() + KvBytes(parent_len + edge_len);
  return CheckpointBytes() + KvBytes(edge_len);
}

namespace {
int BitLength(unsigned __int128 v) {
  int n = 0;
  while (v) {
    ++n;
    v >>= 1;
  }
  return n;
}
}  // namespace

double ExactRatio(Flops num, Flops den) {
  if (den == 0) return num == 0 ? std::nan("") : (num > 0 ? HUGE_VAL : -HUGE_VAL);
  const bool negative = (num < 0) != (den < 0);
  unsigned __int128 a = num < 0 ? -num : num, b = den < 0 ? -den : den;
  constexpr unsigned __int128 kExact = (unsigned __int128)1 << 53;
  if (a <= kExact && b <= kExact) {  // both exact doubles: one IEEE division rounds correctly
    const double r = static_cast<double>(a) / static_cast<double>(b);
    return negative ? -r : r;
  }
  // Scale so the integer quotient has 62+ significant bits, fold the remainder into a sticky
  // bit, and let the (correctly rounded) int->double conversion do the single rounding.
  const int shift = 63 - (BitLength(a) - BitLength(b));
  unsigned __int128 q, r;
  if (shift >= 0) {
    // a << shift stays below 2^127 because b < 2^64 in every use here.
    q = (a << shift) / b;
    r = (a << shift) % b;
  } else {
    q = a / (b << -shift);
    r = a % (b << -shift);
  }
  if (r != 0) q |= 1;
  const double result = std::ldexp(static_cast<double>(q), -shift);
  return negative ? -result : result;
}

std::string FlopsToString(Flops value) {
  if (value == 0) return "0";
  const bool negative = value < 0;
  unsigned __int128 v = negative ? -value : value;
  std::string digits;
  while (v) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

HybridShape Marconi7BShape(int64_t d_state) {
  HybridShape s;
  s.name = "marconi-7b-n" + std::to_string(d_state);
  s.n_attn_layers = 4;
  s.n_ssm_layers = 24;
  s.n_mlp_layers = 28;
  s.d_model = 4096;
  s.n_heads = 32;
  s.n_kv_heads = 32;
  s.head_dim = 128;
  s.d_ff = 4 * 4096;
  s.d_state = d_state;
  s.expand = 2;
  s.n_groups = 1;
  s.d_conv = 4;
  s.ssm_heads = 128;  // head_dim 64
  return s;
}

}  // namespace radixlm::cache
