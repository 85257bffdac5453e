#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"

namespace radixlm::kernels {
namespace {

// A paged store with shuffled block ids, so block tables are not the identity, in any KV dtype.
struct Fixture {
  Fixture(int n_seqs, int block_tokens, int n_kv_heads, int head_dim, uint64_t seed,
          core::DType kv_dtype = core::DType::kF32)
      : rng(seed), dtype(kv_dtype) {
    kv_heads = n_kv_heads;
    hd = head_dim;
    bt = block_tokens;
    n_blocks = 64;
    const size_t n = size_t(n_blocks) * bt * kv_heads * hd;
    k.resize(n * core::DTypeSize(dtype));
    v.resize(k.size());
    const KvLayerView view = View();
    for (int b = 0; b < n_blocks; ++b)
      for (int o = 0; o < bt; ++o)
        for (int h = 0; h < kv_heads; ++h)
          for (int i = 0; i < hd; ++i) {
            view.SetKey(b, o, h, i, rng.Normal(0, 1));
            view.SetValue(b, o, h, i, rng.Normal(0, 1));
          }
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    for (int i = n_blocks - 1; i > 0; --i) std::swap(ids[i], ids[rng.Below(i + 1)]);
    tables.resize(n_seqs);
    for (int s = 0; s < n_seqs; ++s) tables[s].assign(ids.begin() + s * 8, ids.begin() + (s + 1) * 8);
  }
  KvLayerView View() { return {k.data(), v.data(), bt, kv_heads, hd, dtype}; }
  core::Rng rng;
  core::DType dtype;
  int kv_heads, hd, bt, n_blocks;
  std::vector<uint8_t> k, v;
  std::vector<std::vector<int32_t>> tables;
};

TEST(PagedAttentionTest, MatchesTwoPassOracleOnRaggedBatch) {
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16})
  for (int bt : {1, 16, 24, 64})
    for (auto [heads, kv_heads, hd] : std::vector<std::tuple<int, int, int>>{{4, 4, 16}, {16, 8, 128}, {6, 2, 40}}) {
      Fixture f(3, bt, kv_heads, hd, bt * 131 + heads, dtype);
      // Seq 0: prefill of 7 rows from 0; seq 1: one decode row at 40; seq 2: chunk at 9..13.
      std::vector<int32_t> pos;
      std::vector<AttentionSeq> seqs;
      auto add = [&](int s, int from, int n) {
        seqs.push_back({static_cast<int64_t>(pos.size()), n, f.tables[s]});
        for (int i = 0; i < n; ++i) pos.push_back(from + i);
      };
      add(0, 0, 7);
      add(1, std::min(40, 8 * bt - 1), 1);
      add(2, std::min(9, 8 * bt - 5), 5);
      const int n = pos.size();
      std::vector<float> q(n * heads * hd), out(q.size()), want(q.size()), lse(n * heads), want_lse(n * heads);
      for (float& x : q) x = f.rng.Normal(0, 1);
      core::ThreadPool pool(2);
      AttentionParams p{heads, kv_heads, hd, 1.0f / std::sqrt(float(hd))};
      PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), lse.data());
      PagedAttentionReference(p, f.View(), seqs, pos.data(), q.data(), want.data(), want_lse.data());
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], want[i], 1e-5) << "bt " << bt << " hd " << hd << " kv " << core::DTypeName(dtype);
      for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], want_lse[i], 1e-5);
    }
}

TEST(PagedAttentionTest, ScalarPathMatchesOracle) {
  Fixture f(1, 16, 2, 64, 9);
  std::vector<int32_t> pos(20);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<AttentionSeq> seqs{{0, 20, f.tables[0]}};
  std::vector<float> q(20 * 4 * 64), out(q.size()), want(q.size());
  for (float& x : q) x = f.rng.Normal(0, 1);
  core::ThreadPool pool(1);
  AttentionParams p{4, 2, 64, 0.125f};
  core::SetIsaCap(core::Isa::kScalar);
  PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), nullptr);
  core::SetIsaCap(core::Isa::kAvx512);
  PagedAttentionReference(p, f.View(), seqs, pos.data(), q.data(), want.data(), nullptr);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5);
}

