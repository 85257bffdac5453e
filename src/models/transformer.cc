#include "models/transformer.h"

#include "models/for_rows.h"
#include "models/moe_route.h"

#include <cmath>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>

namespace radixlm::models {

size_t TransformerWeights::nbytes() const {
  size_t n = embedding.size() + lm_head.nbytes() + final_norm.size() * 4;
  for (const auto& a : attention) n += a.qkv.nbytes() + a.o.nbytes() + (a.norm.size() + a.qkv_bias.size() + a.q_norm.size() + a.k_norm.size()) * 4;
  for (const auto& m : mlp) n += m.gate_up.nbytes() + m.down.nbytes() + m.norm.size() * 4;
  for (const auto& m : mamba)
    n += m.in_proj.nbytes() + m.out_proj.nbytes() +
         (m.norm.size() + m.conv_w.size() + m.conv_b.size() + 3 * m.A.size() + m.gated_norm.size()) * 4;
  for (const auto& m : deltanet)
    n += m.in_proj.nbytes() + m.out_proj.nbytes() + (m.norm.size() + m.conv_w.size() + 2 * m.A.size() + m.out_norm.size()) * 4;
  for (const auto& m : moe) {
    n += m.router.nbytes() + m.gate_up.nbytes() + m.down.nbytes() + m.shared_gate_up.nbytes() + m.shared_down.nbytes() +
         m.shared_gate.nbytes() + (m.norm.size() + m.selection_bias.size()) * 4;
  }
  for (const auto& e : block_end) n += e.gate.nbytes() + e.proj.nbytes() + e.post_norm.size() * 4;
  n += per_layer.table.size() + per_layer.model_proj.nbytes() + per_layer.proj_norm.size() * 4;
  return n;
}

std::string TransformerWeights::TypeSummary() const {
  std::map<core::DType, size_t> bytes;
  auto add = [&](const kernels::PackedWeight& w) {
    for (const kernels::WeightSegment& s : w.segments()) bytes[s.storage] += s.buf.size();
  };
  for (const auto& a : attention) { add(a.qkv); add(a.o); }
  for (const auto& m : mlp) { add(m.gate_up); add(m.down); }
  for (const auto& m : mamba) { add(m.in_proj); add(m.out_proj); }
  for (const auto& m : deltanet) { add(m.in_proj); add(m.out_proj); }
  for (const auto& m : moe) {
    add(m.gate_up);
    add(m.down);
    add(m.shared_gate_up);
    add(m.shared_down);
  }
  for (const auto& e : block_end) { add(e.gate); add(e.proj); }
  add(per_layer.model_proj);
  add(lm_head);
  std::vector<std::pair<size_t, core::DType>> order;
  for (const auto& [t, b] : bytes) order.push_back({b, t});
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [b, t] : order) out += (out.empty() ? "" : "+") + std::string(core::DTypeName(t));
  return out;
}

Transformer::Transformer(ModelConfig config, TransformerWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  // Layers built without their shapes (by hand, in tests) take the model's.
  for (size_t a = 0; a < weights_.attention.size(); ++a) {
    AttentionLayerWeights& w = weights_.attention[a];
    if (w.head_dim == 0) w.head_dim = config_.AttnHeadDim(static_cast<int>(a));
    if (w.n_kv_heads == 0) w.n_kv_heads = config_.AttnKvHeads(static_cast<int>(a));
  }
  for (size_t m = 0; m < weights_.mlp.size(); ++m)
    if (weights_.mlp[m].ffn == 0) weights_.mlp[m].ffn = config_.MlpFfn(static_cast<int>(m));
  rope_ = kernels::MakeRopeTable(config_.rope_layout, config_.rope_dim > 0 ? config_.rope_dim : config_.head_dim, config_.rope_theta,
                                 config_.rope_scaling.factor > 0 ? &config_.rope_scaling : nullptr,
                                 config_.rope_yarn.factor > 0 ? &config_.rope_yarn : nullptr);
  for (size_t i = 0; i < config_.rope_freq_factors.size() && i < rope_.inv_freq.size(); ++i)
    rope_.inv_freq[i] /= config_.rope_freq_factors[i];
  if (config_.rope_theta_swa > 0)
    rope_swa_ = kernels::MakeRopeTable(config_.rope_layout, config_.rope_dim_swa > 0 ? config_.rope_dim_swa : rope_.rot_dim,
                                       config_.rope_theta_swa);
  // IMROPE (llama.cpp's qwen35): pair i is in sector i % (s0+s1+s2+s3); sectors 3k, 3k+1, 3k+2
  // below 3 x s0, s1, s2 turn with the t, h, w positions (all the token's for text), the rest
  // with e's (0 for text): those pairs do not turn (frequency 0).
  if (config_.rope_sections.size() == 4) {
    const std::vector<int>& s = config_.rope_sections;
    const int total = s[0] + s[1] + s[2] + s[3];
    for (size_t i = 0; i < rope_.inv_freq.size() && total > 0; ++i) {
      const int sector = static_cast<int>(i) % total;
      const bool turns = (sector % 3 == 1 && sector < 3 * s[1]) || (sector % 3 == 2 && sector < 3 * s[2]) ||
                         (sector % 3 == 0 && sector < 3 * s[0]);
      if (!turns) rope_.inv_freq[i] = 0.0f;
    }
  }
}

