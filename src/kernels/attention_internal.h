// Internals of kernels/attention shared by the driver (attention.cc) and the AVX2 and AVX-512
// kernels (attention_avx2.cc, attention_avx512.cc). Not part of the kernels' interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"

namespace radixlm::kernels::attn {

// A tile: query rows of one sequence attended together for one kv head and the q heads of
// its group, so each K/V block is read once per tile, not once per row.
struct TileRow {
  int32_t position;
  const float* q;   // [n_heads, head_dim]
  float* out;       // [n_heads, head_dim]
  float* lse;       // [n_heads] or nullptr
};

inline constexpr int kMaxGroup = 16;      // q heads per kv head
inline constexpr int kTileVectors = 256;  // query vectors (rows x group) sharing each K/V load
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

}  // namespace radixlm::kernels::attn