TEST(PagedAttentionTest, RowIsBitwiseIdenticalAloneAndInBatch) {
  Fixture f(2, 16, 2, 64, 11);
  const int heads = 8, hd = 64;
  std::vector<int32_t> pos;
  for (int i = 0; i < 30; ++i) pos.push_back(i);   // seq 0 rows 0..29
  for (int i = 50; i < 53; ++i) pos.push_back(i);  // seq 1 rows 30..32
  std::vector<AttentionSeq> seqs{{0, 30, f.tables[0]}, {30, 3, f.tables[1]}};
  std::vector<float> q(pos.size() * heads * hd), out(q.size());
  for (float& x : q) x = f.rng.Normal(0, 1);
  core::ThreadPool pool(2);
  AttentionParams p{heads, 2, hd, 0.125f};
  PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), nullptr);
  for (int row : {0, 17, 29, 31}) {
    const int s = row < 30 ? 0 : 1;
    std::vector<AttentionSeq> one{{0, 1, f.tables[s]}};
    std::vector<float> alone(heads * hd);
    PagedAttention(pool, p, f.View(), one, &pos[row], q.data() + row * heads * hd, alone.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(alone.data(), out.data() + row * heads * hd, alone.size() * 4)) << "row " << row;
  }
}

TEST(PagedAttentionTest, LogSumExpMergesDisjointKvRangesExactly) {
  // softmax over [0, n) equals the lse-weighted merge of softmax over two halves: the identity
  // cascade attention relies on. The second half is attended by shifting block tables.
  Fixture f(1, 8, 1, 32, 13);
  const int n = 32, split = 16;
  std::vector<float> q(32);
  for (float& x : q) x = f.rng.Normal(0, 1);
  core::ThreadPool pool(1);
  AttentionParams p{1, 1, 32, 0.2f};
  std::vector<float> full(32), a(32), b(32);
  float lse_full, lse_a, lse_b;
  int32_t last = n - 1, last_a = split - 1, last_b = n - split - 1;
  std::vector<int32_t> tail(f.tables[0].begin() + split / 8, f.tables[0].end());
  PagedAttention(pool, p, f.View(), std::vector<AttentionSeq>{{0, 1, f.tables[0]}}, &last, q.data(), full.data(), &lse_full);
  PagedAttention(pool, p, f.View(), std::vector<AttentionSeq>{{0, 1, f.tables[0]}}, &last_a, q.data(), a.data(), &lse_a);
  PagedAttention(pool, p, f.View(), std::vector<AttentionSeq>{{0, 1, tail}}, &last_b, q.data(), b.data(), &lse_b);
  const float m = std::max(lse_a, lse_b);
  const float wa = std::exp(lse_a - m), wb = std::exp(lse_b - m);
  EXPECT_NEAR(m + std::log(wa + wb), lse_full, 1e-5);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR((wa * a[i] + wb * b[i]) / (wa + wb), full[i], 1e-5);
}

}  // namespace
}  // namespace radixlm::kernels

namespace radixlm::kernels {
namespace {

// Every ISA path (scalar, AVX2, AVX-512) against the oracle, for every KV dtype and for blocks
// read in place (16) and staged (24), prefill and decode rows.
TEST(PagedAttentionTest, EveryIsaPathMatchesOracleForEveryKvDtype) {
  for (core::DType dtype : {core::DType::kF32, core::DType::kBF16, core::DType::kF16})
    for (int bt : {16, 24}) {
      Fixture f(2, bt, 2, 64, 17, dtype);
      std::vector<int32_t> pos(20);
      std::iota(pos.begin(), pos.end(), 0);
      pos.push_back(std::min(100, 8 * bt - 1));  // a decode row of the second sequence
      std::vector<AttentionSeq> seqs{{0, 20, f.tables[0]}, {20, 1, f.tables[1]}};
      const int n = static_cast<int>(pos.size());
      std::vector<float> q(n * 4 * 64), want(q.size());
      for (float& x : q) x = f.rng.Normal(0, 1);
      core::ThreadPool pool(2);
      AttentionParams p{4, 2, 64, 0.125f};
      PagedAttentionReference(p, f.View(), seqs, pos.data(), q.data(), want.data(), nullptr);
      for (core::Isa isa : core::IsaLevels()) {
        if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
        std::vector<float> out(q.size());
        core::SetIsaCap(isa);
        PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), nullptr);
        core::SetIsaCap(core::Isa::kAvx512);
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], want[i], 1e-5) << core::IsaName(isa) << " kv " << core::DTypeName(dtype) << " bt " << bt;
      }
    }
}