namespace {
double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Transformer::Embed(std::span<const int32_t> ids) {
  const int64_t n = ids.size(), d = config_.d_model;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = ids[t];
    RADIXLM_CHECK_MSG(id >= 0 && id < config_.vocab_size, "token id out of range");
    if (weights_.embedding.size() == 0) {
      weights_.lm_head.ReadRow(id, x_.data() + t * d);
      if (config_.embedding_multiplier != 1.0f)
        for (int64_t k = 0; k < d; ++k) x_[t * d + k] *= config_.embedding_multiplier;
    } else {
      kernels::EmbeddingLookup(weights_.embedding.data(), weights_.embedding_dtype, d, &id, 1, x_.data() + t * d,
                               config_.embedding_multiplier);
    }
  }
}

void Transformer::Forward(core::ThreadPool& pool, const ForwardBatch& b, KvStore& kv, float* logits,
                          SsmStateStore* states) {
  std::lock_guard<std::mutex> lock(forward_mu_);
  RADIXLM_CHECK(b.positions.size() == b.token_ids.size());
  // With compaction every position-wise op runs on the plan's compact rows.
  const CompactionPlan* plan = b.compaction;
  if (plan) {
    RADIXLM_CHECK_MSG(config_.n_ssm_layers() == 0, "prefix compaction needs a model without recurrent layers");
    RADIXLM_CHECK(plan->original_rows() == static_cast<int64_t>(b.token_ids.size()));
  }
  const std::span<const int32_t> ids = plan ? std::span<const int32_t>(plan->compact_ids) : b.token_ids;
  const std::span<const int32_t> positions = plan ? std::span<const int32_t>(plan->compact_positions) : b.positions;
  const int64_t n = static_cast<int64_t>(ids.size());
  const double start = profile_ ? Seconds() : 0;
  PrepareWorkspace(pool, positions, n);

  Embed(ids);  // x: [n_tokens, d_model]
  if (config_.per_layer_input > 0) PerLayerInputs(pool, ids, n);
  if (plan && b.trie_attention) {
    kv_block_tokens_ = kv.block_tokens();
    PlanTrieAttention(b);
  }
  const bool rings = states && states->has_rings();
  if (config_.n_ssm_layers() > 0 || rings) {
    RADIXLM_CHECK_MSG(states != nullptr && b.ssm.size() == b.seqs.size(), "recurrent layers need state slots");
  }
  if (rings) PlanRings(b, *states);
  size_t ai = 0, mi = 0, si = 0, gi = 0, ei = 0, ci = 0;
  int block = 0;
  for (LayerKind kind : config_.layers) {
    switch (kind) {
      case LayerKind::kAttention: AttentionSublayer(pool, weights_.attention[ai++], b, kv, states, n); break;
      case LayerKind::kMlp: MlpSublayer(pool, weights_.mlp[mi++], n); break;
      case LayerKind::kMamba2: Mamba2Sublayer(pool, weights_.mamba[si++], b, *states, n); break;
      case LayerKind::kDeltaNet: DeltaNetSublayer(pool, weights_.deltanet[gi++], b, *states, n); break;
      case LayerKind::kMoe: MoeSublayer(pool, weights_.moe[ei++], n); break;
      case LayerKind::kShortConv: ShortConvSublayer(pool, weights_.short_conv[ci++], b, *states, n); break;
    }
    if (IsFeedForward(kind) && !weights_.block_end.empty()) {
      BlockEnd(pool, weights_.block_end[block], block, n);
      ++block;
    }
  }

  if (rings) CaptureWindows(b, *states);
  FinalRows(pool, b, logits);
  if (profile_) profile_->total_s += Seconds() - start;
}

void Transformer::PlanRings(const ForwardBatch& b, const SsmStateStore& states) {
  ring_seqs_ = b.seqs;
  ring_tables_.resize(b.seqs.size());
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    RADIXLM_CHECK_MSG(b.seqs[i].n_rows <= states.max_step_rows(),
                      "a step gives a sequence more rows than its window ring holds");
    states.RingTable(b.ssm[i].slot, static_cast<int64_t>(b.seqs[i].block_table.size()), &ring_tables_[i]);
    ring_seqs_[i].block_table = ring_tables_[i];
  }
}

// A checkpoint after r of a sequence's rows is the window before its row r: still in the ring
// after the step (the ring holds the window before the first row and every row).
void Transformer::CaptureWindows(const ForwardBatch& b, SsmStateStore& states) const {
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    if (b.ssm[i].checkpoints.empty()) continue;
    const int64_t first = b.positions[b.seqs[i].row_begin];
    for (const SsmCheckpoint& c : b.ssm[i].checkpoints) states.CopyWindow(b.ssm[i].slot, c.slot, first + c.after_rows);
  }
}

// The workspace grown to n rows (the warmed-up path does not allocate) and the rows' RoPE
// cos/sin, the rows spread over the pool.
void Transformer::PrepareWorkspace(core::ThreadPool& pool, std::span<const int32_t> positions, int64_t n) {
  const int64_t d = config_.d_model;
  const int64_t q_dim = int64_t{config_.n_heads} * config_.max_head_dim();
  const int64_t kv_dim = config_.max_kv_dim();
  Grow(x_, n * d);
  Grow(xn_, n * d);
  Grow(qkv_, n * ((config_.attn_output_gate ? 2 : 1) * q_dim + 2 * kv_dim));
  Grow(attn_, n * q_dim);
  Grow(gate_up_, n * 2 * config_.max_ffn());
  Grow(act_, n * config_.max_ffn());
  Grow(rope_cs_, n * rope_.rot_dim);
  if (rope_swa_.rot_dim > 0) Grow(rope_swa_cs_, n * rope_swa_.rot_dim);
  ForRows(pool, n, [&](int64_t t0, int64_t t1) {
    kernels::RopeCosSin(rope_, positions.data() + t0, t1 - t0, rope_cs_.data() + t0 * rope_.rot_dim);
    if (rope_swa_.rot_dim > 0)
      kernels::RopeCosSin(rope_swa_, positions.data() + t0, t1 - t0, rope_swa_cs_.data() + t0 * rope_swa_.rot_dim);
  });
}

