// Internals of kernels/attention shared by the driver (attention.cc) and the AVX2, AVX-512 and
// NEON kernels (attention_avx2.cc, attention_avx512.cc, attention_neon.cc). Not part of the
// kernels' interface.
#pragma once


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/attention.h"

namespace radixlm::kernels::attn {

inline constexpr int kMaxGroup = 16;      // q heads per kv head
inline constexpr int kTileVectors = 256;  // query vectors (rows x group) sharing each K/V load

// A tile: query rows of one sequence attended together for one kv head and the q heads of
// its group, so each K/V block is read once per tile, not once per row.
struct TileRow {
  int32_t position;
  const float* q;   // [n_heads, head_dim]
  float* out;       // [n_heads, head_dim]
  float* lse;       // [n_heads] or nullptr
  int64_t first;    // the first key attended: kv_begin, or later in a sliding window
};

// Where row `r` meets the keys [c0, c0 + n_keys): its keys there are [*lo, *hi) relative to c0;
// false when it attends none of them (before its first key or past its position).
inline bool RowKeys(const TileRow& r, int64_t c0, int n_keys, int* lo, int* hi) {
  if (r.position < c0 || r.first >= c0 + n_keys) return false;
  *lo = static_cast<int>(std::max<int64_t>(0, r.first - c0));
  *hi = static_cast<int>(std::min<int64_t>(n_keys, r.position - c0 + 1));
  return true;
}

// The start of the first chunk any row of the tile attends: chunks stay on the grid of
// `chunk` keys from kv_begin (a row's chunks do not depend on the tile), and those wholly
// before every row's first key are never read.
inline int64_t FirstChunk(const TileRow* rows, int n_rows, int64_t kv_begin, int chunk) {
  int64_t first = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < n_rows; ++r) first = std::min(first, rows[r].first);
  return first <= kv_begin ? kv_begin : kv_begin + (first - kv_begin) / chunk * chunk;
}

// The query vectors last packed by PackQueries: repacked only when a chunk's active set differs
// (it shrinks as rows end, and with sliding windows it also grows as rows' windows begin).
struct PackedSet {
  const float* q[kTileVectors];
  int n = -1;
  bool Same(const float* const* qv, int n_q) const { return n == n_q && std::equal(qv, qv + n_q, q); }
  void Set(const float* const* qv, int n_q) {
    std::copy(qv, qv + n_q, q);
    n = n_q;
  }
};

// Rows per tile: as many as the vector budget allows, so a cascade group of decode rows (all at
// one position over a shared prefix) reads each K/V block once for up to 256 / group rows.
inline int TileRows(int group) { return kTileVectors / group; }

// A tile's last step: each query vector's output divided by its softmax sum l, and its lse
// (m + log l) written where asked. Nothing attended (a split's empty part): out stays 0 and
// lse = -inf, the merge's identity.
inline void FinishTile(const TileRow* rows, int n_rows, int group, int kv_head, int d, const float* m, const float* l) {
  for (int r = 0; r < n_rows; ++r)
    for (int g = 0; g < group; ++g) {
      const int vec = r * group + g;
      float* out = rows[r].out + (kv_head * group + g) * d;
      const float inv = l[vec] > 0 ? 1.0f / l[vec] : 0.0f;
      for (int i = 0; i < d; ++i) out[i] *= inv;
      if (rows[r].lse)
        rows[r].lse[kv_head * group + g] = l[vec] > 0 ? m[vec] + std::log(l[vec]) : -std::numeric_limits<float>::infinity();
    }
}

// The online softmax's rescale of a running sum and accumulator, exp(m_old - m_new): 1 when
// the running max did not move, without the libm call (exp(0) is exactly 1, so no bit
// changes; on a long shared prefix the max rarely moves after the first chunks). exp(-inf) = 0
// on the first chunk; an infinite max goes through exp as before (inf - inf is NaN).
inline float Correction(float m_old, float m_new) {
  return m_old == m_new && std::isfinite(m_old) ? 1.0f : std::exp(m_old - m_new);
}

// Value row pointers of keys [c0, c0 + n) of kv head `kv_head`: one block-table lookup per
// block, not a 64-bit division per key.
template <class E>
inline void ValueRowPointers(const KvLayerView& kv, const AttentionSeq& seq, int kv_head, const E* values, int64_t c0,
                             int n, const void** out) {
  const int bt = kv.block_tokens;
  for (int j = 0; j < n;) {
    const int64_t pos = c0 + j;
    const int off = static_cast<int>(pos % bt);
    const E* row = values + kv.ValueIndex(seq.block_table[pos / bt], off, kv_head);
    for (const int end = j + std::min(bt - off, n - j); j < end; ++j, row += kv.head_dim) out[j] = row;
  }
}