// Batch invariance on every path the CPU has, every KV dtype: a row attended alone equals the
// same row inside a prefill tile, bit for bit.
TEST(PagedAttentionTest, RowIsBitwiseIdenticalAloneAndInBatchForEveryKvDtype) {
  for (core::DType dtype : {core::DType::kBF16, core::DType::kF16})
    for (int bt : {16, 24})
      for (core::Isa isa : core::IsaLevels()) {
        if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
        core::SetIsaCap(isa);
        Fixture f(1, bt, 2, 64, 19, dtype);
        const int heads = 8, hd = 64, n = 100;
        std::vector<int32_t> pos(n);
        std::iota(pos.begin(), pos.end(), 0);
        std::vector<AttentionSeq> seqs{{0, n, f.tables[0]}};
        std::vector<float> q(n * heads * hd), out(q.size());
        for (float& x : q) x = f.rng.Normal(0, 1);
        core::ThreadPool pool(2);
        AttentionParams p{heads, 2, hd, 0.125f};
        PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), nullptr);
        for (int row : {0, 15, 16, 63, 64, 99}) {
          std::vector<AttentionSeq> one{{0, 1, f.tables[0]}};
          std::vector<float> alone(heads * hd);
          PagedAttention(pool, p, f.View(), one, &pos[row], q.data() + row * heads * hd, alone.data(), nullptr);
          EXPECT_EQ(0, std::memcmp(alone.data(), out.data() + row * heads * hd, alone.size() * 4))
              << "row " << row << " " << core::IsaName(isa) << " kv " << core::DTypeName(dtype) << " bt " << bt;
        }
        core::SetIsaCap(core::Isa::kAvx512);
      }
}

// An f16 value that overflows to inf at a later position must not reach earlier rows of the
// same tile (0 x inf is NaN): a row inside a prefill tile equals the row alone.
TEST(PagedAttentionTest, AnOverflowedLaterValueDoesNotReachEarlierRows) {
  for (core::Isa isa : core::IsaLevels()) {
    if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
    core::SetIsaCap(isa);
    Fixture f(1, 16, 1, 32, 29, core::DType::kF16);
    f.View().SetValue(f.tables[0][0], 15, 0, 3, 1e6f);  // position 15: inf in f16
    std::vector<int32_t> pos = {10, 20};
    std::vector<float> q(2 * 2 * 32), out(q.size()), alone(2 * 32);
    for (float& v : q) v = f.rng.Normal(0, 1);
    core::ThreadPool pool(1);
    const AttentionParams p{2, 1, 32, 0.2f};
    PagedAttention(pool, p, f.View(), std::vector<AttentionSeq>{{0, 2, f.tables[0]}}, pos.data(), q.data(), out.data(), nullptr);
    PagedAttention(pool, p, f.View(), std::vector<AttentionSeq>{{0, 1, f.tables[0]}}, pos.data(), q.data(), alone.data(), nullptr);
    core::SetIsaCap(core::Isa::kAvx512);
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(std::isfinite(out[i])) << core::IsaName(isa) << " " << i;
    EXPECT_EQ(0, std::memcmp(alone.data(), out.data(), alone.size() * 4)) << core::IsaName(isa);
  }
}

