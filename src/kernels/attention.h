// Causal grouped-query attention over a ragged batch, reading K/V through per-sequence block
// tables over a paged KV store (the PagedAttention layout of vLLM, the ragged-batch interface
// of FlashInfer's BatchPrefillWithPagedKVCache).
//
// Each query row attends to KV positions [0, positions[row]] of its sequence (the last
// `window` of them for a sliding-window layer), in KV blocks of
// `block_tokens`, with an online softmax (running max and sum, as in FlashAttention), and
// reports its log-sum-exp per head, so partial results over disjoint KV ranges can later be
// merged exactly (cascade attention).
//
// Batch invariance: a row's output depends only on its query, its position and its
// sequence's KV, processed block by block in position order; never on other rows.
// Complexity: O(sum over rows of (position + 1) * n_heads * head_dim).
// REQUIRES: the K/V of every position a row reads have been written to the store.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace radixlm::kernels {

// One layer's slice of the paged KV store, in f32, bf16 or f16 (the KV cache dtype; the
// arithmetic is f32 whatever it is). Keys are stored transposed within a block,
// k: [n_blocks, n_kv_heads, head_dim, block_tokens], so the scores of a query against a whole
// block are one small matrix product (a broadcast query element times a row of keys) for
// prefill and decode alike; values are v: [n_blocks, n_kv_heads, block_tokens, head_dim], so a
// kv head's keys and values of a block are each one contiguous run (what decode streams).
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  int block_tokens = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  core::DType dtype = core::DType::kF32;

  size_t elem_bytes() const { return core::DTypeSize(dtype); }
  // Element index of key dim i of (block, offset, kv_head), and of a value row's first dim.
  int64_t KeyIndex(int32_t block, int offset, int kv_head, int i) const {
    return ((static_cast<int64_t>(block) * n_kv_heads + kv_head) * head_dim + i) * block_tokens + offset;
  }
  int64_t ValueIndex(int32_t block, int offset, int kv_head) const {
    return ((static_cast<int64_t>(block) * n_kv_heads + kv_head) * block_tokens + offset) * head_dim;
  }
  float KeyAt(int32_t block, int offset, int kv_head, int i) const { return Get(k, KeyIndex(block, offset, kv_head, i)); }
  float ValueAt(int32_t block, int offset, int kv_head, int i) const { return Get(v, ValueIndex(block, offset, kv_head) + i); }
  void SetKey(int32_t block, int offset, int kv_head, int i, float x) const { Put(k, KeyIndex(block, offset, kv_head, i), x); }
  void SetValue(int32_t block, int offset, int kv_head, int i, float x) const { Put(v, ValueIndex(block, offset, kv_head) + i, x); }

 private:
  float Get(const void* base, int64_t i) const {
    switch (dtype) {
      case core::DType::kBF16: return core::Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
      case core::DType::kF16: return core::F16ToF32(static_cast<const uint16_t*>(base)[i]);
      default: return static_cast<const float*>(base)[i];
    }
  }
  void Put(void* base, int64_t i, float x) const {
    switch (dtype) {
      case core::DType::kBF16: static_cast<uint16_t*>(base)[i] = core::F32ToBf16(x); break;
      case core::DType::kF16: static_cast<uint16_t*>(base)[i] = core::F32ToF16(x); break;
      default: static_cast<float*>(base)[i] = x; break;
    }
  }
};

// Query rows [row_begin, row_begin + n_rows) of the batch belong to one sequence whose KV
// block i is block_table[i]. The rows attend KV positions [kv_begin, position]: kv_begin > 0
// is the suffix part of a split (cascade) attention, whose prefix part is attended elsewhere;
// a row with nothing to attend gets out = 0 and lse = -inf (the merge's identity).
// REQUIRES: kv_begin a multiple of the block size.
struct AttentionSeq {
  int64_t row_begin = 0;
  int64_t n_rows = 0;
  std::span<const int32_t> block_table;
  int64_t kv_begin = 0;
};

struct AttentionParams {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 0;  // usually 1 / sqrt(head_dim)
  // Sliding-window attention (Gemma, gpt-oss; llama.cpp's LLAMA_SWA_TYPE_STANDARD): > 0, a row
  // at position p attends only keys [p - window + 1, p] (window keys, itself included), and
  // never reads the values of keys before that; 0: the whole causal prefix.
  int window = 0;
  // gpt-oss: a learned logit per q head [n_heads] in every softmax's denominator, with no value
  // (out *= S / (S + exp(sink - max))). CascadeAttention applies it once to the merged state;
  // PagedAttention computes partial states and ignores it.
  const float* sinks = nullptr;
};