// After the last layer: the final-normed hidden rows the batch asks for, and the logits rows.
void Transformer::FinalRows(core::ThreadPool& pool, const ForwardBatch& b, float* logits) {
  const CompactionPlan* plan = b.compaction;
  const int64_t d = config_.d_model;
  for (size_t i = 0; i < b.hidden_rows.size(); ++i) {
    RADIXLM_CHECK(b.hidden && b.hidden_rows[i] >= 0 && b.hidden_rows[i] < static_cast<int64_t>(b.token_ids.size()));
    const int32_t row = plan ? plan->scatter[b.hidden_rows[i]] : b.hidden_rows[i];
    kernels::RmsNorm(x_.data() + row * d, weights_.final_norm.data(), b.hidden + i * d, 1, d, config_.rms_eps);
  }
  // Final norm and lm_head only on the rows that need logits.
  const int64_t n_out = b.logit_rows.size();
  Grow(final_, n_out * d);
  for (int64_t i = 0; i < n_out; ++i) {
    RADIXLM_CHECK(b.logit_rows[i] >= 0 && b.logit_rows[i] < static_cast<int64_t>(b.token_ids.size()));
    const int32_t row = plan ? plan->scatter[b.logit_rows[i]] : b.logit_rows[i];
    kernels::RmsNorm(x_.data() + row * d, weights_.final_norm.data(), final_.data() + i * d, 1, d, config_.rms_eps);
  }
  if (n_out > 0) Gemm(pool, final_.data(), n_out, d, weights_.lm_head, logits, config_.vocab_size);
  SoftcapLogits(logits, n_out);
}

void Transformer::SoftcapLogits(float* logits, int64_t n) const {
  const int64_t count = n * config_.vocab_size;
  if (config_.logits_scaling != 1.0f) {
    const float inv = 1.0f / config_.logits_scaling;
    for (int64_t i = 0; i < count; ++i) logits[i] *= inv;
  }
  if (const float c = config_.final_logit_softcap; c > 0)
    for (int64_t i = 0; i < count; ++i) logits[i] = c * std::tanh(logits[i] / c);
}

void Transformer::LogitsFromHidden(core::ThreadPool& pool, const float* hidden, int64_t n, float* logits) {
  std::lock_guard<std::mutex> lock(forward_mu_);
  if (n <= 0) return;
  Gemm(pool, hidden, n, config_.d_model, weights_.lm_head, logits, config_.vocab_size);
  SoftcapLogits(logits, n);
}

void Transformer::Gemm(core::ThreadPool& pool, const float* x, int64_t m, int64_t k, const kernels::PackedWeight& w,
                       float* y, int64_t n) {
  const double t0 = profile_ ? Seconds() : 0;
  kernels::Gemm(pool, x, m, k, w, y, n);
  if (profile_) profile_->gemm_s += Seconds() - t0;
}

void Transformer::PlanTrieAttention(const ForwardBatch& b) {
  const CompactionPlan& plan = *b.compaction;
  const int64_t n_seqs = static_cast<int64_t>(b.seqs.size());
  RADIXLM_CHECK(static_cast<int64_t>(plan.seq_compact_begin.size()) == n_seqs + 1);
  const int bt = kv_block_tokens_;
  compact_seqs_.clear();
  for (int64_t s = 0; s < n_seqs; ++s)
    compact_seqs_.push_back({plan.seq_compact_begin[s], plan.seq_compact_begin[s + 1] - plan.seq_compact_begin[s],
                             b.seqs[s].block_table});
  fix_seqs_.clear();
  fix_rows_.clear();
  fix_positions_.clear();
  for (int64_t s = 0; s < n_seqs; ++s) {
    const kernels::AttentionSeq& seq = b.seqs[s];
    const int64_t begin = static_cast<int64_t>(fix_rows_.size());
    for (int64_t i = seq.row_begin; i < seq.row_begin + seq.n_rows; ++i) {
      const int32_t row = plan.scatter[i];
      const int32_t creator = plan.compact_seq[row];
      if (creator == s) continue;
      const int32_t pos = b.positions[i];
      if (b.seqs[creator].block_table[pos / bt] == seq.block_table[pos / bt]) continue;  // shared block
      fix_rows_.push_back(row);
      fix_positions_.push_back(pos);
    }
    fix_seqs_.push_back({begin, static_cast<int64_t>(fix_rows_.size()) - begin, seq.block_table});
  }
}

void Transformer::AddBias(core::ThreadPool& pool, const std::vector<float>& bias, float* y, int64_t n) const {
  if (bias.empty()) return;
  const int64_t cols = static_cast<int64_t>(bias.size());
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels::AddInPlace(y + r * cols, bias.data(), cols);
  });
}

void Transformer::AddResidual(core::ThreadPool& pool, int64_t n, const std::vector<float>& post_norm) {
  const int64_t d = config_.d_model;
  const float mult = config_.residual_multiplier;
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    float* x = x_.data() + r0 * d;
    float* y = xn_.data() + r0 * d;
    const int64_t count = (r1 - r0) * d;
    if (!post_norm.empty()) kernels::RmsNorm(y, post_norm.data(), y, r1 - r0, d, config_.rms_eps);
    if (mult != 1.0f)
      for (int64_t i = 0; i < count; ++i) y[i] *= mult;
    kernels::AddInPlace(x, y, count);
  });
}

