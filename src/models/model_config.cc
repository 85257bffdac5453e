#include "models/model_config.h"

namespace radixlm::models {

const char* LayerKindName(LayerKind k) {
  switch (k) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kMlp: return "mlp";
    case LayerKind::kMamba2: return "mamba2";
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

int ModelConfig::n_attention_layers() const {
  int n = 0;
  for (LayerKind k : layers) n += k == LayerKind::kAttention;
  return n;
}

int64_t ModelConfig::ParameterCount() const {
  const int64_t q = int64_t{n_heads} * head_dim, kv = int64_t{n_kv_heads} * head_dim;
  int64_t n = vocab_size * d_model * (tied_embeddings ? 1 : 2) + d_model;
  for (LayerKind k : layers) {
    if (k == LayerKind::kAttention)
      n += d_model + d_model * (q + 2 * kv) + q * d_model + (qk_norm ? 2 * head_dim : 0) + (qkv_bias ? q + 2 * kv : 0);
    else if (k == LayerKind::kMlp)
      n += d_model + 3 * int64_t{d_model} * ffn_dim;
  }
  return n;
}

double ModelConfig::LinearFlopsPerToken(bool with_lm_head) const {
  const double q = double(n_heads) * head_dim, kv = double(n_kv_heads) * head_dim;
  double f = 0;
  for (LayerKind k : layers) {
    if (k == LayerKind::kAttention) f += 2 * (d_model * (q + 2 * kv) + q * d_model);
    else if (k == LayerKind::kMlp) f += 2 * 3.0 * d_model * ffn_dim;
  }
  if (with_lm_head) f += 2.0 * d_model * vocab_size;
  return f;
}

std::string ModelConfig::Validate() const {
  if (vocab_size <= 0 || d_model <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return "sizes must be positive";
  if (n_heads % n_kv_heads != 0) return "n_heads must be a multiple of n_kv_heads";
  if (n_heads / n_kv_heads > 16) return "more than 16 query heads per kv head is not supported";
  if (head_dim % 2 != 0) return "head_dim must be even for RoPE";
  for (LayerKind k : layers)
    if (k == LayerKind::kMamba2) return "Mamba2 layers are not supported yet";
  if (layers.empty()) return "model has no layers";
  return "";
}

}  // namespace radixlm::models
