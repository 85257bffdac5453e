// The GEMM driver: packing of f32 and bf16 weights, segment bookkeeping, activation
// preparation, the split of work over threads and tiles, and the double-precision oracle.
// Micro-kernels live in gemm_{scalar,avx2,avx512}.cc, quantised packing in gemm_quant.cc.
#include "kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/gemm_internal.h"

namespace radixlm::kernels {
namespace {

using core::DType;
using gemm::MicroArgs;

// Rows of activations per pass over a panel group: the group's weights stay in L2 while the
// block's rows stream through it. A fixed constant: tiling never changes a row's arithmetic.
constexpr int64_t kMBlock = 96;

int64_t PaddedK(int64_t K) { return (K + 1) / 2 * 2; }

void PackPlainRows(const void* src, DType src_dtype, int64_t rows, int64_t n_in, WeightSegment* seg,
                   core::ThreadPool* pool) {
  const bool bf16 = seg->storage == DType::kBF16;
  const int64_t kp = bf16 ? PaddedK(n_in) : n_in;
  seg->panel_bytes = kp * kPanelCols * (bf16 ? 2 : 4);
  seg->buf.Resize(static_cast<size_t>(seg->n_panels()) * seg->panel_bytes);
  const size_t src_row_bytes = core::RowBytes(src_dtype, n_in);
  auto pack = [&](int64_t p0, int64_t p1) {
    std::vector<float> tile(static_cast<size_t>(kPanelCols) * n_in);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = p * kPanelCols, take = std::min<int64_t>(kPanelCols, rows - r0);
      for (int64_t i = 0; i < take; ++i)
        core::ConvertToF32(src_dtype, static_cast<const uint8_t*>(src) + (r0 + i) * src_row_bytes,
                           tile.data() + i * n_in, n_in);
      uint8_t* out = seg->buf.data() + p * seg->panel_bytes;
      for (int64_t i = 0; i < take; ++i)
        for (int64_t k = 0; k < n_in; ++k) {
          const float v = tile[i * n_in + k];
          if (bf16) reinterpret_cast<uint16_t*>(out)[((k / 2) * kPanelCols + i) * 2 + (k & 1)] = core::F32ToBf16(v);
          else reinterpret_cast<float*>(out)[k * kPanelCols + i] = v;
        }
    }
  };
  if (pool) pool->ParallelFor(seg->n_panels(), [&](int, int64_t b, int64_t e) { pack(b, e); });
  else pack(0, seg->n_panels());
}

float PlainAt(const WeightSegment& seg, int64_t n, int64_t k) {
  const uint8_t* panel = seg.panel(n / kPanelCols);
  const int64_t c = n % kPanelCols;
  if (seg.storage == DType::kF32) return reinterpret_cast<const float*>(panel)[k * kPanelCols + c];
  return core::Bf16ToF32(reinterpret_cast<const uint16_t*>(panel)[((k / 2) * kPanelCols + c) * 2 + (k & 1)]);
}

// Thread-local activation workspaces: Gemm runs on one thread per pool at a time, and the
// warmed-up path does not allocate.
struct Workspace {
  std::vector<uint16_t> xb;
  gemm::QuantActs q;
};
Workspace& LocalWorkspace() {
  static thread_local Workspace ws;
  return ws;
}

// The arguments of `base` moved down to activation row m.
MicroArgs AtRow(const MicroArgs& base, int64_t m) {
  MicroArgs a = base;
  if (a.xf) a.xf += m * a.ldx;
  if (a.xb) a.xb += m * a.ldxb;
  if (a.xq) {
    a.xq += m * a.ldq;
    a.xd += m * (a.ldq / 32);
    if (a.corr) a.corr += m * a.ld_terms;
    if (a.dsum) a.dsum += m * a.ld_terms;
  }
  return a;
}

// Rows of the next register tile when `left` rows remain: full tiles, except that a last tile
// of at most half the rows is merged with the one before into two near-equal tiles (32 rows on
// AVX2: 6 6 6 6 4 4, not 6 6 6 6 6 2, whose 2-row tile has too few accumulators to hide the FMA
// latency). An element's arithmetic never depends on its tile (batch invariance).
int RowTile(int64_t left, int mr_max) {
  if (left <= mr_max) return static_cast<int>(left);
  const int64_t rem = left % mr_max;
  if (left < 2 * mr_max && rem > 0 && rem <= mr_max / 2) return static_cast<int>((left + 1) / 2);
  return mr_max;
}

// Runs panels [p0, p1) of `seg` for rows [m0, m1), panel p's outputs in columns col0 + 16 p of
// y. The ragged last panel of a segment whose rows are not a multiple of 16 goes through a
// 16-column tile.
void RunPanels(const WeightSegment& seg, core::Isa cap, const MicroArgs& base, int64_t m0, int64_t m1,
               int64_t p0, int64_t p1, float* y, int64_t ldy, int64_t col0) {
  const core::Isa isa = gemm::TierOf(seg, cap);
  const int64_t ragged_cols = seg.n_rows % kPanelCols;
  const int64_t full_end = (ragged_cols != 0 && p1 == seg.n_panels()) ? p1 - 1 : p1;
  auto call = [&](int64_t m, int mr, int64_t p, int np) {
    MicroArgs a = AtRow(base, m);
    a.p0 = p;
    a.mr = mr;
    a.np = np;
    a.y = y + m * ldy + col0 + p * kPanelCols;
    a.ldy = ldy;
    gemm::PickMicro(seg, isa, mr, np)(a);
  };
  auto ragged = [&](int64_t m, int mr) {
    alignas(64) float tile[16 * kPanelCols];
    MicroArgs a = AtRow(base, m);
    a.p0 = full_end;
    a.mr = mr;
    a.np = 1;
    a.y = tile;
    a.ldy = kPanelCols;
    gemm::PickMicro(seg, isa, mr, 1)(a);
    float* out = y + m * ldy + col0 + full_end * kPanelCols;
    for (int r = 0; r < mr; ++r) std::memcpy(out + r * ldy, tile + r * kPanelCols, ragged_cols * 4);
  };
  const int mr_max = gemm::MaxRows(seg, isa);
  const bool few = m1 - m0 <= 3;
  const int np_full = gemm::PanelsFor(seg, isa, few ? static_cast<int>(m1 - m0) : mr_max);
  for (int64_t mb = m0; mb < m1; mb += kMBlock) {
    const int64_t me = std::min(m1, mb + kMBlock);
    for (int64_t p = p0; p < full_end;) {
      const int np = p + np_full <= full_end ? np_full : 1;
      for (int64_t m = mb, mr = 0; m < me; m += mr) call(m, static_cast<int>(mr = RowTile(me - m, mr_max)), p, np);
      p += np;
    }
    if (full_end < p1)
      for (int64_t m = mb, mr = 0; m < me; m += mr) ragged(m, static_cast<int>(mr = RowTile(me - m, mr_max)));
  }
}

// Prepares the activation forms the segments need into the calling thread's workspace.
MicroArgs PrepareActivations(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx,
                             const PackedWeight& w) {
  Workspace& ws = LocalWorkspace();
  MicroArgs a;
  a.K = w.n_in();
  a.xf = x;
  a.ldx = ldx;
  bool need_bf16 = false, need_q = false;
  for (const WeightSegment& s : w.segments()) {
    need_bf16 |= s.storage == DType::kBF16 && s.bf16_mode == Bf16Mode::kBf16Activations;
    need_q |= core::IsQuantized(s.storage);
  }
  if (need_bf16) {
    a.ldxb = PaddedK(a.K);
    if (ws.xb.size() < static_cast<size_t>(M * a.ldxb)) ws.xb.resize(M * a.ldxb);
    pool.ParallelFor(M, [&](int, int64_t b, int64_t e) { gemm::Bf16Rows(x, ldx, a.K, b, e, ws.xb.data(), a.ldxb); });
    a.xb = ws.xb.data();
  }
  if (need_q) {
    gemm::QuantActs& q = ws.q;
    q.K = a.K;
    if (q.q.size() < static_cast<size_t>(M * a.K)) q.q.resize(M * a.K);
    if (q.d.size() < static_cast<size_t>(M * a.K / 32)) q.d.resize(M * a.K / 32);
    // One set of sub-block terms per (sub-block size, offset) among the segments.
    size_t n_terms = 0;
    for (const WeightSegment& s : w.segments()) {
      if (!core::IsQuantized(s.storage)) continue;
      const core::QuantFormat f = core::FormatOf(s.storage);
      bool seen = false;
      for (size_t i = 0; i < n_terms; ++i) seen |= q.terms[i].sub == f.sub && q.terms[i].offset == f.offset;
      if (seen) continue;
      if (q.terms.size() <= n_terms) q.terms.emplace_back();
      gemm::QuantActs::Terms& t = q.terms[n_terms++];
      t.sub = f.sub;
      t.offset = f.offset;
      if (t.corr.size() < static_cast<size_t>(M * a.K / f.sub)) {
        t.corr.resize(M * a.K / f.sub);
        t.dsum.resize(M * a.K / f.sub);
      }
    }
    for (size_t i = n_terms; i < q.terms.size(); ++i) q.terms[i].sub = 0;  // unused this call
    // A few rows (decode) are quantised on this thread: a parallel region costs more.
    if (M * a.K <= (int64_t{1} << 15)) gemm::QuantiseRows(x, ldx, 0, M, &q);
    else pool.ParallelFor(M, [&](int, int64_t b, int64_t e) { gemm::QuantiseRows(x, ldx, b, e, &q); });
    a.xq = q.q.data();
    a.xd = q.d.data();
    a.ldq = a.K;
  }
  return a;
}

}  // namespace

