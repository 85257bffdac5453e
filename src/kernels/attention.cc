#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ranges>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "core/status.h"
#include "kernels/attention_internal.h"

namespace radixlm::kernels {
namespace {

using core::DType;

// The element type of a KV dtype and its conversion to f32.
template <DType D>
using KvElem = std::conditional_t<D == DType::kF32, float, uint16_t>;

template <DType D>
inline float LoadKv(const KvElem<D>* p) {
  if constexpr (D == DType::kF32) return *p;
  else if constexpr (D == DType::kBF16) return core::Bf16ToF32(*p);
  else return core::F16ToF32(*p);
}

using attn::kMaxGroup;
using attn::kTileVectors;
using attn::TileRow;
constexpr int kMaxBlock = 256;   // block_tokens limit for the per-block score buffer

// Scores of query vectors against one block's transposed keys kt [d, bt]:
// out[v * bt + j] = sum_i q_v[i] * kt[i * bt + j], one FMA chain per (v, j) with i ascending,
// whatever the number of vectors computed together: a score never depends on the batch.
template <DType D>
void ScoresScalar(const float* const* q, int n_q, const KvElem<D>* kt, int d, int bt, float* out) {
  for (int vq = 0; vq < n_q; ++vq)
    for (int j = 0; j < bt; ++j) {
      float s = 0;
      for (int i = 0; i < d; ++i) s += q[vq][i] * LoadKv<D>(kt + i * bt + j);
      out[vq * bt + j] = s;
    }
}

template <DType D>
void ScaleAccumulateScalar(float* acc, float scale, const float* p, const KvElem<D>* const* v, int n_v, int d) {
  for (int i = 0; i < d; ++i) {
    float a = acc[i] * scale;
    for (int j = 0; j < n_v; ++j) a += p[j] * LoadKv<D>(v[j] + i);
    acc[i] = a;
  }
}

// A tile of query rows of one sequence, one kv head, the `group` q heads that share it. KV
// blocks are the outer loop so each block is read from memory once per tile, not once per
// row (long prompts were bandwidth-bound on K/V otherwise). Each row's arithmetic is exactly
// the single-row sequence: a row's result does not depend on the tile it is in. This is the
// scalar path; on AVX2 the tile goes to attention_avx2.cc (chunks of >= 64 keys as two
// register-blocked matrix products), on AVX-512 to attention_avx512.cc, on ARM64 (NEON) to
// attention_neon.cc (attention_avx2.cc's kernel on pairs of 128-bit registers).
template <DType D>
void AttendTile(const AttentionParams& p, const KvLayerView& kv, const AttentionSeq& seq, int kv_head,
                const TileRow* rows, int n_rows, bool simd) {
#if RADIXLM_X86
  if (simd) return attn::AttendTileAvx2(p, kv, seq, kv_head, rows, n_rows);
#endif
#if RADIXLM_ARM
  if (simd) return attn::AttendTileNeon(p, kv, seq, kv_head, rows, n_rows);
#endif
  const int group = p.n_heads / p.n_kv_heads, d = p.head_dim, bt = kv.block_tokens;
  const KvElem<D>* keys = static_cast<const KvElem<D>*>(kv.k);
  const KvElem<D>* values = static_cast<const KvElem<D>*>(kv.v);
  float m[kTileVectors], l[kTileVectors];  // per (row, head): index r * group + g
  float scores[kMaxGroup][kMaxBlock];
  const KvElem<D>* vptr[kMaxBlock];
  const float* qv[kTileVectors];
  thread_local std::vector<float> block_scores_buf;
  block_scores_buf.resize(static_cast<size_t>(kTileVectors) * bt);
  float* block_scores = block_scores_buf.data();  // [tile rows x group, bt]
  int32_t max_pos = -1;
  for (int r = 0; r < n_rows; ++r) {
    max_pos = std::max(max_pos, rows[r].position);
    for (int g = 0; g < group; ++g) {
      m[r * group + g] = -std::numeric_limits<float>::infinity();
      l[r * group + g] = 0;
      std::memset(rows[r].out + (kv_head * group + g) * d, 0, d * sizeof(float));
    }
  }
  for (int64_t start = attn::FirstChunk(rows, n_rows, seq.kv_begin, bt); start <= max_pos; start += bt) {
    const int32_t block = seq.block_table[start / bt];
    const int n_block = static_cast<int>(std::min<int64_t>(bt, max_pos + 1 - start));
    for (int j = 0; j < n_block; ++j) vptr[j] = values + kv.ValueIndex(block, j, kv_head);
    // Scores of every (row, head) of the tile that attends keys of this block, in one pass.
    int n_q = 0, lo, hi;
    for (int r = 0; r < n_rows; ++r)
      if (attn::RowKeys(rows[r], start, n_block, &lo, &hi))
        for (int g = 0; g < group; ++g) qv[n_q++] = rows[r].q + (kv_head * group + g) * d;
    ScoresScalar<D>(qv, n_q, keys + kv.KeyIndex(block, 0, kv_head, 0), d, bt, block_scores);
    int vq = 0;
    for (int r = 0; r < n_rows; ++r) {
      if (!attn::RowKeys(rows[r], start, n_block, &lo, &hi)) continue;
      const int n = hi - lo;  // the row's keys [lo, hi) of the block
      for (int g = 0; g < group; ++g, ++vq)
        for (int j = 0; j < n; ++j) scores[g][j] = block_scores[vq * bt + lo + j] * p.scale;
      for (int g = 0; g < group; ++g) {
        float& mg = m[r * group + g];
        float& lg = l[r * group + g];
        float bm = mg;
        for (int j = 0; j < n; ++j) bm = std::max(bm, scores[g][j]);
        const float correction = attn::Correction(mg, bm);
        for (int j = 0; j < n; ++j) scores[g][j] = std::exp(scores[g][j] - bm);
        float bs = 0;
        for (int j = 0; j < n; ++j) bs += scores[g][j];
        lg = lg * correction + bs;
        mg = bm;
        float* acc = rows[r].out + (kv_head * group + g) * d;
        ScaleAccumulateScalar<D>(acc, correction, scores[g], vptr + lo, n, d);
      }
    }
  }
  for (int r = 0; r < n_rows; ++r)
    for (int g = 0; g < group; ++g) {
      float* acc = rows[r].out + (kv_head * group + g) * d;
      const float lv = l[r * group + g];
      // Nothing attended (a split's empty part): out stays 0, lse = -inf, the merge's identity.
      const float inv = lv > 0 ? 1.0f / lv : 0.0f;
      for (int i = 0; i < d; ++i) acc[i] *= inv;
      if (rows[r].lse)
        rows[r].lse[kv_head * group + g] = lv > 0 ? m[r * group + g] + std::log(lv) : -std::numeric_limits<float>::infinity();
    }
}

struct Tile {
  int32_t seq;
  int64_t row_begin, n_rows;
};

}  // namespace

namespace {

template <DType D>
inline void StoreAs(KvElem<D>* dst, float x) {
  if constexpr (D == DType::kBF16) *dst = core::F32ToBf16(x);
  else if constexpr (D == DType::kF16) *dst = core::F32ToF16(x);
  else *dst = x;
}

// WriteKv's rows for kv head h: its key (one element per dim, block_tokens apart) and its
// value row (contiguous).
template <DType D>
void WriteKvHead(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const int32_t* positions, const float* k,
                 const float* v, int h) {
  const int64_t row_elems = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  const int hd = kv.head_dim, bt = kv.block_tokens;
  KvElem<D>* keys = static_cast<KvElem<D>*>(kv.k);
  KvElem<D>* values = static_cast<KvElem<D>*>(kv.v);
  for (const AttentionSeq& s : seqs)
    for (int64_t r = s.row_begin; r < s.row_begin + s.n_rows; ++r) {
      const int32_t block = s.block_table[positions[r] / bt];
      const int off = positions[r] % bt;
      const float* kr = k + r * row_elems + h * hd;
      const float* vr = v + r * row_elems + h * hd;
      KvElem<D>* kd = keys + kv.KeyIndex(block, off, h, 0);
      KvElem<D>* vd = values + kv.ValueIndex(block, off, h);
      for (int i = 0; i < hd; ++i) StoreAs<D>(kd + static_cast<int64_t>(i) * bt, kr[i]);
      for (int i = 0; i < hd; ++i) StoreAs<D>(vd + i, vr[i]);
    }
}

}  // namespace

void WriteKv(core::ThreadPool& pool, const KvLayerView& kv, std::span<const AttentionSeq> seqs,
             const int32_t* positions, const float* k, const float* v) {
  int64_t n_rows = 0;
  for (const AttentionSeq& s : seqs)
    for (int64_t r = s.row_begin; r < s.row_begin + s.n_rows; ++r, ++n_rows) {
      const int32_t pos = positions[r];
      RADIXLM_CHECK(pos >= 0 && static_cast<size_t>(pos / kv.block_tokens) < s.block_table.size());
    }
  // Heads write disjoint parts of the store; rows within a head go in order (a position
  // written twice keeps the later row, as on one thread).
  auto heads = [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      switch (kv.dtype) {
        case DType::kBF16: WriteKvHead<DType::kBF16>(kv, seqs, positions, k, v, static_cast<int>(h)); break;
        case DType::kF16: WriteKvHead<DType::kF16>(kv, seqs, positions, k, v, static_cast<int>(h)); break;
        default: WriteKvHead<DType::kF32>(kv, seqs, positions, k, v, static_cast<int>(h)); break;
      }
    }
  };
  // A decode step's few rows on this thread: a parallel region costs more than their work.
  if (n_rows <= 16) heads(0, kv.n_kv_heads);
  else pool.ParallelFor(kv.n_kv_heads, [&](int, int64_t h0, int64_t h1) { heads(h0, h1); });
}

void PagedAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                    std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                    float* out, float* lse) {
  RADIXLM_CHECK(p.n_heads % p.n_kv_heads == 0 && p.n_heads / p.n_kv_heads <= kMaxGroup);
  RADIXLM_CHECK(kv.block_tokens <= kMaxBlock);
  const int tile_rows = attn::TileRows(p.n_heads / p.n_kv_heads);
  std::vector<Tile> tiles;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const AttentionSeq& sq = seqs[si];
    RADIXLM_CHECK(sq.kv_begin >= 0 && sq.kv_begin % kv.block_tokens == 0);
    for (int64_t r = sq.row_begin; r < sq.row_begin + sq.n_rows; ++r)
      RADIXLM_CHECK(positions[r] >= 0 && static_cast<size_t>(positions[r] / kv.block_tokens) < sq.block_table.size());
    for (int64_t r = sq.row_begin; r < sq.row_begin + sq.n_rows; r += tile_rows)
      tiles.push_back({static_cast<int32_t>(si), r, std::min<int64_t>(tile_rows, sq.row_begin + sq.n_rows - r)});
  }
  const int64_t n_items = static_cast<int64_t>(tiles.size()) * p.n_kv_heads;
  const bool simd = core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2) || core::AtLeast(core::ActiveIsa(), core::Isa::kNeon);
  [[maybe_unused]] const bool avx512 = core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512bw && p.head_dim <= 256;
  const int64_t stride = static_cast<int64_t>(p.n_heads) * p.head_dim;
  // One item per chunk: causal tiles grow in cost with position, and threads that come free
  // take the items left, so none is left with the expensive end of every prompt.
  pool.ParallelFor(n_items, [&](int, int64_t item_begin, int64_t item_end) {
    TileRow rows[kTileVectors];
    for (int64_t i = item_begin; i < item_end; ++i) {
      const Tile& tile = tiles[i / p.n_kv_heads];
      const int kv_head = static_cast<int>(i % p.n_kv_heads);
      for (int64_t k = 0; k < tile.n_rows; ++k) {
        const int64_t r = tile.row_begin + k;
        const int64_t begin = seqs[tile.seq].kv_begin;
        const int64_t first = p.window > 0 ? std::max<int64_t>(begin, positions[r] - p.window + 1) : begin;
        rows[k] = {positions[r], q + r * stride, out + r * stride, lse ? lse + r * p.n_heads : nullptr, first};
      }
#if RADIXLM_X86
      if (avx512) {
        attn::AttendTileAvx512(p, kv, seqs[tile.seq], kv_head, rows, static_cast<int>(tile.n_rows));
        continue;
      }
#endif
      switch (kv.dtype) {
        case DType::kBF16: AttendTile<DType::kBF16>(p, kv, seqs[tile.seq], kv_head, rows, static_cast<int>(tile.n_rows), simd); break;
        case DType::kF16: AttendTile<DType::kF16>(p, kv, seqs[tile.seq], kv_head, rows, static_cast<int>(tile.n_rows), simd); break;
        default: AttendTile<DType::kF32>(p, kv, seqs[tile.seq], kv_head, rows, static_cast<int>(tile.n_rows), simd); break;
      }
    }
  }, n_items);
}