void Transformer::NormRows(core::ThreadPool& pool, const float* x, const float* w, float* y, int64_t rows,
                           int64_t dim) const {
  ForRows(pool, rows, [&](int64_t r0, int64_t r1) {
    kernels::RmsNorm(x + r0 * dim, w, y + r0 * dim, r1 - r0, dim, config_.rms_eps);
  });
}

// Splits qkv_ [n, q | k | v] (bias added) into contiguous q [n, n_heads, head_dim] (and the
// gate) and k, v [n, n_kv_heads, head_dim], then the q/k norms and RoPE: all per token, the
// tokens spread over the pool. gate_up_ is free during attention, so k and v borrow it.
void Transformer::SplitQkv(core::ThreadPool& pool, const AttentionLayerWeights& w, int64_t n, float** q_out,
                           float** k_out, float** v_out) {
  const int64_t hd = w.head_dim, n_heads = config_.n_heads, n_kv = w.n_kv_heads;
  const int64_t q_dim = n_heads * hd, kv_dim = n_kv * hd;
  const bool gated = config_.attn_output_gate;
  const int64_t q_in = gated ? 2 * q_dim : q_dim;  // with the gate: [q_h | gate_h] per head
  const int64_t qkv_dim = q_in + (w.writes_kv ? (w.v_from_k ? 1 : 2) * kv_dim : 0);
  Grow(gate_up_, n * 2 * kv_dim);
  float* q = attn_.data();
  float* k = gate_up_.data();
  float* v = gate_up_.data() + n * kv_dim;
  if (gated) Grow(gate_, n * q_dim);
  ForRows(pool, n, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = qkv_.data() + t * qkv_dim;
      if (!w.qkv_bias.empty()) kernels::AddInPlace(row, w.qkv_bias.data(), qkv_dim);
      if (gated) {
        for (int64_t h = 0; h < n_heads; ++h) {
          std::memcpy(q + t * q_dim + h * hd, row + 2 * h * hd, hd * 4);
          std::memcpy(gate_.data() + t * q_dim + h * hd, row + (2 * h + 1) * hd, hd * 4);
        }
      } else {
        std::memcpy(q + t * q_dim, row, q_dim * 4);
      }
      if (!w.writes_kv) continue;
      std::memcpy(k + t * kv_dim, row + q_in, kv_dim * 4);
      std::memcpy(v + t * kv_dim, row + q_in + (w.v_from_k ? 0 : kv_dim), kv_dim * 4);
    }
    const int64_t rows = t1 - t0;
    if (!w.q_norm.empty()) kernels::RmsNorm(q + t0 * q_dim, w.q_norm.data(), q + t0 * q_dim, rows * n_heads, hd, config_.rms_eps);
    if (!w.k_norm.empty()) kernels::RmsNorm(k + t0 * kv_dim, w.k_norm.data(), k + t0 * kv_dim, rows * n_kv, hd, config_.rms_eps);
    if (!w.v_norm.empty()) kernels::RmsNorm(v + t0 * kv_dim, w.v_norm.data(), v + t0 * kv_dim, rows * n_kv, hd, config_.rms_eps);
    if (config_.use_rope) {
      const bool local = w.window > 0 && rope_swa_.rot_dim > 0;  // a sliding layer's own base
      const kernels::RopeTable& table = local ? rope_swa_ : rope_;
      const float* cs = (local ? rope_swa_cs_ : rope_cs_).data() + t0 * table.rot_dim;
      kernels::ApplyRope(table, cs, q + t0 * q_dim, rows, n_heads, hd);
      if (w.writes_kv) kernels::ApplyRope(table, cs, k + t0 * kv_dim, rows, n_kv, hd);
    }
  });
  *q_out = q;
  *k_out = k;
  *v_out = v;
}

void Transformer::AttentionSublayer(core::ThreadPool& pool, const AttentionLayerWeights& w,
                                    const ForwardBatch& b, KvStore& kv, const SsmStateStore* states, int64_t n) {
  const int64_t d = config_.d_model, hd = w.head_dim;
  const int64_t q_dim = config_.n_heads * hd, kv_dim = int64_t{w.n_kv_heads} * hd;
  const bool gated = config_.attn_output_gate;
  RADIXLM_CHECK_MSG(!gated || !b.compaction, "an attention output gate with prefix compaction");
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  Gemm(pool, xn_.data(), n, d, w.qkv, qkv_.data(), w.qkv.n_out());  // [n, q | k | v] (SplitQkv's layout)
  float *q, *k, *v;
  SplitQkv(pool, w, n, &q, &k, &v);

  // A sliding layer served from window rings reads and writes each sequence's ring.
  const bool ring = !kv.Holds(w.kv_index);
  RADIXLM_CHECK_MSG(!ring || (states && states->InRing(w.kv_index)), "an attention layer with no KV store");
  const kernels::KvLayerView layer = ring ? states->RingLayer(w.kv_index) : kv.Layer(w.kv_index);
  const std::vector<kernels::AttentionSeq>& seqs = ring ? ring_seqs_ : b.seqs;
  kernels::AttentionParams params{config_.n_heads, w.n_kv_heads, static_cast<int>(hd),
                                  config_.attention_multiplier > 0 ? config_.attention_multiplier
                                                                   : 1.0f / std::sqrt(static_cast<float>(hd))};
  params.window = w.window;
  params.sinks = w.sinks.empty() ? nullptr : w.sinks.data();
  if (b.compaction && b.trie_attention && !ring) {  // a ring is a sequence's own: no shared rows
    TrieAttention(pool, params, layer, *b.compaction, q, w.writes_kv ? k : nullptr, v);
    Gemm(pool, qkv_.data(), n, q_dim, w.o, xn_.data(), d);
    AddBias(pool, w.o_bias, xn_.data(), n);
    AddResidual(pool, n, w.post_norm);
    return;
  }
  // Compaction: attention runs in the original layout (each sequence's own KV blocks), so
  // q/k/v unfold to the original rows and the output folds back to the compact rows.
  const CompactionPlan* plan = b.compaction;
  float* out = qkv_.data();  // [n, n_heads, head_dim] (qkv_ is free now)
  if (plan) {
    const int64_t rows = plan->original_rows();
    Grow(q_full_, rows * q_dim);
    Grow(k_full_, rows * kv_dim);
    Grow(v_full_, rows * kv_dim);
    Grow(o_full_, rows * q_dim);
    kernels::GatherRows(q, plan->scatter.data(), rows, q_dim, q_full_.data());
    if (w.writes_kv) {
      kernels::GatherRows(k, plan->scatter.data(), rows, kv_dim, k_full_.data());
      kernels::GatherRows(v, plan->scatter.data(), rows, kv_dim, v_full_.data());
    }
    q = q_full_.data();
    k = k_full_.data();
    v = v_full_.data();
    out = o_full_.data();
  }
  if (w.writes_kv) kernels::WriteKv(pool, layer, seqs, b.positions.data(), k, v);
  const double t0 = profile_ ? Seconds() : 0;
  kernels::CascadeAttention(pool, params, layer, seqs, b.positions.data(), q,
                            plan || ring ? std::span<const kernels::CascadeGroup>{} : b.cascade,
                            kernels::AttentionSplitTokens(layer.block_tokens), out, nullptr);
  if (profile_) profile_->attention_s += Seconds() - t0;
  if (plan) kernels::GatherRows(o_full_.data(), plan->gather.data(), n, q_dim, qkv_.data());
  if (gated) ApplyOutputGate(pool, n, q_dim);
  Gemm(pool, qkv_.data(), n, q_dim, w.o, xn_.data(), d);
  AddBias(pool, w.o_bias, xn_.data(), n);
  AddResidual(pool, n, w.post_norm);
}