bool HasBf16Dot() { return core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512_bf16; }
bool HasVnni() { return core::AtLeast(core::ActiveIsa(), core::Isa::kAvx512) && core::DetectedCpu().avx512_vnni; }

PackedWeight PackedWeight::Pack(const void* w, DType src_dtype, int64_t n_out, int64_t n_in, DType storage,
                                Bf16Mode bf16_mode) {
  Options o;
  o.keep_quantised = core::IsQuantized(storage);
  o.storage = o.keep_quantised ? DType::kF32 : storage;
  o.bf16_mode = bf16_mode;
  return PackParts({{w, src_dtype, n_out}}, n_in, o);
}

PackedWeight PackedWeight::PackParts(const std::vector<Part>& parts, int64_t n_in, const Options& options,
                                     core::ThreadPool* pool) {
  RADIXLM_CHECK(options.storage == DType::kF32 || options.storage == DType::kBF16);
  RADIXLM_CHECK(options.bf16_mode == Bf16Mode::kExact || options.storage == DType::kBF16);
  PackedWeight pw;
  pw.n_in_ = n_in;
  // Consecutive parts of one storage type form one segment (their rows packed as one matrix).
  struct Run { DType storage; int64_t row_begin, rows; std::vector<size_t> parts; };
  std::vector<Run> runs;
  for (size_t i = 0; i < parts.size(); ++i) {
    const DType storage = options.keep_quantised && core::IsQuantized(parts[i].dtype) ? parts[i].dtype : options.storage;
    if (runs.empty() || runs.back().storage != storage) runs.push_back({storage, pw.n_out_, 0, {}});
    runs.back().rows += parts[i].rows;
    runs.back().parts.push_back(i);
    pw.n_out_ += parts[i].rows;
  }
  for (const Run& run : runs) {
    WeightSegment seg;
    seg.row_begin = run.row_begin;
    seg.n_rows = run.rows;
    seg.storage = run.storage;
    seg.bf16_mode = run.storage == DType::kBF16 ? options.bf16_mode : Bf16Mode::kExact;
    // A run of several parts is packed from one contiguous copy of their rows in one dtype.
    std::vector<uint8_t> joined;
    const void* src = parts[run.parts[0]].data;
    DType src_dtype = parts[run.parts[0]].dtype;
    bool same = true;
    for (size_t i : run.parts) same &= parts[i].dtype == src_dtype;
    if (run.parts.size() > 1) {
      if (!same) src_dtype = DType::kF32;
      const size_t row_bytes = core::RowBytes(src_dtype, n_in);
      joined.resize(row_bytes * run.rows);
      size_t at = 0;
      for (size_t i : run.parts) {
        const Part& part = parts[i];
        if (same) {
          std::memcpy(joined.data() + at, part.data, row_bytes * part.rows);
        } else {
          for (int64_t r = 0; r < part.rows; ++r)
            core::ConvertToF32(part.dtype, static_cast<const uint8_t*>(part.data) + r * core::RowBytes(part.dtype, n_in),
                               reinterpret_cast<float*>(joined.data() + at + r * row_bytes), n_in);
        }
        at += row_bytes * part.rows;
      }
      src = joined.data();
    }
    if (core::IsQuantized(seg.storage)) gemm::PackQuantised(src, seg.storage, seg.n_rows, n_in, &seg, pool);
    else PackPlainRows(src, src_dtype, seg.n_rows, n_in, &seg, pool);
    pw.segments_.push_back(std::move(seg));
  }
  return pw;
}