void MergeAttentionStates(int64_t n_rows, int n_heads, int head_dim, float* out, float* lse, const float* out_b,
                          const float* lse_b) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      float& la = lse[r * n_heads + h];
      const float lb = lse_b[r * n_heads + h];
      float* o = out + (r * n_heads + h) * head_dim;
      const float* ob = out_b + (r * n_heads + h) * head_dim;
      if (lb == -std::numeric_limits<float>::infinity()) continue;  // b attended nothing
      if (la == -std::numeric_limits<float>::infinity()) {
        std::memcpy(o, ob, head_dim * sizeof(float));
        la = lb;
        continue;
      }
      // softmax over the union: weights exp(l - max) of each part's normalised output.
      const float mx = std::max(la, lb);
      const float wa = std::exp(la - mx), wb = std::exp(lb - mx);
      const float inv = 1.0f / (wa + wb);
      for (int i = 0; i < head_dim; ++i) o[i] = (o[i] * wa + ob[i] * wb) * inv;
      la = mx + std::log(wa + wb);
    }
}

int CascadeTileRows(int group_heads) { return attn::TileRows(group_heads); }

int64_t AttentionSplitTokens(int block_tokens) { return (1024 + block_tokens - 1) / block_tokens * block_tokens; }

std::vector<CascadeGroup> PlanCascadeGroups(std::span<const AttentionSeq> seqs, const int32_t* positions,
                                            int block_tokens, int64_t split_tokens, int min_seqs) {
  std::vector<CascadeGroup> groups;
  const int64_t cb = split_tokens / block_tokens;  // blocks per chunk
  // Whole chunks below a sequence's first row that its table covers.
  auto chunks_of = [&](const AttentionSeq& s) {
    if (s.n_rows == 0) return int64_t{0};
    return std::min<int64_t>((positions[s.row_begin] + 1) / split_tokens,
                             static_cast<int64_t>(s.block_table.size()) / cb);
  };
  std::vector<const AttentionSeq*> live;  // candidates for the current chunk
  for (const AttentionSeq& s : seqs)
    if (chunks_of(s) > 0) live.push_back(&s);
  // open[i]: the group live[i] extended at the previous chunk (-1: none).
  std::vector<int64_t> open(live.size(), -1);
  for (int64_t c = 0; live.size() >= static_cast<size_t>(std::max(min_seqs, 1)); ++c) {
    std::vector<size_t> order;
    for (size_t i = 0; i < live.size(); ++i)
      if (chunks_of(*live[i]) > c) order.push_back(i);
    auto chunk = [&](size_t i) { return live[i]->block_table.subspan(static_cast<size_t>(c * cb), static_cast<size_t>(cb)); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto x = chunk(a), y = chunk(b);
      return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
    });
    std::vector<const AttentionSeq*> next_live;
    std::vector<int64_t> next_open;
    for (size_t i = 0; i < order.size();) {
      size_t j = i + 1;
      while (j < order.size() && std::ranges::equal(chunk(order[j]), chunk(order[i]))) ++j;
      if (static_cast<int>(j - i) >= min_seqs) {
        // Extend the previous chunk's group when it is exactly these sequences; else a new level.
        const int64_t prev = open[order[i]];
        bool same = prev >= 0;
        size_t prev_seqs = 0;
        if (same) {
          for (size_t k = i; k < j; ++k) same = same && open[order[k]] == prev;
          for (int64_t o : open) prev_seqs += o == prev;
          same = same && prev_seqs == j - i;
        }
        int64_t g = prev;
        if (!same) {
          g = static_cast<int64_t>(groups.size());
          CascadeGroup ng;
          ng.first_chunk = c;
          for (size_t k = i; k < j; ++k)
            for (int64_t r = live[order[k]]->row_begin; r < live[order[k]]->row_begin + live[order[k]]->n_rows; ++r)
              ng.rows.push_back(r);
          groups.push_back(std::move(ng));
        }
        groups[g].prefix_blocks = live[order[i]]->block_table.first(static_cast<size_t>((c + 1) * cb));
        for (size_t k = i; k < j; ++k) {
          next_live.push_back(live[order[k]]);
          next_open.push_back(g);
        }
      }
      i = j;
    }
    live = std::move(next_live);
    open = std::move(next_open);
  }
  return groups;
}