// Trie-space attention, out into qkv_ [n, n_heads, head_dim]: every compact row writes its K/V
// once (through its creator's table) and attends through that table; rows shared into a
// diverging block are copied there as well. k null: the layer reads another's KV (written).
void Transformer::TrieAttention(core::ThreadPool& pool, const kernels::AttentionParams& params,
                                const kernels::KvLayerView& layer, const CompactionPlan& plan, float* q, float* k, float* v) {
  const int64_t kv_dim = int64_t{params.n_kv_heads} * params.head_dim;
  if (k) kernels::WriteKv(pool, layer, compact_seqs_, plan.compact_positions.data(), k, v);
  if (k && !fix_rows_.empty()) {
    const int64_t nf = static_cast<int64_t>(fix_rows_.size());
    Grow(k_full_, nf * kv_dim);
    Grow(v_full_, nf * kv_dim);
    kernels::GatherRows(k, fix_rows_.data(), nf, kv_dim, k_full_.data());
    kernels::GatherRows(v, fix_rows_.data(), nf, kv_dim, v_full_.data());
    kernels::WriteKv(pool, layer, fix_seqs_, fix_positions_.data(), k_full_.data(), v_full_.data());
  }
  const double t0 = profile_ ? Seconds() : 0;
  kernels::CascadeAttention(pool, params, layer, compact_seqs_, plan.compact_positions.data(), q, {},
                            kernels::AttentionSplitTokens(layer.block_tokens), qkv_.data(), nullptr);
  if (profile_) profile_->attention_s += Seconds() - t0;
}

// Qwen3.5: attention output qkv_ [n, q_dim] * sigmoid(gate_), per element.
void Transformer::ApplyOutputGate(core::ThreadPool& pool, int64_t n, int64_t q_dim) {
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * q_dim; i < r1 * q_dim; ++i) qkv_[i] *= 1.0f / (1.0f + std::exp(-gate_[i]));
  });
}

void Transformer::MlpSublayer(core::ThreadPool& pool, const MlpLayerWeights& w, int64_t n) {
  const int64_t d = config_.d_model, f = w.ffn;
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  // gate | up into gate_up_ (relu^2: up, activated in place in act_).
  const bool gated = config_.mlp_gated();
  float* h = gated ? gate_up_.data() : act_.data();
  Gemm(pool, xn_.data(), n, d, w.gate_up, h, gated ? 2 * f : f);
  Activate(pool, h, act_.data(), n, f);
  Gemm(pool, act_.data(), n, f, w.down, xn_.data(), d);
  AddResidual(pool, n, w.post_norm);
}

void Transformer::Activate(core::ThreadPool& pool, const float* h, float* y, int64_t n, int64_t f) const {
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    const float* in = h + r0 * 2 * f;  // gated: [gate | up] rows
    switch (config_.mlp_act) {
      case ModelConfig::MlpAct::kSiluGated: return kernels::SiluMul(in, y + r0 * f, r1 - r0, f);
      case ModelConfig::MlpAct::kGeluTanhGated: return kernels::GeluTanhMul(in, y + r0 * f, r1 - r0, f);
      case ModelConfig::MlpAct::kSwigluOai: return kernels::SwigluOaiMul(in, y + r0 * f, r1 - r0, f);
      case ModelConfig::MlpAct::kRelu2:
        for (int64_t i = r0 * f; i < r1 * f; ++i) {
          const float r = h[i] > 0.0f ? h[i] : 0.0f;
          y[i] = r * r;
        }
        return;
    }
  });
}

