// The tile driver of the 8-lane attention kernels (attention_avx2.cc: ymm; attention_neon.cc:
// pairs of q registers), shared by both: chunks of whole KV blocks of >= 64 keys aligned to the
// sequence's first position; per chunk and per 12 query vectors, the ISA's scores, online
// softmax and weighted values (attention_avx2.cc's header says why the order of operations is
// batch-invariant). Ops, the ISA's kernels:
//   template <DType D> static void ScoreGroups(const float* qpack, int n_q, const KvElem8<D>* const* k,
//       int64_t stride, int n_groups, int d, float scale, float* scores, int64_t ld_scores, Prefetcher* pf);
//   static float SoftmaxChunk(float* s, int n, float* m, float* l);
//   template <DType D> static void WeightedValues(int n_q, float* const* acc, const float* corr,
//       const float* const* p, const int* first, const int* valid, const KvElem8<D>* const* v, int d, Prefetcher* pf);
// Internal to kernels/attention; include only from those two files.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_internal.h"

namespace radixlm::kernels::attn {

template <core::DType D>
using KvElem8 = std::conditional_t<D == core::DType::kF32, float, uint16_t>;

// Register blocks: NQ query vectors x N groups of 8 lanes, at most 12 accumulators of 16 ymm
// registers (32 q registers on ARM); the rest hold the shared K or V loads and one broadcast.
constexpr int LanesFor8(int nq) { return nq == 1 ? 8 : nq == 2 ? 4 : nq == 3 ? 3 : 2; }

// Key groups of a chunk: a chunk is at most 256 keys (blocks of at most 256 tokens, checked by
// PagedAttention; smaller blocks make chunks of under 128).
inline constexpr int kMaxChunkGroups = 32;

// Query vectors (two register blocks) whose scores, softmax and weighted values run back to
// back for a chunk: their scores (one 3 KB buffer) are still in L1 for the softmax and the
// values, and the chunk's K and V stay in cache from block to block.
inline constexpr int kInner = 12;

// Loop steps of a chunk's score and value loops for n_q vectors (the prefetcher spreads the
// next chunk's lines over them), per register block as ScoreGroupsNq and ValueRows run it: d
// steps per LanesFor(nq) groups of 8 keys, n_keys steps per LanesFor(nq) x 8 dims.
inline int ChunkSteps8(int n_q, int n_keys, int d) {
  const int n_groups = (n_keys + 7) / 8, d8 = (d + 7) / 8;
  int steps = 0;
  for (int v = 0; v < n_q; v += 6) {
    const int lanes = LanesFor8(std::min(6, n_q - v));
    steps += d * ((n_groups + lanes - 1) / lanes) + n_keys * ((d8 + lanes - 1) / lanes);
  }
  return std::max(1, steps);
}

struct Tile8Workspace {
  std::vector<float> scores, staged_k, staged_v, qpack;
  std::vector<const void*> vptr;
};

template <class Ops, core::DType D>
void AttendTile8(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head, const TileRow* rows,
            int n_rows) {
  static thread_local Tile8Workspace ws;
  const int group = p.n_heads / p.n_kv_heads, d = p.head_dim, bt = kv.block_tokens;
  // Chunks of whole blocks, at least 64 keys; blocks of a multiple of 8 keys are read in place.
  const int blocks_per_chunk = std::max(1, (64 + bt - 1) / bt);
  const int chunk = blocks_per_chunk * bt, chunk_pad = (chunk + 7) / 8 * 8;
  const bool direct = bt % 8 == 0;
  const int n_vec = n_rows * group;
  // + 8: SoftmaxChunk's last group, unmasked, may run past a window's keys to the buffer's end.
  ws.scores.resize(static_cast<size_t>(std::min(n_vec, kInner)) * chunk_pad + 8);
  ws.qpack.resize(static_cast<size_t>(n_vec) * d);
  ws.vptr.resize(chunk);
  if (!direct) {
    ws.staged_k.assign(static_cast<size_t>(d) * chunk_pad, 0.0f);
    ws.staged_v.resize(static_cast<size_t>(chunk) * d);
  }
  const KvElem8<D>* keys = static_cast<const KvElem8<D>*>(kv.k);
  const KvElem8<D>* values = static_cast<const KvElem8<D>*>(kv.v);

  float m[kTileVectors], l[kTileVectors], corr[kTileVectors];
  const float* qv[kTileVectors];
  float* acc[kTileVectors];
  const float* sv[kTileVectors];
  int valid_keys[kTileVectors], vec_of[kTileVectors];
  int32_t max_pos = -1;
  for (int r = 0; r < n_rows; ++r) {
    max_pos = std::max(max_pos, rows[r].position);
    for (int g = 0; g < group; ++g) {
      const int v = r * group + g;
      m[v] = -std::numeric_limits<float>::infinity();
      l[v] = 0;
      std::memset(rows[r].out + (kv_head * group + g) * d, 0, d * sizeof(float));
    }
  }
  const KvElem8<D>* kg[kMaxChunkGroups];
  const float* kgs[kMaxChunkGroups];
  PackedSet packed;
  int first_keys[kTileVectors];
  // Chunks are aligned to the first position attended (a split's suffix starts at kv_begin).
  for (int64_t c0 = FirstChunk(rows, n_rows, seq.kv_begin, chunk); c0 <= max_pos; c0 += chunk) {
    const int n_keys = static_cast<int>(std::min<int64_t>(chunk, max_pos + 1 - c0));
    const int n_groups = (n_keys + 7) / 8;
    // Query vectors of rows that attend keys of this chunk (a row's vectors are consecutive).
    int n_active = 0;
    for (int r = 0; r < n_rows; ++r) {
      int lo, hi;
      if (!RowKeys(rows[r], c0, n_keys, &lo, &hi)) continue;
      for (int g = 0; g < group; ++g, ++n_active) {
        qv[n_active] = rows[r].q + (kv_head * group + g) * d;
        acc[n_active] = rows[r].out + (kv_head * group + g) * d;
        first_keys[n_active] = lo;
        valid_keys[n_active] = hi;
        vec_of[n_active] = r * group + g;
      }
    }
    if (!packed.Same(qv, n_active)) {
      PackQueries(qv, n_active, d, ws.qpack.data());
      packed.Set(qv, n_active);
    }
    Prefetcher pf;
    if (direct) {
      pf.PlanNextChunk(kv, seq, kv_head, c0 + chunk, std::min<int64_t>(c0 + 2 * chunk, max_pos + 1),
                       ChunkSteps8(n_active, n_keys, d));
      ValueRowPointers(kv, seq, kv_head, values, c0, n_keys, ws.vptr.data());
      for (int g = 0; g < n_groups; ++g) {
        const int64_t pos = c0 + 8 * g;
        kg[g] = keys + kv.KeyIndex(seq.block_table[pos / bt], static_cast<int>(pos % bt), kv_head, 0);
      }
    } else {
      for (int j = 0; j < n_keys; ++j) {
        const int64_t pos = c0 + j;
        const int32_t block = seq.block_table[pos / bt];
        for (int i = 0; i < d; ++i) ws.staged_k[i * chunk_pad + j] = kv.KeyAt(block, static_cast<int>(pos % bt), kv_head, i);
        for (int i = 0; i < d; ++i) ws.staged_v[j * d + i] = kv.ValueAt(block, static_cast<int>(pos % bt), kv_head, i);
        ws.vptr[j] = ws.staged_v.data() + j * d;
      }
      for (int g = 0; g < n_groups; ++g) kgs[g] = ws.staged_k.data() + 8 * g;
    }
    // Per few register blocks: scores, softmax over each vector's causal keys, weighted values,
    // while the chunk's K and V stay in L1.
    for (int b0 = 0; b0 < n_active; b0 += kInner) {
      const int nb = std::min(kInner, n_active - b0);
      const float* qp = ws.qpack.data() + static_cast<int64_t>(b0) * d;
      if (direct) Ops::template ScoreGroups<D>(qp, nb, kg, bt, n_groups, d, p.scale, ws.scores.data(), chunk_pad, &pf);
      else Ops::template ScoreGroups<core::DType::kF32>(qp, nb, kgs, chunk_pad, n_groups, d, p.scale, ws.scores.data(), chunk_pad, &pf);
      for (int v = b0; v < b0 + nb; ++v) {
        float* s = ws.scores.data() + static_cast<int64_t>(v - b0) * chunk_pad;
        corr[v] = Ops::SoftmaxChunk(s + first_keys[v], valid_keys[v] - first_keys[v], &m[vec_of[v]], &l[vec_of[v]]);
        sv[v] = s;
      }
      if (direct) {
        Ops::template WeightedValues<D>(nb, acc + b0, corr + b0, sv + b0, first_keys + b0, valid_keys + b0,
                          reinterpret_cast<const KvElem8<D>* const*>(ws.vptr.data()), d, &pf);
      } else {
        Ops::template WeightedValues<core::DType::kF32>(nb, acc + b0, corr + b0, sv + b0, first_keys + b0, valid_keys + b0,
                                    reinterpret_cast<const float* const*>(ws.vptr.data()), d, &pf);
      }
    }
    pf.Rest();
  }
  FinishTile(rows, n_rows, group, kv_head, d, m, l);
}


// A tile in the KV store's dtype.
template <class Ops>
void AttendTile8ByDtype(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                        const TileRow* rows, int n_rows) {
  switch (kv.dtype) {
    case core::DType::kBF16: return AttendTile8<Ops, core::DType::kBF16>(p, kv, seq, kv_head, rows, n_rows);
    case core::DType::kF16: return AttendTile8<Ops, core::DType::kF16>(p, kv, seq, kv_head, rows, n_rows);
    default: return AttendTile8<Ops, core::DType::kF32>(p, kv, seq, kv_head, rows, n_rows);
  }
}

}  // namespace radixlm::kernels::attn