namespace {

// CascadeAttention without sliding windows and sinks: the fold of the split chunks' states.
void SplitAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                    std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                    std::span<const CascadeGroup> groups, int64_t split_tokens, float* out, float* lse,
                    bool one_pass_per_row) {
  RADIXLM_CHECK(split_tokens > 0 && split_tokens % kv.block_tokens == 0);
  const int64_t stride = static_cast<int64_t>(p.n_heads) * p.head_dim;
  int64_t n_rows = 0;
  int32_t max_pos = -1;
  for (const AttentionSeq& sq : seqs) {
    RADIXLM_CHECK(sq.kv_begin == 0);
    n_rows = std::max(n_rows, sq.row_begin + sq.n_rows);
    for (int64_t r = sq.row_begin; r < sq.row_begin + sq.n_rows; ++r) max_pos = std::max(max_pos, positions[r]);
  }
  // One chunk and no groups (every context shorter than the split): the split is the plain
  // pass, with none of the bookkeeping below.
  if (groups.empty() && max_pos < split_tokens) return PagedAttention(pool, p, kv, seqs, positions, q, out, lse);
  std::vector<float> own_lse;
  if (lse == nullptr) {
    own_lse.resize(n_rows * p.n_heads);
    lse = own_lse.data();
  }
  // Group entries (group, row), a group's adjacent; their queries gathered once.
  std::vector<int64_t> entry_row, group_begin{0}, group_end_chunk;
  for (const CascadeGroup& g : groups) {
    const int64_t end = static_cast<int64_t>(g.prefix_blocks.size()) * kv.block_tokens / split_tokens;
    RADIXLM_CHECK(g.first_chunk >= 0);
    for (int64_t r : g.rows) {
      RADIXLM_CHECK(r >= 0 && r < n_rows && positions[r] + 1 >= end * split_tokens);
      entry_row.push_back(r);
    }
    group_begin.push_back(static_cast<int64_t>(entry_row.size()));
    group_end_chunk.push_back(end);
  }
  const int64_t ng = static_cast<int64_t>(entry_row.size());
  std::vector<float> qg(ng * stride), og(ng * stride), lg(ng * p.n_heads);
  for (int64_t i = 0; i < ng; ++i) std::memcpy(qg.data() + i * stride, q + entry_row[i] * stride, stride * sizeof(float));
  const int64_t n_chunks = max_pos < 0 ? 0 : max_pos / split_tokens + 1;
  std::vector<float> oc, lc;
  std::vector<int32_t> pc(n_rows), pgc(ng);
  std::vector<uint8_t> grouped(n_rows);
  std::vector<AttentionSeq> chunk_seqs, group_seqs;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t begin = c * split_tokens, last = begin + split_tokens - 1;
    // A group's rows attend its chunks together through the group's blocks...
    std::fill(grouped.begin(), grouped.end(), 0);
    group_seqs.clear();
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      if (c < groups[gi].first_chunk || c >= group_end_chunk[gi]) continue;
      const int64_t i = group_begin[gi], j = group_begin[gi + 1];
      if (one_pass_per_row) {
        for (int64_t k = i; k < j; ++k) group_seqs.push_back({k, 1, groups[gi].prefix_blocks, begin});
      } else if (j > i) {
        group_seqs.push_back({i, j - i, groups[gi].prefix_blocks, begin});
      }
      for (int64_t k = i; k < j; ++k) {
        pgc[k] = static_cast<int32_t>(last);
        RADIXLM_CHECK_MSG(!grouped[entry_row[k]], "a row in two cascade groups for the same chunk");
        grouped[entry_row[k]] = 1;
      }
    }
    // ... and every other row attends [begin, min(position, last)] through its own sequence.
    chunk_seqs.clear();
    for (const AttentionSeq& sq : seqs) {
      const int64_t r0 = sq.row_begin;
      if (sq.n_rows == 0 || (positions[r0 + sq.n_rows - 1] < begin && positions[r0] < begin)) continue;  // nothing here
      int64_t in_group = 0;
      for (int64_t r = r0; r < r0 + sq.n_rows; ++r) in_group += grouped[r];
      RADIXLM_CHECK_MSG(in_group == 0 || in_group == sq.n_rows, "a cascade group holds whole sequences");
      if (in_group) continue;
      AttentionSeq cs = sq;
      cs.kv_begin = begin;
      chunk_seqs.push_back(cs);
      for (int64_t r = r0; r < r0 + sq.n_rows; ++r) pc[r] = static_cast<int32_t>(std::min<int64_t>(positions[r], last));
    }
    // Chunk 0 is written in place; later chunks merge into it, in chunk order, so a row's
    // result is the same fold of the same chunk states whether its prefix was shared or not.
    float* o = out;
    float* l = lse;
    if (c > 0) {
      oc.resize(n_rows * stride);
      lc.resize(n_rows * p.n_heads);
      o = oc.data();
      l = lc.data();
    }
    if (!chunk_seqs.empty()) PagedAttention(pool, p, kv, chunk_seqs, pc.data(), q, o, l);
    if (!group_seqs.empty()) PagedAttention(pool, p, kv, group_seqs, pgc.data(), qg.data(), og.data(), lg.data());
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      if (c < groups[gi].first_chunk || c >= group_end_chunk[gi]) continue;
      for (int64_t k = group_begin[gi]; k < group_begin[gi + 1]; ++k) {
        const int64_t r = entry_row[k];
        std::memcpy(o + r * stride, og.data() + k * stride, stride * sizeof(float));
        std::memcpy(l + r * p.n_heads, lg.data() + k * p.n_heads, p.n_heads * sizeof(float));
      }
    }
    if (c == 0) continue;
    for (const AttentionSeq& sq : seqs)
      for (int64_t r = sq.row_begin; r < sq.row_begin + sq.n_rows; ++r)
        if (positions[r] >= begin)
          MergeAttentionStates(1, p.n_heads, p.head_dim, out + r * stride, lse + r * p.n_heads, o + r * stride,
                               l + r * p.n_heads);
  }
}

}  // namespace