// Each row on its own (RouteRow: a row's choice never depends on the others).
void Transformer::Route(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n) {
  const MoeConfig& m = config_.moe;
  const int64_t E = m.experts, K = m.used, d = config_.d_model;
  Grow(moe_logits_, n * E);
  Grow(moe_ids_, n * K);
  Grow(moe_w_, n * K);
  Gemm(pool, xn_.data(), n, d, w.router, moe_logits_.data(), E);
  AddBias(pool, w.router_bias, moe_logits_.data(), n);
  const float* bias = w.selection_bias.empty() ? nullptr : w.selection_bias.data();
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    RouteScratch scratch;
    for (int64_t r = r0; r < r1; ++r)
      RouteRow(m, moe_logits_.data() + r * E, bias, moe_ids_.data() + r * K, moe_w_.data() + r * K, &scratch);
  });
}

// The (row, slot) pairs counting-sorted by expert, rows ascending: moe_pos_[pair] is its row in
// the grouped buffers; one GEMM group per chosen expert; the normed rows gathered in that order.
void Transformer::GroupByExpert(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n,
                                std::vector<kernels::GemmGroup>* up, std::vector<kernels::GemmGroup>* down) {
  const MoeConfig& m = config_.moe;
  const int64_t d = config_.d_model, E = m.experts, K = m.used, rows = n * K;
  const int64_t h_cols = config_.mlp_gated() ? 2 * m.ffn : m.ffn;
  Grow(moe_count_, E + 1);
  std::fill(moe_count_.begin(), moe_count_.begin() + E + 1, 0);
  for (int64_t i = 0; i < rows; ++i) ++moe_count_[moe_ids_[i] + 1];
  for (int64_t e = 0; e < E; ++e) moe_count_[e + 1] += moe_count_[e];
  for (int64_t e = 0; e < E; ++e)
    if (const int64_t c = moe_count_[e + 1] - moe_count_[e]; c > 0) {
      up->push_back({&w.gate_up, e * h_cols, h_cols, moe_count_[e], c});
      down->push_back({&w.down, e * d, d, moe_count_[e], c});
    }
  Grow(moe_pos_, rows);
  Grow(moe_x_, rows * d);
  std::vector<int32_t> next(moe_count_.begin(), moe_count_.begin() + E);
  for (int64_t i = 0; i < rows; ++i) moe_pos_[i] = next[moe_ids_[i]]++;
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * K; i < r1 * K; ++i) std::memcpy(moe_x_.data() + moe_pos_[i] * d, xn_.data() + (i / K) * d, d * 4);
  });
}

// The shared expert on every row into moe_shared_, and its gate's logit into moe_gate_.
void Transformer::SharedExpert(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n) {
  const int64_t d = config_.d_model, sf = config_.moe.shared_ffn;
  const int64_t sh = config_.mlp_gated() ? 2 * sf : sf;
  Grow(moe_shared_, n * d);
  Grow(gate_up_, n * sh);
  Grow(act_, n * sf);
  Gemm(pool, xn_.data(), n, d, w.shared_gate_up, gate_up_.data(), sh);
  Activate(pool, gate_up_.data(), act_.data(), n, sf);
  Gemm(pool, act_.data(), n, sf, w.shared_down, moe_shared_.data(), d);
  if (w.shared_gate.n_out() > 0) {
    Grow(moe_gate_, n);
    Gemm(pool, xn_.data(), n, d, w.shared_gate, moe_gate_.data(), 1);
  }
}

// gpt-oss: each (row, slot) pair's output row in the grouped buffer y [pairs, cols] plus its
// expert's bias row (bias [experts, cols]).
void Transformer::AddExpertBias(core::ThreadPool& pool, const std::vector<float>& bias, float* y, int64_t n,
                                int64_t cols) const {
  if (bias.empty()) return;
  const int64_t K = config_.moe.used;
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * K; i < r1 * K; ++i)
      kernels::AddInPlace(y + int64_t{moe_pos_[i]} * cols, bias.data() + int64_t{moe_ids_[i]} * cols, cols);
  });
}

// Mixture of experts: route each row; group the (row, slot) pairs by expert so that each chosen
// expert multiplies all its rows as one GEMM (kernels::GemmGrouped); sum each row's experts in
// its slot order, then the shared expert. Every row's arithmetic is fixed by its own choice,
// never by which rows share an expert: batch-invariant like every sublayer.
void Transformer::RunExperts(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n) {
  const MoeConfig& m = config_.moe;
  const int64_t d = config_.d_model, K = m.used, f = m.ffn, rows = n * K;
  const int64_t h_cols = config_.mlp_gated() ? 2 * f : f;
  std::vector<kernels::GemmGroup> up_groups, down_groups;
  GroupByExpert(pool, w, n, &up_groups, &down_groups);
  Grow(moe_h_, rows * h_cols);
  Grow(moe_a_, rows * f);
  Grow(moe_y_, rows * d);
  const double t0 = profile_ ? Seconds() : 0;
  kernels::GemmGrouped(pool, moe_x_.data(), rows, d, up_groups, moe_h_.data(), h_cols);
  AddExpertBias(pool, w.gate_up_bias, moe_h_.data(), n, h_cols);
  Activate(pool, moe_h_.data(), moe_a_.data(), rows, f);
  kernels::GemmGrouped(pool, moe_a_.data(), rows, f, down_groups, moe_y_.data(), d);
  AddExpertBias(pool, w.down_bias, moe_y_.data(), n, d);
  if (profile_) profile_->gemm_s += Seconds() - t0;
}