// Sliding windows on every path the CPU has: each row attends only its last `window` keys (the
// oracle's), a row alone equals the row in its prefill tile bit for bit, and keys before a
// window never reach the result: NaN planted there (a freed, reused block's stale contents)
// changes nothing.
TEST(PagedAttentionTest, SlidingWindowMatchesOracleIsBatchInvariantAndNeverReadsOldValues) {
  for (core::DType dtype : {core::DType::kF32, core::DType::kF16})
    for (int bt : {16, 24})
      for (int window : {1, 7, 32, 70})
        for (core::Isa isa : core::IsaLevels()) {
          if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
          Fixture f(1, bt, 2, 64, 23 + window, dtype);
          const int heads = 4, hd = 64, n = 120;
          std::vector<int32_t> pos(n);
          std::iota(pos.begin(), pos.end(), 0);
          std::vector<AttentionSeq> seqs{{0, n, f.tables[0]}};
          std::vector<float> q(n * heads * hd), out(q.size()), want(q.size()), lse(n * heads), want_lse(lse.size());
          for (float& x : q) x = f.rng.Normal(0, 1);
          core::ThreadPool pool(2);
          AttentionParams p{heads, 2, hd, 0.125f};
          p.window = window;
          PagedAttentionReference(p, f.View(), seqs, pos.data(), q.data(), want.data(), want_lse.data());
          core::SetIsaCap(isa);
          PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), out.data(), lse.data());
          const std::string what = std::string(core::IsaName(isa)) + " kv " + std::string(core::DTypeName(dtype)) + " bt " +
                                   std::to_string(bt) + " window " + std::to_string(window);
          for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << what;
          for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], want_lse[i], 1e-5) << what;
          for (int row : {0, 15, 16, 63, 64, 100, 119}) {
            // The keys before this row's window poisoned: the row alone must not see them.
            Fixture g = f;
            for (int j = 0; j < row - window + 1; ++j)
              for (int h = 0; h < 2; ++h) {
                g.View().SetKey(g.tables[0][j / bt], j % bt, h, 5, std::numeric_limits<float>::quiet_NaN());
                g.View().SetValue(g.tables[0][j / bt], j % bt, h, 5, std::numeric_limits<float>::quiet_NaN());
              }
            std::vector<AttentionSeq> one{{0, 1, g.tables[0]}};
            std::vector<float> alone(heads * hd);
            PagedAttention(pool, p, g.View(), one, &pos[row], q.data() + row * heads * hd, alone.data(), nullptr);
            EXPECT_EQ(0, std::memcmp(alone.data(), out.data() + row * heads * hd, alone.size() * 4)) << what << " row " << row;
          }
          core::SetIsaCap(core::Isa::kAvx512);
        }
}

// Attention sinks (gpt-oss): CascadeAttention, split or windowed, equals the oracle that puts the
// sink's exp in the denominator; a row that attends nothing stays 0.
TEST(CascadeAttentionTest, SinksEnterTheDenominatorOnceAfterTheMerges) {
  Fixture f(1, 16, 2, 32, 31);
  const int heads = 4, hd = 32, n = 100;
  std::vector<int32_t> pos(n);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<AttentionSeq> seqs{{0, n, f.tables[0]}};
  std::vector<float> sinks = {-1.0f, 0.5f, 3.0f, 8.0f};
  std::vector<float> q(n * heads * hd), out(q.size()), want(q.size());
  for (float& x : q) x = f.rng.Normal(0, 1);
  core::ThreadPool pool(2);
  for (int window : {0, 20}) {
    AttentionParams p{heads, 2, hd, 0.2f};
    p.window = window;
    p.sinks = sinks.data();
    PagedAttentionReference(p, f.View(), seqs, pos.data(), q.data(), want.data(), nullptr);
    CascadeAttention(pool, p, f.View(), seqs, pos.data(), q.data(), {}, 32, out.data(), nullptr);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 2e-5) << "window " << window << " at " << i;
  }
  std::vector<float> o(heads * hd, 1.0f), l(heads, -std::numeric_limits<float>::infinity());
  AttentionParams p{heads, 2, hd, 0.2f};
  p.sinks = sinks.data();
  ApplyAttentionSinks(p, 1, o.data(), l.data());
  for (float x : o) EXPECT_EQ(x, 0.0f);
  EXPECT_FLOAT_EQ(l[3], 8.0f);
}

TEST(PagedAttentionTest, WriteKvRoundsToTheStoreDtype) {
  Fixture f(1, 16, 1, 4, 23, core::DType::kBF16);
  const std::vector<float> k = {1.0f + 1.0f / 256, 2, 3, 4}, v = {1.0f + 3.0f / 256, -1, 0.5f, 0};
  const int32_t pos = 5;
  core::ThreadPool pool(1);
  WriteKv(pool, f.View(), std::vector<AttentionSeq>{{0, 1, f.tables[0]}}, &pos, k.data(), v.data());
  EXPECT_EQ(f.View().KeyAt(f.tables[0][0], 5, 0, 0), 1.0f);  // ties round to even
  EXPECT_EQ(f.View().ValueAt(f.tables[0][0], 5, 0, 0), 1.0f + 4.0f / 256);
  EXPECT_EQ(f.View().KeyAt(f.tables[0][0], 5, 0, 3), 4.0f);
}