DType PackedWeight::storage() const {
  const WeightSegment* best = nullptr;
  for (const WeightSegment& s : segments_)
    if (!best || s.n_rows > best->n_rows) best = &s;
  return best ? best->storage : DType::kF32;
}

size_t PackedWeight::nbytes() const {
  size_t n = 0;
  for (const WeightSegment& s : segments_) n += s.buf.size();
  return n;
}

const WeightSegment& PackedWeight::SegmentOf(int64_t n) const {
  for (const WeightSegment& s : segments_)
    if (n < s.row_begin + s.n_rows) return s;
  RADIXLM_CHECK_MSG(false, "row out of range");
  return segments_.back();
}

float PackedWeight::At(int64_t n, int64_t k) const {
  const WeightSegment& s = SegmentOf(n);
  if (core::IsQuantized(s.storage)) {
    const core::QuantFormat f = core::FormatOf(s.storage);
    core::DecodedBlock b;
    gemm::QuantisedDecodeLane(s, n_in_, n - s.row_begin, k / f.block, &b);
    const int j = static_cast<int>(k % f.block);
    const core::SubScale ss = core::SubScaleOf(f, b, j / f.sub);
    const float v = ss.scale * static_cast<float>(static_cast<int>(b.u[j]) - f.offset);
    return ss.has_bias ? v + ss.bias : v;
  }
  return PlainAt(s, n - s.row_begin, k);
}

