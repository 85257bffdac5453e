// Window rings (models::WindowRings): a sliding layer's KV in a per-sequence ring is bitwise the
// paged KV's answer, a checkpoint (CopyWindow) resumes anywhere, and the ring's tokens cover
// the window before a step and its rows.
#include <gtest/gtest.h>

#include <vector>

#include "core/random.h"
#include "core/thread_pool.h"
#include "models/kv_store.h"
#include "models/loader.h"
#include "models/ssm_state.h"
#include "models/transformer.h"

namespace radixlm::models {
namespace {

constexpr int kBlock = 8, kStep = 24;

// Runs one sequence's tokens through `model` in steps of at most kStep rows, from `start` (the
// ring of `slot` holding the window before it), returning every row's logits.
std::vector<float> RunSequence(Transformer& model, core::ThreadPool& pool, KvStore& kv, SsmStateStore* states, int slot,
                       const std::vector<int32_t>& table, const std::vector<int32_t>& ids, int start,
                       std::vector<SsmCheckpoint> captures = {}) {
  std::vector<float> out;
  const int64_t vocab = model.config().vocab_size;
  for (int at = start; at < static_cast<int>(ids.size()); at += kStep) {
    const int n = std::min<int>(kStep, static_cast<int>(ids.size()) - at);
    std::vector<int32_t> tok(ids.begin() + at, ids.begin() + at + n), pos(n), rows(n);
    for (int i = 0; i < n; ++i) pos[i] = at + i, rows[i] = i;
    ForwardBatch b;
    b.token_ids = tok;
    b.positions = pos;
    b.logit_rows = rows;
    b.seqs.push_back({0, n, table});
    if (states) {
      SsmSeq s{slot, {}};
      for (const SsmCheckpoint& c : captures)
        if (c.after_rows > at && c.after_rows <= at + n) s.checkpoints.push_back({c.after_rows - at, c.slot});
      b.ssm.push_back(s);
    }
    std::vector<float> logits(n * vocab);
    model.Forward(pool, b, kv, logits.data(), states);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

TEST(WindowRings, RingsAreBitwiseThePagedKvAndACheckpointResumesAnywhere) {
  auto loaded = LoadModel("random:gemma3-tiny");
  ASSERT_TRUE(loaded.ok());
  Transformer& model = **loaded;
  const ModelConfig& c = model.config();
  const int window = c.sliding_window();
  ASSERT_GT(window, 0);
  const int ring = SsmStateStore::RingTokens(c, kBlock, kStep);
  EXPECT_EQ(ring, ((window - 1 + kStep + kBlock - 1) / kBlock + 1) * kBlock);
  core::ThreadPool pool(2);
  core::Rng rng(3);
  std::vector<int32_t> ids(4 * window + 5);
  for (int32_t& t : ids) t = static_cast<int32_t>(rng.Below(c.vocab_size));
  const int blocks = (static_cast<int>(ids.size()) + kBlock - 1) / kBlock;
  std::vector<int32_t> table(blocks);
  for (int i = 0; i < blocks; ++i) table[i] = i;

  KvStore paged(c, {blocks, kBlock, core::DType::kF16});
  const std::vector<float> want = RunSequence(model, pool, paged, nullptr, -1, table, ids, 0);

  KvStore full_layers(c, {blocks, kBlock, core::DType::kF16, /*window_rings=*/true});
  EXPECT_LT(full_layers.nbytes(), paged.nbytes());
  SsmStateStore rings(c, 3, {ring, kBlock, core::DType::kF16});
  EXPECT_EQ(rings.max_step_rows(), ring - kBlock - (window - 1));
  EXPECT_GE(rings.max_step_rows(), kStep);
  // A checkpoint inside a step, past several windows (positions wrapped round the ring).
  const int at = 3 * window + 3;
  const std::vector<float> got = RunSequence(model, pool, full_layers, &rings, 0, table, ids, 0, {{at, 1}});
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want);
  // Resume from the checkpoint in a slot that ran something else: the window is all it needs.
  rings.Copy(0, 2);
  rings.CopyWindow(1, 2, at);
  const std::vector<float> resumed = RunSequence(model, pool, full_layers, &rings, 2, table, ids, at);
  const int64_t vocab = c.vocab_size;
  EXPECT_EQ(resumed, std::vector<float>(want.begin() + at * vocab, want.end()));
  // Without its window, a slot that ran other tokens (through other blocks) answers otherwise.
  std::vector<int32_t> elsewhere(blocks);
  for (int i = 0; i < blocks; ++i) elsewhere[i] = blocks + i;
  KvStore wide(c, {2 * blocks, kBlock, core::DType::kF16, true});
  SsmStateStore other(c, 1, {ring, kBlock, core::DType::kF16});
  RunSequence(model, pool, wide, &other, 0, table, ids, 0);
  RunSequence(model, pool, wide, &other, 0, elsewhere, std::vector<int32_t>(ids.size(), 1), 0);
  const std::vector<float> stale = RunSequence(model, pool, wide, &other, 0, table, ids, at);
  EXPECT_NE(stale, std::vector<float>(want.begin() + at * vocab, want.end()));
}

TEST(WindowRings, ARingIsOnlyTheSlidingLayersAndAStepLongerThanItIsRefused) {
  auto loaded = LoadModel("random:gemma3-tiny");
  ASSERT_TRUE(loaded.ok());
  Transformer& model = **loaded;
  const ModelConfig& c = model.config();
  int sliding = 0;
  for (int w : c.layer_window) sliding += w > 0;
  const size_t per_token_layer = size_t{2} * c.n_kv_heads * c.head_dim * 2;
  EXPECT_EQ(KvStore::BytesPerBlock(c, kBlock, core::DType::kF16, true),
            (c.n_attention_layers() - sliding) * per_token_layer * kBlock);
  const WindowRings r{SsmStateStore::RingTokens(c, kBlock, kStep), kBlock, core::DType::kF16};
  EXPECT_EQ(SsmStateStore::BytesPerSlot(c, r), sliding * per_token_layer * r.ring_tokens);
  std::vector<int32_t> table(64);
  for (int i = 0; i < 64; ++i) table[i] = i;
  KvStore kv(c, {64, kBlock, core::DType::kF16, true});
  SsmStateStore rings(c, 1, r);
  core::ThreadPool pool(2);
  std::vector<int32_t> ids(rings.max_step_rows() + 1, 3);
  std::vector<int32_t> pos(ids.size()), rows = {0};
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  ForwardBatch b;
  b.token_ids = ids;
  b.positions = pos;
  b.logit_rows = rows;
  b.seqs.push_back({0, static_cast<int64_t>(ids.size()), table});
  b.ssm.push_back({0, {}});
  std::vector<float> logits(c.vocab_size);
  EXPECT_DEATH(model.Forward(pool, b, kv, logits.data(), &rings), "more rows than its window ring holds");
}

}  // namespace
}  // namespace radixlm::models
