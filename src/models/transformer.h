// Dense decoder-only transformer (Llama 2/3, Qwen2/2.5, Qwen3) on CPU.
//
// Forward runs one step over a ForwardBatch: a ragged batch of token spans of several
// sequences (prefill chunks and decode tokens mixed), their positions, each sequence's KV
// block table, and the rows that need logits. K/V of the batch's tokens are written into the
// KvStore at their positions before attention reads them, so prefill, chunked prefill and
// decode are one code path.
//
// Batch invariance: every kernel used here computes each row independently in a fixed
// reduction order, so a sequence's logits are bitwise identical alone or in any batch.
// Thread-safety: Forward uses the pool passed in and a per-model workspace; concurrent calls
// (the engine thread and the scoring service) are serialised by a mutex.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "models/kv_store.h"
#include "models/model_config.h"
#include "models/prefix_compaction.h"
#include "models/ssm_state.h"

namespace radixlm::models {

// A sequence's recurrent state in a batch (models with Mamba2 layers): its working slot in
// the SsmStateStore, advanced in place over the sequence's rows, and where to copy the state
// after given numbers of those rows (checkpoints for the prefix cache).
struct SsmCheckpoint {
  int32_t after_rows = 0;  // 1..rows of this sequence in the batch
  int32_t slot = -1;       // destination slot
};
struct SsmSeq {
  int32_t slot = -1;
  std::vector<SsmCheckpoint> checkpoints;
};

struct ForwardBatch {
  std::span<const int32_t> token_ids;           // [n_tokens]
  std::span<const int32_t> positions;           // [n_tokens]
  std::vector<kernels::AttentionSeq> seqs;      // row ranges + block tables, cover all rows
  std::span<const int32_t> logit_rows;          // rows whose logits are returned, in order
  // Rows whose final-normed hidden states are written to `hidden` [hidden_rows.size(), d_model]
  // (embeddings: no lm_head needed).
  std::span<const int32_t> hidden_rows;
  float* hidden = nullptr;
  std::vector<SsmSeq> ssm;                      // one per seq when the model has Mamba2 layers
  // Intra-batch prefix dedup (RadixMLP): position-wise work runs on the plan's compact rows;
  // attention unfolds q/k/v to the original rows and folds its output back. Null = off.
  // REQUIRES: the plan was built from this batch's ids, positions and seqs; no Mamba2 layers.
  const CompactionPlan* compaction = nullptr;
  // With compaction: attention also runs on the compact rows ("trie space"): each compact row
  // attends through the block table of the sequence that created it, so no layer touches a
  // duplicate row. K/V of shared rows are copied into a sequence's own block only where its
  // table diverges from the creator's (callers that share prefix blocks avoid those copies).
  bool trie_attention = false;
  // Cascade attention: decode rows grouped by the prefix blocks they share (kernels::
  // PlanCascadeGroups); attention is split at kernels::AttentionSplitTokens either way, so the
  // groups change no result, only how often shared KV is read.
  std::vector<kernels::CascadeGroup> cascade;
};

struct AttentionLayerWeights {
  std::vector<float> norm;       // [d_model]
  // [(n_heads + 2 n_kv_heads) head_dim, d_model]; with an output gate the q rows are doubled,
  // each head's q followed by its gate: [(2 n_heads + 2 n_kv_heads) head_dim, d_model].
  kernels::PackedWeight qkv;
  std::vector<float> qkv_bias;   // same rows, or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] or empty
  kernels::PackedWeight o;       // [d_model, n_heads head_dim]
  std::vector<float> o_bias;     // [d_model] or empty (gpt-oss)
  std::vector<float> sinks;      // [n_heads] or empty (gpt-oss's attention sinks)
  std::vector<float> post_norm;  // [d_model] or empty (Gemma: the output is normed before the residual)
  int window = 0;                // sliding window (ModelConfig::layer_window); 0 = the whole prefix
  int kv_index = 0;              // which KvStore layer it attends over (ModelConfig::KvSource)
  int head_dim = 0, n_kv_heads = 0;  // this layer's (ModelConfig::AttnHeadDim / AttnKvHeads)
  // Gemma 4: a shared-KV layer projects only q and writes no KV (qkv is [n_heads head_dim,
  // d_model]); a layer without attn_v uses its K projection, before the k norm, as V (qkv is
  // [q | k]); v_norm: ones [head_dim] when V is RMS-normed (ModelConfig::v_norm).
  bool writes_kv = true, v_from_k = false;
  std::vector<float> v_norm;
};

struct MlpLayerWeights {
  std::vector<float> norm;       // [d_model]
  kernels::PackedWeight gate_up; // [2 ffn_dim, d_model] (SiLU-gated) or up [ffn_dim, d_model] (relu^2)
  kernels::PackedWeight down;    // [d_model, ffn_dim]
  std::vector<float> post_norm;  // [d_model] or empty
  int ffn = 0;                   // its hidden size (ModelConfig::MlpFfn)
};

// Gemma 4: what a block does after its MLP. With per-layer inputs (ModelConfig::
// per_layer_input = P): x += post_norm(proj(gelu_tanh(gate x) * pl_b)), pl_b the block's P
// columns of the per-layer inputs; then x *= output_scale (layer_output_scale, 1 when absent).
struct BlockEndWeights {
  kernels::PackedWeight gate;    // [P, d_model] or n_out() 0
  kernels::PackedWeight proj;    // [d_model, P]
  std::vector<float> post_norm;  // [d_model]
  float output_scale = 1.0f;
};

// Gemma 4 per-layer inputs, per token [n_blocks, P]: (norm(model_proj x_emb / sqrt(d_model)) *
// proj_norm + table[token] sqrt(P)) / sqrt(2), x_emb the scaled embedding.
struct PerLayerInputWeights {
  core::DType table_dtype = core::DType::kF32;
  core::AlignedBuffer table;        // [vocab, n_blocks P] (per_layer_token_embd)
  kernels::PackedWeight model_proj; // [n_blocks P, d_model]
  std::vector<float> proj_norm;     // [P]
};

// Mixture of experts (ModelConfig::moe): the router, each expert's MLP (kept in the file's
// type, quantised included), and the optional shared expert.
struct MoeLayerWeights {
  std::vector<float> norm;                  // [d_model]
  kernels::PackedWeight router;             // [experts, d_model], f32 (the choice is sensitive to it)
  std::vector<float> selection_bias;        // [experts] or empty
  std::vector<float> router_bias;           // [experts] or empty (gpt-oss)
  // gpt-oss: expert e's bias on its gate | up outputs (the layout of gate_up's rows) and on its
  // down output; empty when none.
  std::vector<float> gate_up_bias, down_bias;  // [experts, 2 ffn], [experts, d_model]
  // All experts stacked (one allocation each, so decode streams huge pages): expert e's rows
  // are [e h, (e + 1) h) of gate_up, h = 2 ffn (gate | up) or ffn (up only, relu^2), and
  // [e d_model, (e + 1) d_model) of down ([d_model, ffn] each).
  kernels::PackedWeight gate_up, down;
  kernels::PackedWeight shared_gate_up, shared_down;  // n_out() 0: no shared expert
  kernels::PackedWeight shared_gate;        // [1, d_model] f32, or n_out() 0
  // MoeConfig::dense_branch (Gemma 4): router_scale [d_model], down_scale [experts] (or empty),
  // the experts' input norm and the norms of the dense output, the experts' output and their sum.
  std::vector<float> router_norm, router_scale, down_scale, expert_norm, dense_post_norm, expert_post_norm, post_norm;
};

struct Mamba2LayerWeights {
  std::vector<float> norm;        // [d_model]
  kernels::PackedWeight in_proj;  // [d_inner + conv_dim + n_heads, d_model]: z | xBC | dt
  std::vector<float> conv_w;      // [d_conv, conv_dim] (transposed from the checkpoint's [conv_dim, d_conv])
  std::vector<float> conv_b;      // [conv_dim] or empty
  std::vector<float> dt_bias, A, D;  // [n_heads]; A = -exp(A_log)
  std::vector<float> gated_norm;  // [d_inner]
  kernels::PackedWeight out_proj; // [d_model, d_inner]
  int state_index = 0;            // which SsmStateStore layer
};

// Gated DeltaNet (kernels/delta_net.h).
struct DeltaNetLayerWeights {
  std::vector<float> norm;        // [d_model]
  // [conv_dim + value_dim + 2 v_heads, d_model]: q | k | v (the conv's channels), z, beta, alpha
  kernels::PackedWeight in_proj;
  std::vector<float> conv_w;      // [d_conv, conv_dim] (transposed from [conv_dim, d_conv]); no bias
  std::vector<float> dt_bias, A;  // [v_heads]; A = -exp(A_log)
  std::vector<float> out_norm;    // [head_dim], shared by the value heads
  kernels::PackedWeight out_proj; // [d_model, value_dim]
  int state_index = 0;            // which SsmStateStore layer
};

// LFM2's short convolution (ModelConfig::short_conv).
struct ShortConvLayerWeights {
  std::vector<float> norm;         // [d_model] (operator_norm)
  kernels::PackedWeight in_proj;   // [3 d_model, d_model]: B | C | x
  std::vector<float> conv_w;       // [short_conv, d_model] (transposed from [d_model, short_conv])
  kernels::PackedWeight out_proj;  // [d_model, d_model]
  int state_index = 0;             // which SsmStateStore layer
};

struct TransformerWeights {
  core::DType embedding_dtype = core::DType::kF32;
  core::AlignedBuffer embedding;  // [vocab, d_model]; empty when tied (read from lm_head)
  std::vector<AttentionLayerWeights> attention;
  std::vector<MlpLayerWeights> mlp;
  std::vector<Mamba2LayerWeights> mamba;
  std::vector<DeltaNetLayerWeights> deltanet;
  std::vector<MoeLayerWeights> moe;
  std::vector<ShortConvLayerWeights> short_conv;
  std::vector<BlockEndWeights> block_end;  // per block, or empty (nothing after the MLP)
  PerLayerInputWeights per_layer;          // table empty: none
  std::vector<float> final_norm;  // [d_model]
  kernels::PackedWeight lm_head;  // [vocab, d_model]
  size_t nbytes() const;
  // The linear weights' storage types by bytes, largest first: "bf16", "q4_k+q6_k".
  std::string TypeSummary() const;
};

// Where a forward's time goes (filled while a profile is attached; benchmarks only).
struct ForwardProfile {
  double total_s = 0, gemm_s = 0, ssm_s = 0, attention_s = 0;
};

class Transformer {
 public:
  Transformer(ModelConfig config, TransformerWeights weights);
  const ModelConfig& config() const { return config_; }
  // Logits [n, vocab] of n final-normed hidden states (ForwardBatch::hidden rows): the LM head
  // and the logit scaling, as Forward computes its logit rows.
  void LogitsFromHidden(core::ThreadPool& pool, const float* hidden, int64_t n, float* logits);
  const TransformerWeights& weights() const { return weights_; }
  core::DType weight_dtype() const { return weights_.lm_head.storage(); }
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