void PackedWeight::ReadRow(int64_t n, float* out) const {
  const WeightSegment& s = SegmentOf(n);
  if (core::IsQuantized(s.storage)) {
    gemm::QuantisedReadRow(s, n_in_, n - s.row_begin, out);
    return;
  }
  for (int64_t k = 0; k < n_in_; ++k) out[k] = PlainAt(s, n - s.row_begin, k);
}

namespace {
// base with the quantised activations' sub-block terms of seg's format.
// q: the calling thread's prepared activations (workers must not read their own workspace).
MicroArgs ArgsFor(const MicroArgs& base, const gemm::QuantActs& q, const WeightSegment& seg) {
  MicroArgs a = base;
  a.seg = &seg;
  if (core::IsQuantized(seg.storage)) {
    const core::QuantFormat f = core::FormatOf(seg.storage);
    const gemm::QuantActs::Terms& t = q.TermsFor(f.sub, f.offset);
    a.corr = t.corr.data();
    a.dsum = t.dsum.data();
    a.ld_terms = a.K / f.sub;
  }
  return a;
}
}  // namespace

void Gemm(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const PackedWeight& w, float* y,
          int64_t ldy) {
  if (M <= 0) return;
  const core::Isa isa = core::ActiveIsa();
  MicroArgs base = PrepareActivations(pool, x, M, ldx, w);
  const gemm::QuantActs& q = LocalWorkspace().q;
  // Work items: groups of 4 panels of each segment (few-row calls keep their wide
  // micro-kernels); with too few groups for the threads, rows are split instead.
  struct Item { int seg; int64_t p0, p1; };
  std::vector<Item> items;  // small: one per 4 panels
  for (size_t s = 0; s < w.segments().size(); ++s)
    for (int64_t p = 0; p < w.segments()[s].n_panels(); p += 4)
      items.push_back({static_cast<int>(s), p, std::min(w.segments()[s].n_panels(), p + 4)});
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool split_rows = n_items < 2 * pool.size() && M >= 8 * pool.size();
  if (split_rows) {
    pool.ParallelFor((M + 7) / 8, [&](int, int64_t b, int64_t e) {
      for (const WeightSegment& seg : w.segments())
        RunPanels(seg, isa, ArgsFor(base, q, seg), b * 8, std::min(M, e * 8), 0, seg.n_panels(), y, ldy, seg.row_begin);
    });
    return;
  }
  pool.ParallelFor(n_items, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // Consecutive items of one segment run as one range (wider panel calls).
      int64_t j = i;
      while (j + 1 < e && items[j + 1].seg == items[i].seg) ++j;
      const WeightSegment& seg = w.segments()[items[i].seg];
      RunPanels(seg, isa, ArgsFor(base, q, seg), 0, M, items[i].p0, items[j].p1, y, ldy, seg.row_begin);
      i = j;
    }
  });
}