// Prefill-sized writes (the kv heads over the pool) put every element where the one-element
// accessors say, in each dtype; a position written twice keeps the later row.
TEST(PagedAttentionTest, WriteKvOfManyRowsOverThePoolMatchesTheAccessors) {
  for (core::DType dt : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    Fixture f(2, 16, 4, 32, 29, dt);
    const int rows = 60, elems = 4 * 32;
    std::vector<float> k(rows * elems), v(rows * elems);
    for (float& x : k) x = static_cast<float>(f.rng.Normal(0, 1));
    for (float& x : v) x = static_cast<float>(f.rng.Normal(0, 1));
    std::vector<int32_t> pos(rows);
    for (int r = 0; r < 30; ++r) pos[r] = pos[30 + r] = 3 + r;
    pos[29] = pos[28];  // seq 0 writes position 31 twice: row 29 wins
    core::ThreadPool pool(2);
    WriteKv(pool, f.View(), std::vector<AttentionSeq>{{0, 30, f.tables[0]}, {30, 30, f.tables[1]}}, pos.data(),
            k.data(), v.data());
    const KvLayerView view = f.View();
    auto stored = [dt](float x) {  // x rounded to the store's dtype
      if (dt == core::DType::kBF16) return core::Bf16ToF32(core::F32ToBf16(x));
      if (dt == core::DType::kF16) return core::F16ToF32(core::F32ToF16(x));
      return x;
    };
    for (int r = 0; r < rows; ++r) {
      if (r == 28) continue;
      const std::vector<int32_t>& t = f.tables[r / 30];
      const int32_t block = t[pos[r] / 16];
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < 32; ++i) {
          const int64_t e = r * elems + h * 32 + i;
          ASSERT_EQ(view.KeyAt(block, pos[r] % 16, h, i), stored(k[e])) << core::DTypeName(dt) << " row " << r;
          ASSERT_EQ(view.ValueAt(block, pos[r] % 16, h, i), stored(v[e])) << core::DTypeName(dt) << " row " << r;
        }
    }
  }
}