void Transformer::MoeSublayer(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n) {
  if (config_.moe.dense_branch) return DenseBranchMoeSublayer(pool, w, n);
  const int64_t d = config_.d_model, K = config_.moe.used;
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  Route(pool, w, n);
  RunExperts(pool, w, n);
  const bool shared = w.shared_gate_up.n_out() > 0, gated = w.shared_gate.n_out() > 0;
  if (shared) SharedExpert(pool, w, n);  // xn_ is still the normed input
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* out = xn_.data() + r * d;
      for (int64_t j = 0; j < K; ++j) {
        const float wt = moe_w_[r * K + j];
        const float* y = moe_y_.data() + int64_t{moe_pos_[r * K + j]} * d;
        for (int64_t k = 0; k < d; ++k) out[k] = j == 0 ? wt * y[k] : out[k] + wt * y[k];
      }
      if (!shared) continue;
      const float* s = moe_shared_.data() + r * d;
      const float g = gated ? 1.0f / (1.0f + std::exp(-moe_gate_[r])) : 1.0f;
      for (int64_t k = 0; k < d; ++k) out[k] += gated ? s[k] * g : s[k];
    }
  });
  AddResidual(pool, n);
}

// Mamba2 mixer: in_proj -> (z, xBC, dt); causal conv1d + SiLU on xBC with each sequence's conv
// window; the SSD scan per sequence and head (heads spread over the pool); gated RMSNorm with
// z; out_proj. Checkpoints requested for a sequence are copied out at exactly those rows.
void Transformer::Mamba2Sublayer(core::ThreadPool& pool, const Mamba2LayerWeights& w, const ForwardBatch& b,
                                 SsmStateStore& states, int64_t n) {
  const int64_t d = config_.d_model;
  const kernels::Mamba2Dims dims = config_.ssm_dims();
  const int64_t di = dims.d_inner(), cd = dims.conv_dim(), H = dims.n_heads;
  const int64_t in_dim = di + cd + H;
  Grow(zxbcdt_, n * in_dim);
  Grow(xbc_, n * cd);
  Grow(ssm_y_, n * di);
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  Gemm(pool, xn_.data(), n, d, w.in_proj, zxbcdt_.data(), in_dim);  // [n, z | xBC | dt]

  const int64_t n_seqs = static_cast<int64_t>(b.seqs.size());
  const double t0 = profile_ ? Seconds() : 0;
  auto captures_for = [&](int64_t s, std::vector<kernels::StateCapture>* out) { CapturesFor(b, states, w.state_index, s, out); };
  ConvAllSequences(pool, dims, b, n, states, w.state_index, zxbcdt_.data() + di, in_dim, w.conv_w.data(),
                   w.conv_b.empty() ? nullptr : w.conv_b.data(), xbc_.data());
  // Scan: (sequence, head) tasks; a task range runs contiguous heads of a sequence together so
  // heads of one group share the chunk's C.B^T.
  pool.ParallelFor(n_seqs * H, [&](int, int64_t t0, int64_t t1) {
    std::vector<kernels::StateCapture> caps;
    for (int64_t t = t0; t < t1;) {
      const int64_t s = t / H, h0 = t % H, h1 = std::min<int64_t>(H, h0 + (t1 - t));
      const kernels::AttentionSeq& seq = b.seqs[s];
      captures_for(s, &caps);
      for (auto& c : caps) c.conv = nullptr;
      kernels::ScanInputs in;
      in.x = xbc_.data() + seq.row_begin * cd;
      in.B = in.x + di;
      in.C = in.B + int64_t{dims.n_groups} * dims.d_state;
      in.ld = cd;
      in.dt = zxbcdt_.data() + seq.row_begin * in_dim + di + cd;
      in.ld_dt = in_dim;
      in.dt_bias = w.dt_bias.data();
      in.A = w.A.data();
      in.D = w.D.data();
      kernels::Mamba2Scan(dims, seq.n_rows, b.positions[seq.row_begin], config_.ssm_chunk, in,
                          states.Ssm(b.ssm[s].slot, w.state_index), ssm_y_.data() + seq.row_begin * di, di, caps,
                          static_cast<int>(h0), static_cast<int>(h1));
      t += h1 - h0;
    }
  });
  pool.ParallelFor(n, [&](int, int64_t r0, int64_t r1) {
    kernels::GatedRmsNorm(ssm_y_.data() + r0 * di, di, zxbcdt_.data() + r0 * in_dim, in_dim, w.gated_norm.data(),
                          r1 - r0, di, config_.ssm_norm_group_size(), config_.rms_eps);
  });
  if (profile_) profile_->ssm_s += Seconds() - t0;
  Gemm(pool, ssm_y_.data(), n, di, w.out_proj, xn_.data(), d);
  AddResidual(pool, n);
}

// The ends of the pieces a sequence's rows split into at its captures: each capture's row count,
// then n_rows (sorted, distinct).
static std::vector<int64_t> CaptureEnds(const std::vector<kernels::StateCapture>& caps, int64_t n_rows) {
  std::vector<int64_t> ends;
  for (const kernels::StateCapture& c : caps)
    if (c.after_tokens > 0 && c.after_tokens < n_rows) ends.push_back(c.after_tokens);
  ends.push_back(n_rows);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  return ends;
}