void GemmGrouped(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, std::span<const GemmGroup> groups,
                 float* y, int64_t ldy) {
  if (M <= 0 || groups.empty()) return;
  const core::Isa isa = core::ActiveIsa();
  const PackedWeight& first = *groups[0].w;
  for (const GemmGroup& g : groups) {
    RADIXLM_CHECK(g.w->n_in() == first.n_in() && g.w->segments().size() == first.segments().size());
    RADIXLM_CHECK(g.row_begin >= 0 && g.n_rows >= 0 && g.row_begin + g.n_rows <= M);
    RADIXLM_CHECK(g.out_begin >= 0 && g.out_rows >= 0 && g.out_begin + g.out_rows <= g.w->n_out());
    for (size_t s = 0; s < first.segments().size(); ++s)
      RADIXLM_CHECK(g.w->segments()[s].storage == first.segments()[s].storage);
  }
  // The activation forms depend only on the segments' types, the same in every group.
  const MicroArgs base = PrepareActivations(pool, x, M, ldx, first);
  const gemm::QuantActs& q = LocalWorkspace().q;
  // Items: (group, segment, up to 4 panels of the group's slice, up to kMBlock rows), with their
  // cost in row-panels; threads take contiguous runs of items of about equal cost.
  struct Item { int32_t group, seg; int64_t p0, p1, m0, m1; };
  std::vector<Item> items;
  std::vector<int64_t> cost_end;  // prefix sums of cost
  int64_t total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& gr = groups[g];
    const int64_t r0 = gr.out_begin, r1 = gr.out_begin + gr.out_rows;
    for (int64_t m = gr.row_begin; m < gr.row_begin + gr.n_rows; m += kMBlock) {
      const int64_t me = std::min(gr.row_begin + gr.n_rows, m + kMBlock);
      for (size_t s = 0; s < gr.w->segments().size(); ++s) {
        const WeightSegment& seg = gr.w->segments()[s];
        const int64_t lo = std::max(r0, seg.row_begin) - seg.row_begin, hi = std::min(r1, seg.row_begin + seg.n_rows) - seg.row_begin;
        if (lo >= hi) continue;
        RADIXLM_CHECK_MSG(lo % kPanelCols == 0 && (hi % kPanelCols == 0 || hi == seg.n_rows),
                          "an expert slice must start and end on a panel of its segment");
        const int64_t pb = lo / kPanelCols, pe = (hi + kPanelCols - 1) / kPanelCols;
        for (int64_t p = pb; p < pe; p += 4) {
          items.push_back({static_cast<int32_t>(g), static_cast<int32_t>(s), p, std::min(pe, p + 4), m, me});
          total += (std::min(pe, p + 4) - p) * (me - m + 2);  // +2: a row's fixed cost (weights read)
          cost_end.push_back(total);
        }
      }
    }
  }
  // Parts of about equal cost, claimed by the threads as they come free.
  const int64_t parts = std::min<int64_t>(pool.size() * core::ThreadPool::kChunksPerThread, static_cast<int64_t>(items.size()));
  auto run_part = [&](int64_t t) {
    // Items whose cost interval starts in [total * t / parts, total * (t + 1) / parts).
    const int64_t lo = total * t / parts, hi = total * (t + 1) / parts;
    auto start_of = [&](int64_t c) -> int64_t {  // first item whose cost interval starts at >= c
      if (c == 0) return 0;
      return std::lower_bound(cost_end.begin(), cost_end.end(), c) - cost_end.begin() + 1;
    };
    const int64_t b = start_of(lo), e = t + 1 == parts ? static_cast<int64_t>(items.size()) : start_of(hi);
    for (int64_t i = b; i < e; ++i) {
      int64_t j = i;  // consecutive panel groups of one (group, segment, rows) run as one range
      while (j + 1 < e && items[j + 1].group == items[i].group && items[j + 1].seg == items[i].seg &&
             items[j + 1].m0 == items[i].m0 && items[j + 1].p0 == items[j].p1)
        ++j;
      const GemmGroup& gr = groups[items[i].group];
      const WeightSegment& seg = gr.w->segments()[items[i].seg];
      RunPanels(seg, isa, ArgsFor(base, q, seg), items[i].m0, items[i].m1, items[i].p0, items[j].p1, y, ldy,
                seg.row_begin - gr.out_begin);
      i = j;
    }
  };
  pool.ParallelFor(
      parts, [&](int, int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) run_part(t);
      },
      parts);
}