// Cascade attention: groups of rows share the first blocks of their sequences. On every ISA the
// CPU has, for two split sizes: with groups = without groups = the groups' chunks row by row,
// bitwise; = the unsplit attention to rounding (f32: 2e-6 absolute on unit-scale values); and a
// kv_begin range matches the oracle.
TEST(CascadeAttentionTest, GroupsChangeNothingBitwiseAndTheSplitMatchesTheUnsplitToRounding) {
  for (core::Isa isa : core::IsaLevels()) {
    core::SetIsaCap(isa);
    if (core::ActiveIsa() != isa) continue;  // this CPU lacks it
    for (core::DType dtype : {core::DType::kF32, core::DType::kBF16})
      for (int bt : {16, 24})
        for (int split_blocks : {1, 2}) {
          const int heads = 8, kv_heads = 2, hd = 64;
          Fixture f(1, bt, kv_heads, hd, 77 + bt, dtype);
          core::Rng& rng = f.rng;
          std::vector<int32_t> ids(f.n_blocks);
          std::iota(ids.begin(), ids.end(), 0);
          for (int i = f.n_blocks - 1; i > 0; --i) std::swap(ids[i], ids[rng.Below(i + 1)]);
          // Groups over prefixes of 3 and 5 blocks; inside the first, a nested group over 2 more
          // blocks (system prompt -> few-shot); a prefill chunk in the second group; rows alone
          // (one of them sharing blocks without being grouped).
          const std::vector<int32_t> prefix_a(ids.begin(), ids.begin() + 3), prefix_b(ids.begin() + 3, ids.begin() + 8);
          std::vector<int32_t> prefix_ac = prefix_a;
          prefix_ac.insert(prefix_ac.end(), ids.begin() + 8, ids.begin() + 10);
          int next = 10;
          std::vector<std::vector<int32_t>> tables;
          std::vector<AttentionSeq> seqs;
          std::vector<int32_t> pos;
          std::vector<std::vector<int>> groups_of;  // per row: the hand-built groups it is in
          auto add = [&](const std::vector<int32_t>& prefix, std::vector<int> in, int own_blocks, std::vector<int32_t> rows_pos) {
            std::vector<int32_t> t = prefix;
            for (int b = 0; b < own_blocks; ++b) t.push_back(ids[next++]);
            tables.push_back(t);
            seqs.push_back({static_cast<int64_t>(pos.size()), static_cast<int64_t>(rows_pos.size()), {}});
            for (int32_t x : rows_pos) {
              pos.push_back(x);
              groups_of.push_back(in);
            }
          };
          for (int i = 0; i < 2; ++i) add(prefix_a, {0}, 2, {3 * bt + static_cast<int32_t>(rng.Below(2 * bt))});
          for (int i = 0; i < 3; ++i) add(prefix_ac, {0, 2}, 2, {5 * bt + static_cast<int32_t>(rng.Below(2 * bt))});
          add(prefix_a, {0}, 1, {3 * bt - 1});  // the prefix's last position: nothing of its own
          for (int i = 0; i < 4; ++i) add(prefix_b, {1}, 2, {5 * bt + static_cast<int32_t>(rng.Below(2 * bt))});
          add(prefix_b, {1}, 2, {5 * bt + 1, 5 * bt + 2, 5 * bt + 3, 6 * bt + 4});  // a prefill chunk
          add({}, {}, 4, {3 * bt + 5});
          add(prefix_b, {}, 2, {6 * bt});
          add({}, {}, 5, {2 * bt - 3, 2 * bt - 2, 2 * bt - 1, 2 * bt, 2 * bt + 1, 4 * bt + 2});  // a prefill chunk
          for (size_t i = 0; i < seqs.size(); ++i) seqs[i].block_table = tables[i];
          const int n = static_cast<int>(pos.size());
          const int64_t split = static_cast<int64_t>(split_blocks) * bt;
          std::vector<CascadeGroup> groups(3), none;
          groups[0].prefix_blocks = prefix_a;
          groups[1].prefix_blocks = prefix_b;
          groups[2].prefix_blocks = prefix_ac;
          groups[2].first_chunk = 3 / split_blocks;  // where the outer group's whole chunks end
          for (int r = 0; r < n; ++r)
            for (int g : groups_of[r]) groups[g].rows.push_back(r);
          const std::vector<CascadeGroup> planned = PlanCascadeGroups(seqs, pos.data(), bt, split);
          std::vector<float> q(n * heads * hd);
          for (float& x : q) x = rng.Normal(0, 1);
          core::ThreadPool pool(2);
          const AttentionParams p{heads, kv_heads, hd, 1.0f / std::sqrt(float(hd))};
          std::vector<float> on(q.size()), off(q.size()), rows(q.size()), plain(q.size()), auto_on(q.size());
          std::vector<float> l_on(n * heads), l_off(n * heads), l_rows(n * heads), l_plain(n * heads), l_auto(n * heads);
          CascadeAttention(pool, p, f.View(), seqs, pos.data(), q.data(), groups, split, on.data(), l_on.data());
          CascadeAttention(pool, p, f.View(), seqs, pos.data(), q.data(), planned, split, auto_on.data(), l_auto.data());
          CascadeAttention(pool, p, f.View(), seqs, pos.data(), q.data(), none, split, off.data(), l_off.data());
          CascadeAttention(pool, p, f.View(), seqs, pos.data(), q.data(), groups, split, rows.data(), l_rows.data(), true);
          PagedAttention(pool, p, f.View(), seqs, pos.data(), q.data(), plain.data(), l_plain.data());
          const std::string what = std::string(core::IsaName(isa)) + " " + std::string(core::DTypeName(dtype)) +
                                   " bt " + std::to_string(bt) + " split " + std::to_string(split);
          ASSERT_EQ(std::memcmp(on.data(), off.data(), on.size() * 4), 0) << what;
          ASSERT_EQ(std::memcmp(l_on.data(), l_off.data(), l_on.size() * 4), 0) << what;
          ASSERT_EQ(std::memcmp(on.data(), rows.data(), on.size() * 4), 0) << what;
          ASSERT_EQ(std::memcmp(on.data(), auto_on.data(), on.size() * 4), 0) << what;
          ASSERT_EQ(std::memcmp(l_on.data(), l_auto.data(), l_on.size() * 4), 0) << what;
          for (size_t i = 0; i < on.size(); ++i) ASSERT_NEAR(on[i], plain[i], 2e-6) << what << " at " << i;
          for (int i = 0; i < n * heads; ++i) ASSERT_NEAR(l_on[i], l_plain[i], 2e-5) << what;
          // A kv_begin range against the oracle.
          std::vector<AttentionSeq> tail = seqs;
          for (AttentionSeq& t : tail) t.kv_begin = bt;
          std::vector<float> got(q.size()), want(q.size()), lg(n * heads), lw(n * heads);
          PagedAttention(pool, p, f.View(), tail, pos.data(), q.data(), got.data(), lg.data());
          PagedAttentionReference(p, f.View(), tail, pos.data(), q.data(), want.data(), lw.data());
          for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << what;
          for (int i = 0; i < n * heads; ++i)
            if (std::isfinite(lw[i])) ASSERT_NEAR(lg[i], lw[i], 1e-5) << what;
            else ASSERT_EQ(lg[i], lw[i]) << what;
        }
  }
  core::SetIsaCap(core::Isa::kAvx512);
}

