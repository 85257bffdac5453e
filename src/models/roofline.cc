#include "models/roofline.h"

#include <algorithm>

namespace radixlm::models {

PrefillFlops PrefillFlopsOf(const ModelConfig& c, int64_t tokens) {
  const double n = static_cast<double>(tokens);
  PrefillFlops f;
  f.linear = c.LinearFlopsPerToken(false) * n;
  f.lm_head = 2.0 * c.d_model * c.vocab_size;
  double head_dims = 0;  // over the attention layers (Gemma 4's differ by kind)
  for (int a = 0; a < c.n_attention_layers(); ++a) head_dims += c.AttnHeadDim(a);
  f.attention = 4.0 * head_dims * c.n_heads * n * (n + 1) / 2;
  return f;
}

DecodeBytes DecodeBytesOf(const TransformerWeights& w, const ModelConfig& c) {
  DecodeBytes b;
  b.weights = static_cast<int64_t>(w.nbytes());
  b.embedding = static_cast<int64_t>(w.embedding.size());
  if (c.moe.experts > 0)
    for (const MoeLayerWeights& l : w.moe) {
      const int64_t experts = static_cast<int64_t>(l.gate_up.nbytes() + l.down.nbytes());
      b.unused_experts += experts - experts / c.moe.experts * c.moe.used;
    }
  return b;
}

CeilingShapes CeilingShapesOf(const TransformerWeights& w, const ModelConfig& c, int64_t tokens) {
  if (!w.mlp.empty()) return {&w.mlp[0].gate_up, &w.mlp[0].down, tokens};
  if (!w.moe.empty()) return {&w.moe[0].gate_up, &w.moe[0].down, std::max<int64_t>(1, tokens * c.moe.used / c.moe.experts)};
  if (!w.mamba.empty()) return {&w.mamba[0].in_proj, &w.mamba[0].out_proj, tokens};
  if (!w.deltanet.empty()) return {&w.deltanet[0].in_proj, &w.deltanet[0].out_proj, tokens};
  if (!w.attention.empty()) return {&w.attention[0].qkv, &w.attention[0].o, tokens};
  return {};
}

}  // namespace radixlm::models
