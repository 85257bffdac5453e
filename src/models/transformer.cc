#include "models/transformer.h"

#include <cmath>
#include <cstring>

namespace radixlm::models {

size_t TransformerWeights::nbytes() const {
  size_t n = embedding.size() + lm_head.nbytes() + final_norm.size() * 4;
  for (const auto& a : attention) n += a.qkv.nbytes() + a.o.nbytes() + (a.norm.size() + a.qkv_bias.size() + a.q_norm.size() + a.k_norm.size()) * 4;
  for (const auto& m : mlp) n += m.gate_up.nbytes() + m.down.nbytes() + m.norm.size() * 4;
  return n;
}

Transformer::Transformer(ModelConfig config, TransformerWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  rope_ = kernels::MakeRopeTable(config_.rope_layout, config_.head_dim, config_.rope_theta,
                                 config_.rope_scaling.factor > 0 ? &config_.rope_scaling : nullptr);
  for (size_t i = 0; i < config_.rope_freq_factors.size() && i < rope_.inv_freq.size(); ++i)
    rope_.inv_freq[i] /= config_.rope_freq_factors[i];
}

namespace {
template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}
}  // namespace

void Transformer::Embed(const ForwardBatch& b) {
  const int64_t n = b.token_ids.size(), d = config_.d_model;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = b.token_ids[t];
    RADIXLM_CHECK_MSG(id >= 0 && id < config_.vocab_size, "token id out of range");
    if (weights_.embedding.size() == 0) {
      weights_.lm_head.ReadRow(id, x_.data() + t * d);
    } else {
      kernels::EmbeddingLookup(weights_.embedding.data(), weights_.embedding_dtype, d, &id, 1, x_.data() + t * d);
    }
  }
}

void Transformer::Forward(core::ThreadPool& pool, const ForwardBatch& b, KvStore& kv, float* logits) {
  const int64_t n = b.token_ids.size();
  RADIXLM_CHECK(b.positions.size() == static_cast<size_t>(n));
  const int64_t d = config_.d_model;
  const int64_t q_dim = int64_t{config_.n_heads} * config_.head_dim;
  const int64_t kv_dim = int64_t{config_.n_kv_heads} * config_.head_dim;
  Grow(x_, n * d);
  Grow(xn_, n * d);
  Grow(qkv_, n * (q_dim + 2 * kv_dim));
  Grow(attn_, n * q_dim);
  Grow(gate_up_, n * 2 * config_.ffn_dim);
  Grow(act_, n * config_.ffn_dim);
  Grow(rope_cs_, n * rope_.rot_dim);
  kernels::RopeCosSin(rope_, b.positions.data(), n, rope_cs_.data());

  Embed(b);  // x: [n_tokens, d_model]
  size_t ai = 0, mi = 0;
  for (LayerKind kind : config_.layers) {
    if (kind == LayerKind::kAttention) AttentionSublayer(pool, weights_.attention[ai++], b, kv, n);
    else if (kind == LayerKind::kMlp) MlpSublayer(pool, weights_.mlp[mi++], n);
  }

  // Final norm and lm_head only on the rows that need logits.
  const int64_t n_out = b.logit_rows.size();
  Grow(final_, n_out * d);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t row = b.logit_rows[i];
    RADIXLM_CHECK(row >= 0 && row < n);
    kernels::RmsNorm(x_.data() + row * d, weights_.final_norm.data(), final_.data() + i * d, 1, d, config_.rms_eps);
  }
  kernels::Gemm(pool, final_.data(), n_out, d, weights_.lm_head, logits, config_.vocab_size);
}

void Transformer::AttentionSublayer(core::ThreadPool& pool, const AttentionLayerWeights& w,
                                    const ForwardBatch& b, KvStore& kv, int64_t n) {
  const int64_t d = config_.d_model, hd = config_.head_dim;
  const int64_t q_dim = config_.n_heads * hd, kv_dim = config_.n_kv_heads * hd;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  kernels::RmsNorm(x_.data(), w.norm.data(), xn_.data(), n, d, config_.rms_eps);
  kernels::Gemm(pool, xn_.data(), n, d, w.qkv, qkv_.data(), qkv_dim);  // [n, q | k | v]
  if (!w.qkv_bias.empty())
    for (int64_t t = 0; t < n; ++t) kernels::AddInPlace(qkv_.data() + t * qkv_dim, w.qkv_bias.data(), qkv_dim);
  // Split into contiguous q [n, n_heads, head_dim] and k, v [n, n_kv_heads, head_dim];
  // gate_up_ is free during attention, so k and v borrow it.
  Grow(gate_up_, n * 2 * kv_dim);
  float* q = attn_.data();
  float* k = gate_up_.data();
  float* v = gate_up_.data() + n * kv_dim;
  for (int64_t t = 0; t < n; ++t) {
    const float* row = qkv_.data() + t * qkv_dim;
    std::memcpy(q + t * q_dim, row, q_dim * 4);
    std::memcpy(k + t * kv_dim, row + q_dim, kv_dim * 4);
    std::memcpy(v + t * kv_dim, row + q_dim + kv_dim, kv_dim * 4);
  }
  if (!w.q_norm.empty()) {
    kernels::RmsNorm(q, w.q_norm.data(), q, n * config_.n_heads, hd, config_.rms_eps);
    kernels::RmsNorm(k, w.k_norm.data(), k, n * config_.n_kv_heads, hd, config_.rms_eps);
  }
  kernels::ApplyRope(rope_, rope_cs_.data(), q, n, config_.n_heads, hd);
  kernels::ApplyRope(rope_, rope_cs_.data(), k, n, config_.n_kv_heads, hd);

  const kernels::KvLayerView layer = kv.Layer(w.kv_index);
  kernels::WriteKv(layer, b.seqs, b.positions.data(), k, v);
  const kernels::AttentionParams params{config_.n_heads, config_.n_kv_heads, static_cast<int>(hd),
                                        1.0f / std::sqrt(static_cast<float>(hd))};
  // Output to qkv_ (free now): [n, n_heads, head_dim].
  kernels::PagedAttention(pool, params, layer, b.seqs, b.positions.data(), q, qkv_.data(), nullptr);
  kernels::Gemm(pool, qkv_.data(), n, q_dim, w.o, xn_.data(), d);
  kernels::AddInPlace(x_.data(), xn_.data(), n * d);
}

void Transformer::MlpSublayer(core::ThreadPool& pool, const MlpLayerWeights& w, int64_t n) {
  const int64_t d = config_.d_model, f = config_.ffn_dim;
  kernels::RmsNorm(x_.data(), w.norm.data(), xn_.data(), n, d, config_.rms_eps);
  kernels::Gemm(pool, xn_.data(), n, d, w.gate_up, gate_up_.data(), 2 * f);  // [n, gate | up]
  kernels::SiluMul(gate_up_.data(), act_.data(), n, f);                     // [n, ffn]
  kernels::Gemm(pool, act_.data(), n, f, w.down, xn_.data(), d);
  kernels::AddInPlace(x_.data(), xn_.data(), n * d);
}

}  // namespace radixlm::models