void CascadeAttention(core::ThreadPool& pool, const AttentionParams& p, const KvLayerView& kv,
                      std::span<const AttentionSeq> seqs, const int32_t* positions, const float* q,
                      std::span<const CascadeGroup> groups, int64_t split_tokens, float* out, float* lse,
                      bool one_pass_per_row) {
  std::vector<float> own_lse;
  if (p.sinks && lse == nullptr) {
    int64_t n_rows = 0;
    for (const AttentionSeq& sq : seqs) n_rows = std::max(n_rows, sq.row_begin + sq.n_rows);
    own_lse.resize(n_rows * p.n_heads);
    lse = own_lse.data();
  }
  if (p.window > 0) {
    for (const AttentionSeq& sq : seqs) RADIXLM_CHECK(sq.kv_begin == 0);
    PagedAttention(pool, p, kv, seqs, positions, q, out, lse);
  } else {
    SplitAttention(pool, p, kv, seqs, positions, q, groups, split_tokens, out, lse, one_pass_per_row);
  }
  if (!p.sinks) return;
  const int64_t stride = static_cast<int64_t>(p.n_heads) * p.head_dim;
  for (const AttentionSeq& sq : seqs)
    ApplyAttentionSinks(p, sq.n_rows, out + sq.row_begin * stride, lse + sq.row_begin * p.n_heads);
}