  // logits: [logit_rows.size(), vocab_size].
  // REQUIRES: every seq's block table covers its rows' positions; rows of a seq contiguous;
  // for a model with Mamba2 layers, `states` and one batch.ssm entry per seq whose slot holds
  // the state after the seq's previous tokens (reset for a sequence starting at position 0).
  // With kv.Holds() false for the sliding layers, `states` has their window rings and
  // batch.ssm gives each seq's slot (its ring holds the window before its first row) and the
  // windows to capture.
  void Forward(core::ThreadPool& pool, const ForwardBatch& batch, KvStore& kv, float* logits,
               SsmStateStore* states = nullptr);

 private:
  void AttentionSublayer(core::ThreadPool& pool, const AttentionLayerWeights& w, const ForwardBatch& b,
                         KvStore& kv, const SsmStateStore* states, int64_t n);
  // With window rings: each sequence's table through its ring (ring_seqs_), and after the
  // layers, the windows its checkpoints capture.
  void PlanRings(const ForwardBatch& b, const SsmStateStore& states);
  void CaptureWindows(const ForwardBatch& b, SsmStateStore& states) const;
  void SplitQkv(core::ThreadPool& pool, const AttentionLayerWeights& w, int64_t n, float** q, float** k, float** v);
  // Attention over the compact rows through their creators' tables (b.trie_attention), into qkv_.
  void TrieAttention(core::ThreadPool& pool, const kernels::AttentionParams& params, const kernels::KvLayerView& layer,
                     const CompactionPlan& plan, float* q, float* k, float* v);
  void ApplyOutputGate(core::ThreadPool& pool, int64_t n, int64_t q_dim);  // qkv_ *= sigmoid(gate_)
  void MlpSublayer(core::ThreadPool& pool, const MlpLayerWeights& w, int64_t n);
  // Gemma 4 (per_layer_input.cc): the per-layer inputs of the n rows into pl_ (after Embed),
  // and block `block`'s end (BlockEndWeights).
  void PerLayerInputs(core::ThreadPool& pool, std::span<const int32_t> ids, int64_t n);
  void BlockEnd(core::ThreadPool& pool, const BlockEndWeights& w, int block, int64_t n);
  void MoeSublayer(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n);
  // The chosen experts of xn_'s rows, outputs per (row, slot) in moe_y_ (moe_pos_ orders them).
  void RunExperts(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n);
  void DenseBranchMoeSublayer(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n);  // MoeConfig::dense_branch
  // Router: each row's chosen experts (moe_ids_) and weights (moe_w_), [n, used].
  void Route(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n);
  void GroupByExpert(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n, std::vector<kernels::GemmGroup>* up,
                     std::vector<kernels::GemmGroup>* down);
  void SharedExpert(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n);
  // y[n, ffn] = act(h) for one MLP's gate | up (or up) rows h [n, 2 ffn | ffn].
  void Activate(core::ThreadPool& pool, const float* h, float* y, int64_t n, int64_t f) const;
  void Mamba2Sublayer(core::ThreadPool& pool, const Mamba2LayerWeights& w, const ForwardBatch& b,
                      SsmStateStore& states, int64_t n);
  void DeltaNetSublayer(core::ThreadPool& pool, const DeltaNetLayerWeights& w, const ForwardBatch& b,
                        SsmStateStore& states, int64_t n);
  void ShortConvSublayer(core::ThreadPool& pool, const ShortConvLayerWeights& w, const ForwardBatch& b,
                         SsmStateStore& states, int64_t n);
  // The causal conv1d + SiLU of the batch's n rows: in [n, ld_in] -> out [n, conv_dim], the
  // rows spread over the pool, then each sequence's conv window captured and advanced.
  void ConvAllSequences(core::ThreadPool& pool, const kernels::Mamba2Dims& dims, const ForwardBatch& b, int64_t n,
                        SsmStateStore& states, int state_index, const float* in, int64_t ld_in, const float* w,
                        const float* bias, float* out, bool silu = true) const;
  // The state captures of sequence s of the batch, for recurrent layer `state_index`.
  void CapturesFor(const ForwardBatch& b, SsmStateStore& states, int state_index, int64_t s,
                   std::vector<kernels::StateCapture>* out) const;
  // x += residual_multiplier * xn, xn first RMS-normed by post_norm when it is not empty.
  void AddResidual(core::ThreadPool& pool, int64_t n, const std::vector<float>& post_norm = {});
  void SoftcapLogits(float* logits, int64_t n) const;  // logits_scaling and final_logit_softcap
  // y [n, bias.size()] += bias per row (nothing when bias is empty).
  void AddBias(core::ThreadPool& pool, const std::vector<float>& bias, float* y, int64_t n) const;
  void AddExpertBias(core::ThreadPool& pool, const std::vector<float>& bias, float* y, int64_t n, int64_t cols) const;
  // y = RmsNorm(x) * w over `rows` rows of `dim`, the rows spread over the pool.
  void NormRows(core::ThreadPool& pool, const float* x, const float* w, float* y, int64_t rows, int64_t dim) const;
  void Gemm(core::ThreadPool& pool, const float* x, int64_t m, int64_t k, const kernels::PackedWeight& w, float* y,
            int64_t n);  // kernels::Gemm, timed when profiling
  ForwardProfile* profile_ = nullptr;
  std::mutex forward_mu_;
  void Embed(std::span<const int32_t> ids);
  void PrepareWorkspace(core::ThreadPool& pool, std::span<const int32_t> positions, int64_t n);
  void FinalRows(core::ThreadPool& pool, const ForwardBatch& b, float* logits);  // hidden rows, logits