void Transformer::ConvAllSequences(core::ThreadPool& pool, const kernels::Mamba2Dims& dims, const ForwardBatch& b,
                                   int64_t n, SsmStateStore& states, int state_index, const float* in, int64_t ld_in,
                                   const float* w, const float* bias, float* out, bool silu) const {
  const int64_t cd = dims.conv_dim(), n_seqs = static_cast<int64_t>(b.seqs.size());
  // Rows first (each reads its sequence's window before any is advanced), over all rows.
  pool.ParallelFor(n, [&](int, int64_t r0, int64_t r1) {
    for (const kernels::AttentionSeq& seq : b.seqs) {
      const int64_t lo = std::max(r0, seq.row_begin), hi = std::min(r1, seq.row_begin + seq.n_rows);
      if (lo >= hi) continue;
      const int64_t s = &seq - b.seqs.data();
      const auto conv = silu ? kernels::CausalConv1dSiluRows : kernels::CausalConv1dRows;
      conv(dims, lo - seq.row_begin, hi - seq.row_begin, in + seq.row_begin * ld_in, ld_in, w, bias,
           states.Conv(b.ssm[s].slot, state_index), out + seq.row_begin * cd);
    }
  });
  pool.ParallelFor(n_seqs, [&](int, int64_t s0, int64_t s1) {
    std::vector<kernels::StateCapture> caps;
    for (int64_t s = s0; s < s1; ++s) {
      CapturesFor(b, states, state_index, s, &caps);
      for (auto& c : caps) c.ssm = nullptr;
      kernels::AdvanceConvState(dims, b.seqs[s].n_rows, in + b.seqs[s].row_begin * ld_in, ld_in,
                                states.Conv(b.ssm[s].slot, state_index), caps);
    }
  });
}

void Transformer::CapturesFor(const ForwardBatch& b, SsmStateStore& states, int state_index, int64_t s,
                              std::vector<kernels::StateCapture>* out) const {
  out->clear();
  for (const SsmCheckpoint& c : b.ssm[s].checkpoints)
    out->push_back({c.after_rows, states.Ssm(c.slot, state_index), states.Conv(c.slot, state_index)});
}

// Gated DeltaNet mixer (Qwen3.5): in -> (q | k | v, z, beta, alpha); causal conv1d + SiLU on
// q | k | v with each sequence's conv window; the gated delta rule per sequence and value head
// (the exact recurrence, or the chunked form with --ssm-chunk); per head rmsnorm * w * silu(z);
// out. Checkpoints requested for a sequence are copied out at exactly those rows.
void Transformer::DeltaNetSublayer(core::ThreadPool& pool, const DeltaNetLayerWeights& w, const ForwardBatch& b,
                                   SsmStateStore& states, int64_t n) {
  const int64_t d = config_.d_model;
  const kernels::DeltaNetDims dims = config_.gdn_dims();
  const kernels::Mamba2Dims conv_dims = dims.ConvDims();
  const int64_t cd = dims.conv_dim(), vd = dims.value_dim(), Hv = dims.v_heads;
  const int64_t in_dim = cd + vd + 2 * Hv;
  Grow(zxbcdt_, n * in_dim);
  Grow(xbc_, n * cd);
  Grow(ssm_y_, n * vd);
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  Gemm(pool, xn_.data(), n, d, w.in_proj, zxbcdt_.data(), in_dim);  // [n, qkv | z | b | a]
  const int64_t n_seqs = static_cast<int64_t>(b.seqs.size());
  const double t0 = profile_ ? Seconds() : 0;
  ConvAllSequences(pool, conv_dims, b, n, states, w.state_index, zxbcdt_.data(), in_dim, w.conv_w.data(), nullptr,
                   xbc_.data());
  pool.ParallelFor(n_seqs * Hv, [&](int, int64_t t0, int64_t t1) {
    std::vector<kernels::StateCapture> caps;
    for (int64_t t = t0; t < t1;) {
      const int64_t s = t / Hv, h0 = t % Hv, h1 = std::min<int64_t>(Hv, h0 + (t1 - t));
      const kernels::AttentionSeq& seq = b.seqs[s];
      CapturesFor(b, states, w.state_index, s, &caps);
      for (auto& c : caps) c.conv = nullptr;
      const float* proj = zxbcdt_.data() + seq.row_begin * in_dim;
      const kernels::DeltaNetInputs in{xbc_.data() + seq.row_begin * cd, cd, proj + cd + vd, proj + cd + vd + Hv, in_dim,
                                       w.dt_bias.data(), w.A.data(), config_.rms_eps};
      float* state = states.Ssm(b.ssm[s].slot, w.state_index);
      float* y = ssm_y_.data() + seq.row_begin * vd;
      if (config_.ssm_chunk > 0) {  // in pieces ending at each capture, whose state is copied out
        int64_t from = 0;
        for (int64_t end : CaptureEnds(caps, seq.n_rows)) {
          kernels::DeltaNetInputs part = in;
          part.qkv += from * cd;
          part.b += from * in_dim;
          part.a += from * in_dim;
          kernels::GatedDeltaRuleChunked(dims, end - from, part, state, y + from * vd, vd, config_.ssm_chunk,
                                         static_cast<int>(h0), static_cast<int>(h1));
          for (const kernels::StateCapture& c : caps)
            if (c.after_tokens == end && c.ssm)
              std::memcpy(c.ssm + h0 * dims.head_dim * dims.head_dim, state + h0 * dims.head_dim * dims.head_dim,
                          (h1 - h0) * dims.head_dim * dims.head_dim * sizeof(float));
          from = end;
        }
      } else {
        kernels::GatedDeltaRule(dims, seq.n_rows, in, state, y, vd, caps, static_cast<int>(h0), static_cast<int>(h1));
      }
      t += h1 - h0;
    }
  });
  pool.ParallelFor(n, [&](int, int64_t r0, int64_t r1) {
    kernels::DeltaNetOutputNorm(dims, ssm_y_.data() + r0 * vd, vd, zxbcdt_.data() + r0 * in_dim + cd, in_dim,
                                w.out_norm.data(), r1 - r0, config_.rms_eps);
  });
  if (profile_) profile_->ssm_s += Seconds() - t0;
  Gemm(pool, ssm_y_.data(), n, vd, w.out_proj, xn_.data(), d);
  AddResidual(pool, n);
}

}  // namespace radixlm::models