// Software prefetch of the next chunk's K and V runs, a few lines at a time from inside the
// tile kernels' compute loops: decode attention streams the whole KV from DRAM, the hardware
// prefetcher does not follow a block table (and stops at each 4 KB run's page), and a burst of
// hundreds of prefetches overflows the miss buffers (they are dropped).
struct Prefetcher {
  const char* runs[64];
  int n_runs = 0;
  int64_t run_bytes = 0;
  int run = 0;
  int64_t off = 0;
  int per8 = 0;  // lines per 8 steps (a step: a dim of a score loop, a key of a value loop)
  // Plans the K and V runs of kv head `kv_head` over positions [begin, end) (each block is two
  // contiguous runs) to be issued over `steps` loop steps; the kernels issue `per8` lines
  // every 8 steps. Nothing when begin >= end.
  void PlanNextChunk(const KvLayerView& kv, const AttentionSeq& seq, int kv_head, int64_t begin, int64_t end,
                     int steps) {
    const int bt = kv.block_tokens;
    const size_t elem = kv.elem_bytes();
    run_bytes = static_cast<int64_t>(bt) * kv.head_dim * elem;
    for (int64_t pos = begin; pos < end && n_runs + 2 <= 64; pos += bt) {
      const int32_t block = seq.block_table[pos / bt];
      runs[n_runs++] = static_cast<const char*>(kv.k) + kv.KeyIndex(block, 0, kv_head, 0) * elem;
      runs[n_runs++] = static_cast<const char*>(kv.v) + kv.ValueIndex(block, 0, kv_head) * elem;
    }
    const int64_t lines = n_runs * ((run_bytes + 63) / 64);
    per8 = static_cast<int>((8 * lines + steps - 1) / steps);
  }
  void Issue(int lines) {
    for (int i = 0; i < lines && run < n_runs; ++i) {
      __builtin_prefetch(runs[run] + off, 0, 3);  // prefetcht0 on x86
      off += 64;
      if (off >= run_bytes) { off = 0; ++run; }
    }
  }
  void Rest() { Issue(1 << 30); }
};

// Calls f(std::integral_constant<int, N>{}) with N = n for n in 1..5 and N = 6 otherwise: a
// register block's count of query vectors as a template argument of the ISA's kernel.
template <class F>
inline void WithBlockVectors(int n, F&& f) {
  switch (n) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    default: return f(std::integral_constant<int, 6>{});
  }
}

// The weighted values of n_q query vectors, 6 to a register block: rows(qv, acc, corr, p, j0,
// j1) runs the ISA's value product for decltype(qv)::value vectors over keys [j0, j1). Each
// vector sums over its own keys [first, valid) only: a block runs over the keys all its vectors
// share, a vector's keys before them (a sliding window starting later) and after them (a longer
// causal range) go alone (never 0 x another key's value: an overflowed f16 value is inf, a key
// outside a window may be stale, and 0 x inf would leak NaN). Where a chain is split does not
// change its bits (acc * corr once, then one FMA per key in order).
template <class Rows>
inline void BlockedValues(int n_q, float* const* acc, const float* corr, const float* const* p, const int* first,
                          const int* valid, Rows&& rows) {
  static constexpr float kOne = 1.0f;  // x * 1 = x: a chain continued, not rescaled again
  const std::integral_constant<int, 1> one;
  for (int w = 0; w < n_q; w += 6) {
    const int nb = std::min(6, n_q - w);
    const int lo = *std::max_element(first + w, first + w + nb);
    const int hi = *std::min_element(valid + w, valid + w + nb);
    if (lo >= hi) {  // no key common to the block
      for (int x = w; x < w + nb; ++x) rows(one, acc + x, corr + x, p + x, first[x], valid[x]);
      continue;
    }
    float c[6];
    for (int x = w; x < w + nb; ++x) {
      c[x - w] = corr[x];
      if (first[x] < lo) {
        rows(one, acc + x, corr + x, p + x, first[x], lo);
        c[x - w] = kOne;
      }
    }
    WithBlockVectors(nb, [&](auto qv) { rows(qv, acc + w, c, p + w, lo, hi); });
    for (int x = w; x < w + nb; ++x)
      if (valid[x] > hi) rows(one, acc + x, &kOne, p + x, hi, valid[x]);
  }
}

// Query vectors in the register blocks' order for the tile kernels' score products: block b
// (vectors 6 b .. 6 b + nb - 1) at out + 6 b d, dim-major [d][nb], so a block's broadcasts
// are constant offsets from one pointer.
inline void PackQueries(const float* const* q, int n_q, int d, float* out) {
  for (int v0 = 0; v0 < n_q; v0 += 6) {
    const int nb = std::min(6, n_q - v0);
    float* blk = out + static_cast<int64_t>(v0) * d;
    for (int v = 0; v < nb; ++v)
      for (int i = 0; i < d; ++i) blk[i * nb + v] = q[v0 + v][i];
  }
}

// The AVX-512 tile kernel (any KV dtype, block size and head_dim <= 256). Softmax runs over
// chunks of whole KV blocks of at least 64 keys, aligned to the sequence's first position,
// so a row's arithmetic depends only on its position and its sequence's KV: batch-invariant.
void AttendTileAvx512(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                      const TileRow* rows, int n_rows);

// The AVX2 tile kernel (any KV dtype, block size and head_dim). Softmax runs over chunks of
// whole KV blocks of at least 64 keys, aligned to the sequence's first position; scores and
// weighted values are register-blocked products over the tile's query vectors whose per-element
// order of operations does not depend on the tile: batch-invariant.
void AttendTileAvx2(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                    const TileRow* rows, int n_rows);

// The same kernel on ARM64's NEON (attention_neon.cc; built on aarch64 only).
void AttendTileNeon(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                    const TileRow* rows, int n_rows);

}  // namespace radixlm::kernels::attn