void GemmReference(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy) {
  std::vector<float> row(w.n_in());
  for (int64_t n = 0; n < w.n_out(); ++n) {
    w.ReadRow(n, row.data());
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t k = 0; k < w.n_in(); ++k) s += static_cast<double>(x[m * ldx + k]) * row[k];
      y[m * ldy + n] = static_cast<float>(s);
    }
  }
}

namespace gemm {

const QuantActs::Terms& QuantActs::TermsFor(int sub, int offset) const {
  for (const Terms& t : terms)
    if (t.sub == sub && t.offset == offset) return t;
  RADIXLM_CHECK_MSG(false, "activation terms not prepared");
  return terms[0];
}

core::Isa TierOf(const WeightSegment& seg, core::Isa isa) {
  const core::CpuFeatures& cpu = core::DetectedCpu();
  if (core::IsQuantized(seg.storage)) {
    if (core::AtLeast(isa, core::Isa::kAvx512) && cpu.avx512bw && cpu.avx512_vnni) return core::Isa::kAvx512;
    if (core::AtLeast(isa, core::Isa::kAvx2)) return core::Isa::kAvx2;
    if (core::AtLeast(isa, core::Isa::kI8mm)) return core::Isa::kI8mm;
    return core::AtLeast(isa, core::Isa::kDotprod) ? core::Isa::kDotprod : core::Isa::kScalar;
  }
  // bf16 activations: vdpbf16ps's arithmetic, which ARM's bfdot / bfmmla do not reproduce
  // (they round differently), so on ARM a bf16 matrix stays in the exact mode (HasBf16Dot).
  if (seg.storage == DType::kBF16 && seg.bf16_mode == Bf16Mode::kBf16Activations)
    return core::AtLeast(isa, core::Isa::kAvx512) && cpu.avx512_bf16 ? core::Isa::kAvx512 : core::Isa::kScalar;
  // Float weights: one NEON kernel for every ARM level.
  return core::AtLeast(isa, core::Isa::kNeon) ? core::Isa::kNeon : isa;
}

int MaxRows(const WeightSegment& seg, core::Isa tier) {
  if (tier == core::Isa::kAvx512) return 8;
  if (tier == core::Isa::kAvx2 || tier == core::Isa::kNeon) return 6;
  return 4;
}

int PanelsFor(const WeightSegment& seg, core::Isa tier, int rows) {
  const bool quant = core::IsQuantized(seg.storage);
  if (tier == core::Isa::kAvx512) {
    if (quant) return rows == 1 ? 4 : rows <= 3 ? 2 : 1;
    return rows == 1 ? 8 : rows == 2 ? 4 : 3;
  }
  if (tier == core::Isa::kAvx2 || tier == core::Isa::kNeon) {
    if (quant) return rows == 1 ? 2 : 1;
    return rows == 1 ? 4 : rows == 2 ? 3 : rows == 3 ? 2 : 1;
  }
  if (tier == core::Isa::kDotprod || tier == core::Isa::kI8mm) return rows == 1 ? 2 : 1;
  return 1;
}

MicroFn PickMicro(const WeightSegment& seg, core::Isa tier, int mr, int np) {
  const bool arm = tier == core::Isa::kNeon || tier == core::Isa::kDotprod || tier == core::Isa::kI8mm;
  MicroFn fn = tier == core::Isa::kAvx512 ? Avx512Micro(seg, mr, np)
               : tier == core::Isa::kAvx2 ? Avx2Micro(seg, mr, np)
               : arm                      ? NeonMicro(seg, tier, mr, np)
                                          : ScalarMicro(seg, mr, np);
  RADIXLM_CHECK_MSG(fn != nullptr, "no GEMM micro-kernel for this shape");
  return fn;
}

}  // namespace gemm

}  // namespace radixlm::kernels