// The planner on hand-built tables (block size 4, split 8 = two blocks a chunk): a system prompt
// of 2 chunks under four sequences, a few-shot chunk under three of them, a conversation chunk
// under two; a sequence whose position lies inside a chunk is no member for it, a sequence
// alone is no group, and a prefill chunk whose first row lies after the shared chunks is one.
TEST(CascadeAttentionTest, PlannerFindsNestedLevelsFromBlockTablesAlone) {
  const std::vector<int32_t> a = {0, 1, 2, 3, 10, 11, 20, 21, 30}, b = {0, 1, 2, 3, 10, 11, 20, 21, 31},
                             c = {0, 1, 2, 3, 10, 11, 22, 23, 32}, d = {0, 1, 2, 3, 12, 13, 33},
                             e = {40, 41, 42}, pre = {0, 1, 2, 3, 14, 15, 16};
  std::vector<AttentionSeq> seqs = {{0, 1, a}, {1, 1, b}, {2, 1, c}, {3, 1, d}, {4, 1, e}, {5, 3, pre}};
  const std::vector<int32_t> pos = {33, 32, 30, 26, 10, 20, 21, 22};
  const std::vector<CascadeGroup> g = PlanCascadeGroups(seqs, pos.data(), 4, 8);
  ASSERT_EQ(g.size(), 3u);
  // chunks 0-1 (blocks 0-3): a, b, c, d and the prefill rows 5-7.
  EXPECT_EQ(g[0].first_chunk, 0);
  EXPECT_EQ(std::vector<int32_t>(g[0].prefix_blocks.begin(), g[0].prefix_blocks.end()), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(g[0].rows, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7}));
  // chunk 2 (blocks 10, 11): a, b, c.
  EXPECT_EQ(g[1].first_chunk, 2);
  EXPECT_EQ(g[1].prefix_blocks.size(), 6u);
  EXPECT_EQ(g[1].rows, (std::vector<int64_t>{0, 1, 2}));
  // chunk 3 (blocks 20, 21): a and b; c's chunk 3 differs, and it is no group alone.
  EXPECT_EQ(g[2].first_chunk, 3);
  EXPECT_EQ(g[2].prefix_blocks.size(), 8u);
  EXPECT_EQ(g[2].rows, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(PlanCascadeGroups(seqs, pos.data(), 4, 8, 8).empty());
}

TEST(CascadeAttentionTest, MergeTreatsAnEmptyPartAsTheIdentity) {
  std::vector<float> out = {1, 2}, lse = {-std::numeric_limits<float>::infinity()};
  const std::vector<float> ob = {3, 4}, lb = {0.5f};
  MergeAttentionStates(1, 1, 2, out.data(), lse.data(), ob.data(), lb.data());
  EXPECT_EQ(out, ob);
  EXPECT_EQ(lse[0], 0.5f);
  const std::vector<float> none = {9, 9}, lnone = {-std::numeric_limits<float>::infinity()};
  MergeAttentionStates(1, 1, 2, out.data(), lse.data(), none.data(), lnone.data());
  EXPECT_EQ(out, ob);
  // Equal weights: the mean, lse + log 2.
  const std::vector<float> oc = {5, 6}, lc = {0.5f};
  MergeAttentionStates(1, 1, 2, out.data(), lse.data(), oc.data(), lc.data());
  EXPECT_FLOAT_EQ(out[0], 4);
  EXPECT_FLOAT_EQ(out[1], 5);
  EXPECT_FLOAT_EQ(lse[0], 0.5f + std::log(2.0f));
}

}  // namespace
}  // namespace radixlm::kernels
