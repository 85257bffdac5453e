#include "runner/hybrid_cache_setup.h"

#include <gtest/gtest.h>

#include "cache/cost_model.h"
#include "models/presets.h"
#include "models/ssm_state.h"

namespace radixlm::runner {
namespace {

// The cache prices a checkpoint by the bytes the state store really holds, and a prefix by the
// FLOPs the model really spends on it, for every hybrid preset (Mamba2 and Gated DeltaNet).
TEST(ShapeOfModel, CheckpointBytesAndFlopsAreTheModelsOwn) {
  int hybrids = 0;
  for (const models::RandomPreset& p : models::RandomPresets()) {
    const models::ModelConfig& c = p.config;
    if (c.n_ssm_layers() == 0) continue;
    ++hybrids;
    const cache::CostModel cost(ShapeOfModel(c, core::DType::kBF16), cache::Accounting::kCorrected);
    EXPECT_EQ(cost.CheckpointBytes(), static_cast<int64_t>(models::SsmStateStore::BytesPerSlot(c))) << p.name;
    // One token's FLOPs: the matrix products (2 x weights, lm_head aside) plus the mixers' own
    // work (state update, conv, norms, attention over one key): small next to the products at a
    // real model's width, up to a few tens of percent at the tiny presets' width of 64-128.
    const double linear = c.LinearFlopsPerToken(/*with_lm_head=*/false);
    const double priced = cache::ExactRatio(cost.PrefixFlops(1), 1);
    EXPECT_GE(priced, linear) << p.name;
    EXPECT_LT(priced, (c.d_model >= 1024 ? 1.1 : 1.5) * linear) << p.name;
  }
  EXPECT_GE(hybrids, 4);
}

// Qwen3.5-0.8B's shape: 18 Gated DeltaNet layers of 16 value heads x 128 x 128 f32 plus the conv
// window, 19.27 MiB a checkpoint, as much as 1,644 tokens of its bf16 KV (6 attention layers x 2
// KV heads x 256 x 2 x 2 bytes = 12 KiB a token).
TEST(ShapeOfModel, AQwen35CheckpointWeighsItsRealBytes) {
  const models::ModelConfig c = models::PresetConfig("qwen35-0.8b").value();
  const cache::CostModel cost(ShapeOfModel(c, core::DType::kBF16), cache::Accounting::kCorrected);
  EXPECT_EQ(cost.CheckpointBytes(), 18 * (16 * 128 * 128 + 3 * (2 * 16 * 128 + 16 * 128)) * 4);
  EXPECT_EQ(cost.KvBytes(1), 6 * 2 * 2 * 256 * 2);
  EXPECT_EQ((cost.CheckpointBytes() + cost.KvBytes(1) - 1) / cost.KvBytes(1), 1644);
}

// Window rings: auto pages the sliding layers when a pool of short contexts for many sequences
// holds less than the rings would, rings when contexts are long; the ring covers the window
// before a step and the step's rows; a checkpoint costs the ring's bytes and the KV in the tree
// is the full layers' alone; checkpoints default to what the sliding share of the pool buys.
TEST(WindowRingsFor, AutoTakesRingsForLongContextsAndPricesTheirCheckpoints) {
  const models::ModelConfig c = models::PresetConfig("gemma3-tiny").value();  // window 32
  ServingOptions o;
  o.block_tokens = 8;
  o.step_tokens = 64;
  o.max_running = 4;
  o.kv_tokens = 1024;  // 256 tokens a sequence: paging is cheaper
  EXPECT_EQ(WindowRingsFor(c, o, core::DType::kF32)->ring_tokens, 0);
  o.kv_tokens = 1 << 16;
  const models::WindowRings rings = WindowRingsFor(c, o, core::DType::kF32).value();
  EXPECT_EQ(rings.ring_tokens, (31 + 64 + 7) / 8 * 8 + 8);
  o.checkpoint_slots = 700;  // checkpoints asked for count: 710 rings outgrow 64K tokens
  EXPECT_EQ(WindowRingsFor(c, o, core::DType::kF32)->ring_tokens, 0);
  o.checkpoint_slots = -1;
  o.swa_cache = "full";
  EXPECT_EQ(WindowRingsFor(c, o, core::DType::kF32)->ring_tokens, 0);
  o.swa_cache = "window";
  o.kv_tokens = 1024;
  EXPECT_EQ(WindowRingsFor(c, o, core::DType::kF32)->ring_tokens, rings.ring_tokens);
  o.swa_cache = "sliding";
  EXPECT_FALSE(WindowRingsFor(c, o, core::DType::kF32).ok());

  const cache::CostModel cost(ShapeOfModel(c, core::DType::kF32, rings), cache::Accounting::kCorrected);
  int sliding = 0;
  for (int w : c.layer_window) sliding += w > 0;
  EXPECT_EQ(cost.CheckpointBytes(), static_cast<int64_t>(models::SsmStateStore::BytesPerSlot(c, rings)));
  EXPECT_EQ(cost.KvBytes(1), (c.n_attention_layers() - sliding) * 2 * c.n_kv_heads * c.head_dim * 4);
  // Past the window a sliding layer's attention grows linearly, a full one's quadratically.
  EXPECT_LT(cost.WindowAttentionFlops(4096), cost.AttentionFlops(4096));
  EXPECT_EQ(cost.WindowAttentionFlops(32), cost.AttentionFlops(32));

  o.swa_cache = "window";
  o.kv_tokens = 1 << 16;
  EXPECT_EQ(CheckpointSlots(c, o, rings), 256);  // the sliding share of 64K tokens buys more
  o.kv_tokens = 1024;
  EXPECT_EQ(CheckpointSlots(c, o, rings), 3 * 4 + 1);
  o.checkpoint_slots = 5;
  EXPECT_EQ(CheckpointSlots(c, o, rings), 5);
  EXPECT_EQ(CheckpointSlots(c, o, {}), 5);
  o.checkpoint_slots = -1;
  EXPECT_EQ(CheckpointSlots(c, o, {}), 32);
}

}  // namespace
}  // namespace radixlm::runner