  ModelConfig config_;
  TransformerWeights weights_;
  kernels::RopeTable rope_;
  kernels::RopeTable rope_swa_;   // sliding layers' RoPE (rope_theta_swa); rot_dim 0 = rope_
  // Workspace, grown to the largest batch seen (the warmed-up path does not allocate).
  std::vector<float> x_, xn_, qkv_, attn_, gate_up_, act_, rope_cs_, rope_swa_cs_, final_;
  std::vector<float> zxbcdt_, xbc_, ssm_y_;  // Mamba2 / DeltaNet: in_proj output, conv output, scan output
  std::vector<float> gate_;  // attention output gate [n, n_heads head_dim]
  std::vector<float> pl_, pl_h_;  // per-layer inputs [n, n_blocks P]; a block end's [n, 2P] (gate | input)
  // Mixture of experts: router scores, the choice, rows grouped by expert (input, hidden,
  // activation, output) and each (row, slot)'s place among them.
  std::vector<float> moe_logits_, moe_w_, moe_x_, moe_h_, moe_a_, moe_y_, moe_shared_, moe_gate_;
  std::vector<int32_t> moe_ids_, moe_pos_, moe_count_;
  std::vector<float> q_full_, k_full_, v_full_, o_full_;  // compaction: attention in the original layout
  // Trie-space attention: per-sequence compact ranges, and shared rows to copy into a
  // sequence's own (diverging) block: compact row, position, grouped by sequence.
  std::vector<kernels::AttentionSeq> compact_seqs_, fix_seqs_;
  std::vector<kernels::AttentionSeq> ring_seqs_;
  std::vector<std::vector<int32_t>> ring_tables_;
  std::vector<int32_t> fix_rows_, fix_positions_;
  void PlanTrieAttention(const ForwardBatch& b);
  int kv_block_tokens_ = 16;
};

}  // namespace radixlm::models