void ApplyAttentionSinks(const AttentionParams& p, int64_t n_rows, float* out, float* lse) {
  if (!p.sinks) return;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int h = 0; h < p.n_heads; ++h) {
      float& l = lse[r * p.n_heads + h];
      const float s = p.sinks[h];
      const float mx = std::max(l, s);
      // l = -inf (nothing attended): out stays 0, the sink alone makes the denominator.
      const float total = mx + std::log(std::exp(l - mx) + std::exp(s - mx));
      const float w = std::exp(l - total);
      float* o = out + (r * p.n_heads + h) * p.head_dim;
      for (int i = 0; i < p.head_dim; ++i) o[i] *= w;
      l = total;
    }
}

void PagedAttentionReference(const AttentionParams& p, const KvLayerView& kv,
                             std::span<const AttentionSeq> seqs, const int32_t* positions,
                             const float* q, float* out, float* lse) {
  const int group = p.n_heads / p.n_kv_heads, d = p.head_dim;
  for (const AttentionSeq& s : seqs)
    for (int64_t r = s.row_begin; r < s.row_begin + s.n_rows; ++r)
      for (int h = 0; h < p.n_heads; ++h) {
        const int n = positions[r] + 1;
        const int begin = static_cast<int>(p.window > 0 ? std::max<int64_t>(s.kv_begin, n - p.window) : s.kv_begin);
        if (n <= begin) {  // nothing to attend
          for (int i = 0; i < d; ++i) out[(r * p.n_heads + h) * d + i] = 0;
          if (lse) lse[r * p.n_heads + h] = -std::numeric_limits<float>::infinity();
          continue;
        }
        std::vector<double> sc(n, 0.0);
        double mx = -1e300;
        for (int j = begin; j < n; ++j) {
          double dot = 0;
          for (int i = 0; i < d; ++i)
            dot += static_cast<double>(q[(r * p.n_heads + h) * d + i]) *
                   kv.KeyAt(s.block_table[j / kv.block_tokens], j % kv.block_tokens, h / group, i);
          sc[j] = dot * p.scale;
          mx = std::max(mx, sc[j]);
        }
        if (p.sinks) mx = std::max(mx, static_cast<double>(p.sinks[h]));
        double sum = p.sinks ? std::exp(p.sinks[h] - mx) : 0.0;
        for (int j = begin; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        for (int i = 0; i < d; ++i) {
          double o = 0;
          for (int j = begin; j < n; ++j)
            o += sc[j] * kv.ValueAt(s.block_table[j / kv.block_tokens], j % kv.block_tokens, h / group, i);
          out[(r * p.n_heads + h) * d + i] = static_cast<float>(o / sum);
        }
        if (lse) lse[r * p.n_heads + h] = static_cast<float>(mx + std::log(sum));
      }
}

}  // namespace radixlm::kernels