// Writes k, v [n_tokens, n_kv_heads, head_dim] of each sequence's rows into the store at the
// rows' positions, rounded to the store's dtype (round to nearest even); the kv heads spread
// over the pool when there are more than a decode step's few rows.
void WriteKv(core::ThreadPool& pool, const KvLayerView& kv, std::span<const AttentionSeq> seqs, const int32_t* positions,
             const float* k, const float* v);

// q: [n_tokens, n_heads, head_dim]; out: same shape; lse: [n_tokens, n_heads] or nullptr.
void PagedAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                    std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                    float* out, float* lse);

// The attention sinks of p (if any) on merged states: lse' = logaddexp(lse, sink_h) and
// out *= exp(lse - lse'), per row and head; a row that attended nothing keeps out = 0.
void ApplyAttentionSinks(const AttentionParams& p, int64_t n_rows, float* out, float* lse);

// Merges the attention state (out_b, lse_b) into (out, lse), both over disjoint KV ranges of the
// same query rows: the softmax over the union, exactly (FlashInfer's merge_state, natural log).
// out, out_b: [n_rows, n_heads, head_dim]; lse, lse_b: [n_rows, n_heads].
void MergeAttentionStates(int64_t n_rows, int n_heads, int head_dim, float* out, float* lse, const float* out_b,
                          const float* lse_b);

// Rows that share, in the same physical blocks, the KV of the split chunks
// [first_chunk, end_chunk) where end_chunk = prefix_blocks.size() * block_tokens / split_tokens
// (rounded down):
// a radix node's blocks, held by every request below it. Groups nest (system prompt -> few-shot
// -> conversation): a row may be in several groups over disjoint chunk ranges.
struct CascadeGroup {
  std::span<const int32_t> prefix_blocks;  // block ids of positions [0, end_chunk * split_tokens)
  std::vector<int64_t> rows;               // batch rows; every row of a member sequence
  int64_t first_chunk = 0;
};

// Rows of one tile: a group's prefix blocks are read once per this many rows (per kv head).
int CascadeTileRows(int group_heads);

// The split models use: the first multiple of block_tokens at or above 1024 tokens (long enough
// that the merges cost ~nothing, short enough that a shared system prompt spans whole chunks).
int64_t AttentionSplitTokens(int block_tokens);

// Cascade groups of a batch, from its block tables alone (no bookkeeping in requests): for each
// split chunk, the sequences whose tables hold the same block ids over the whole chunk, and whose
// rows all lie at or after the chunk's end, share it physically; at least min_seqs of them form
// a group for that chunk (the cost rule: below a whole chunk, or alone, the plain pass is as
// cheap). Consecutive chunks shared by the same sequences are one group; where a group splits
// into sub-groups further down the tree, those are the nested levels. Decode rows and prefill
// chunks (all rows after the shared chunks) alike.
std::vector<CascadeGroup> PlanCascadeGroups(std::span<const AttentionSeq> seqs, const int32_t* positions,
                                            int block_tokens, int64_t split_tokens, int min_seqs = 2);

// Attention split at fixed positions, with cascade groups. Every row's attention is the fold, in
// order, of its states over the chunks [c * split_tokens, (c + 1) * split_tokens) of its
// positions, merged through their log-sum-exp; the split points depend only on positions, so a
// row's result never depends on the batch. A group's rows attend the chunks it covers
// together (FlashInfer's cascade: each block read once per tile of up to CascadeTileRows rows,
// not once per row) and the rest through their own sequences; the chunk states are the same
// either way, so cascade on = off bitwise. `one_pass_per_row` computes a group's chunks row by
// row (the same arithmetic; for tests). Within one chunk the result is PagedAttention's; against
// the unsplit attention it agrees to rounding (~1e-6 in f32).
// A sliding-window layer (p.window > 0) is not split and takes no groups: each row reads at
// most `window` keys, so it is PagedAttention's pass over them (groups are ignored). Sinks
// (p.sinks) are applied to the final state.
// REQUIRES: split_tokens a multiple of block_tokens; a group lists every row of each member
// sequence, whose block table starts with the group's prefix_blocks and whose rows all lie at or
// after the group's last chunk; no row in two groups for the same chunk; every seq has kv_begin 0.
void CascadeAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                      std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                      std::span<const CascadeGroup> groups, int64_t split_tokens, float* out, float* lse,
                      bool one_pass_per_row = false);

// Oracle: the textbook two-pass softmax in double precision, one row at a time (with p's window
// and sinks: the sink's exp in the denominator, as llama.cpp's soft_max_ext computes it).
void PagedAttentionReference(const AttentionParams& p, const KvLayerView& kv,
                             std::span<const AttentionSeq> seqs, const int32_t* positions,
                             const float* q, float* out, float* lse);

}  // namespace radixlm::kernels
