// The work model of bench's ceilings (roofline.h) against figures computed by hand from the
// presets' shapes, one layer kind at a time.
#include "models/roofline.h"

#include <gtest/gtest.h>

#include "models/loader.h"

namespace radixlm::models {
namespace {

TEST(Roofline, AttentionAndMlp) {
  // random:tiny: 2 x (attention, SwiGLU MLP), d 64, 4 / 2 heads x 16, MLP 128, vocab 151936, tied.
  auto m = LoadModel("random:tiny").value();
  const PrefillFlops f = PrefillFlopsOf(m->config(), 10);
  const double attention_proj = 2.0 * (64 * (64 + 2 * 32) + 64 * 64);  // q, k, v in; o out
  const double mlp = 2.0 * 3 * 64 * 128;                              // gate, up, down
  EXPECT_DOUBLE_EQ(f.linear, 10 * 2 * (attention_proj + mlp));
  EXPECT_DOUBLE_EQ(f.lm_head, 2.0 * 64 * 151936);
  EXPECT_DOUBLE_EQ(f.attention, 4.0 * 16 * 4 * 2 * (10 * 11 / 2));  // causal: 55 (query, key) pairs
  const DecodeBytes b = DecodeBytesOf(m->weights(), m->config());
  EXPECT_EQ(b.embedding, 0);  // tied: the lm_head is the table, read whole
  EXPECT_EQ(b.read(), b.weights);
}

TEST(Roofline, Mamba2) {
  // random:mamba2-tiny: 3 Mamba2 layers, d 64, 4 heads x 32 (d_inner 128), d_state 16, 2 groups.
  auto m = LoadModel("random:mamba2-tiny").value();
  const double conv_dim = 128 + 2 * 2 * 16;                              // x, B, C
  const double per_layer = 2.0 * 64 * (128 + conv_dim + 4) + 2.0 * 128 * 64;  // in_proj (z, xBC, dt), out_proj
  const PrefillFlops f = PrefillFlopsOf(m->config(), 7);
  EXPECT_DOUBLE_EQ(f.linear, 7 * 3 * per_layer);
  EXPECT_DOUBLE_EQ(f.attention, 0);
  EXPECT_DOUBLE_EQ(f.lm_head, 2.0 * 64 * 32000);
  const CeilingShapes s = CeilingShapesOf(m->weights(), m->config(), 7);  // no MLP: the in / out projections
  ASSERT_NE(s.in, nullptr);
  EXPECT_EQ(s.in->n_out(), 128 + conv_dim + 4);
  EXPECT_EQ(s.rows, 7);
}

TEST(Roofline, GatedDeltaNetAndGatedAttention) {
  // random:qwen35-tiny: 3 x (Gated DeltaNet, MLP) + (gated attention, MLP); DeltaNet 2 key / 4
  // value heads x 16; attention 4 / 2 heads x 32 with an output gate; MLP 128.
  auto m = LoadModel("random:qwen35-tiny").value();
  const double deltanet = 2.0 * 64 * ((32 + 32 + 64) + 64 + 2 * 4) + 2.0 * 64 * 64;  // q k v | z | beta alpha; out
  const double attention = 2.0 * (64 * (2 * 128 + 2 * 64) + 128 * 64);              // q and gate, k, v; o
  const double mlp = 2.0 * 3 * 64 * 128;
  const PrefillFlops f = PrefillFlopsOf(m->config(), 5);
  EXPECT_DOUBLE_EQ(f.linear, 5 * (3 * deltanet + attention + 4 * mlp));
  EXPECT_DOUBLE_EQ(f.attention, 4.0 * 32 * 4 * 1 * 15);
}

TEST(Roofline, MixtureOfExpertsCountsTheActiveExpertsOnly) {
  // random:qwen3moe-tiny: 2 x (attention, 8 experts of MLP 32, 2 used), untied f32 embedding.
  auto m = LoadModel("random:qwen3moe-tiny").value();
  const double attention = 2.0 * (64 * (64 + 2 * 32) + 64 * 64);
  const double moe = 2.0 * 64 * (8 + 3 * (2 * 32));  // router; gate, up, down of the 2 chosen
  EXPECT_DOUBLE_EQ(PrefillFlopsOf(m->config(), 3).linear, 3 * 2 * (attention + moe));
  const DecodeBytes b = DecodeBytesOf(m->weights(), m->config());
  const int64_t experts_per_layer = 8 * 3 * 64 * 32 * 4;
  EXPECT_EQ(b.unused_experts, 2 * (experts_per_layer - experts_per_layer / 8 * 2));
  EXPECT_EQ(b.embedding, int64_t{151936} * 64 * 4);
  EXPECT_EQ(b.read(), b.weights - b.embedding - b.unused_experts);
  EXPECT_EQ(CeilingShapesOf(m->weights(), m->config(), 400).rows, 400 * 2 / 8);
}

}  // namespace
}  // namespace radixlm::models
