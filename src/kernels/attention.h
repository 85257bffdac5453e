// Causal grouped-query attention over a ragged batch, reading K/V through per-sequence block
// tables over a paged KV store (the PagedAttention layout of vLLM, the ragged-batch interface
// of FlashInfer's BatchPrefillWithPagedKVCache).
//
// Each query row attends to KV positions [0, positions[row]] of its sequence, in KV blocks of
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

#include "core/thread_pool.h"

namespace radixlm::kernels {

// One layer's slice of the paged KV store, f32. Keys are stored transposed within a block,
// k: [n_blocks, n_kv_heads, head_dim, block_tokens], so the scores of a query against a whole
// block are one small matrix product (a broadcast query element times a row of keys) for
// prefill and decode alike; values are v: [n_blocks, block_tokens, n_kv_heads, head_dim].
struct KvLayerView {
  float* k = nullptr;
  float* v = nullptr;
  int block_tokens = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // [head_dim, block_tokens] keys of one block and head.
  float* KeysOf(int32_t block, int kv_head) const {
    return k + (static_cast<int64_t>(block) * n_kv_heads + kv_head) * head_dim * block_tokens;
  }
  float& Key(int32_t block, int offset, int kv_head, int i) const {
    return KeysOf(block, kv_head)[static_cast<int64_t>(i) * block_tokens + offset];
  }
  float* ValueAt(int32_t block, int offset, int kv_head) const {
    return v + ((static_cast<int64_t>(block) * block_tokens + offset) * n_kv_heads + kv_head) * head_dim;
  }
};

// Query rows [row_begin, row_begin + n_rows) of the batch belong to one sequence whose KV
// block i is block_table[i].
struct AttentionSeq {
  int64_t row_begin = 0;
  int64_t n_rows = 0;
  std::span<const int32_t> block_table;
};

struct AttentionParams {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 0;  // usually 1 / sqrt(head_dim)
};

// Writes k, v [n_tokens, n_kv_heads, head_dim] of each sequence's rows into the store at the
// rows' positions.
void WriteKv(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const int32_t* positions,
             const float* k, const float* v);

// q: [n_tokens, n_heads, head_dim]; out: same shape; lse: [n_tokens, n_heads] or nullptr.
void PagedAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                    std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                    float* out, float* lse);

// Oracle: the textbook two-pass softmax in double precision, one row at a time.
void PagedAttentionReference(const AttentionParams& p, const KvLayerView& kv,
                             std::span<const AttentionSeq> seqs, const int32_t* positions,
                             const float* q, float* out, float* lse);

}  // namespace radixlm::kernels
