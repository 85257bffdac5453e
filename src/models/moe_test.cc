// Mixture-of-experts models: a row's logits are bitwise the same alone and in a batch of 64
// random rows whatever the experts' weight type (the property sharing on = off rests on), and
// the parameter counts `info` reports against a published model's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "core/random.h"
#include "kernels/kernel_cases.h"
#include "models/forward_harness_test.h"
#include "models/loader.h"
#include "models/moe_route.h"
#include "models/presets.h"

namespace radixlm::models {
namespace {

using core::DType;

std::vector<float> Normal(int64_t n, float mean, float sd, uint64_t seed) {
  core::Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Normal(mean, sd);
  return v;
}

kernels::PackedWeight Dense(int64_t n_out, int64_t n_in, uint64_t seed) {
  const std::vector<float> w = Normal(n_out * n_in, 0.0f, 0.05f, seed);
  return kernels::PackedWeight::Pack(w.data(), DType::kF32, n_out, n_in, DType::kF32);
}

// Random blocks of `t` (kernel_cases.h: every byte pattern valid, small f16 scales), or N(0, 0.05).
kernels::PackedWeight Expert(DType t, int64_t n_out, int64_t n_in, uint64_t seed) {
  if (!core::IsQuantized(t)) {
    const std::vector<float> w = Normal(n_out * n_in, 0.0f, 0.05f, seed);
    return kernels::PackedWeight::Pack(w.data(), DType::kF32, n_out, n_in, t);
  }
  const std::vector<uint8_t> bytes = kernels::RandomWeightBytes(t, n_out, n_in, seed);
  return kernels::PackedWeight::Pack(bytes.data(), t, n_out, n_in, t);
}

// Two qwen3moe blocks of width 256 (K-quant blocks), 8 experts of 256 (2 used), a gated shared
// expert; experts stored as `t`, the rest f32.
std::unique_ptr<Transformer> MoeModel(DType t) {
  ModelConfig c = *PresetConfig("qwen3moe-tiny");
  c.vocab_size = 300;
  c.d_model = 256;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.moe.ffn = 256;
  c.moe.shared_ffn = 256;
  c.moe.shared_gate = true;
  c.tied_embeddings = true;
  const int64_t d = c.d_model, f = c.moe.ffn, E = c.moe.experts, hd = c.head_dim;
  TransformerWeights w;
  w.lm_head = Dense(c.vocab_size, d, 1);
  uint64_t seed = 10;
  for (int b = 0; b < c.n_blocks; ++b) {
    AttentionLayerWeights a;
    a.norm = Normal(d, 1.0f, 0.1f, ++seed);
    a.qkv = Dense((c.n_heads + 2 * c.n_kv_heads) * hd, d, ++seed);
    a.q_norm = Normal(hd, 1.0f, 0.1f, ++seed);
    a.k_norm = Normal(hd, 1.0f, 0.1f, ++seed);
    a.o = Dense(d, c.n_heads * hd, ++seed);
    a.kv_index = b;
    w.attention.push_back(std::move(a));
    MoeLayerWeights m;
    m.norm = Normal(d, 1.0f, 0.1f, ++seed);
    m.router = Dense(E, d, ++seed);
    m.gate_up = Expert(t, E * 2 * f, d, ++seed);
    m.down = Expert(t, E * d, f, ++seed);
    m.shared_gate_up = Expert(t, 2 * f, d, ++seed);
    m.shared_down = Expert(t, d, f, ++seed);
    m.shared_gate = Dense(1, d, ++seed);
    w.moe.push_back(std::move(m));
  }
  w.final_norm = Normal(d, 1.0f, 0.1f, ++seed);
  return std::make_unique<Transformer>(c, std::move(w));
}

TEST(MoeTest, ARowAloneEqualsTheSameRowInABatchOf64RowsForEveryExpertWeightType) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    auto m = MoeModel(t);
    const int64_t V = m->config().vocab_size;
    Harness h(*m);
    core::Rng rng(static_cast<uint64_t>(t) + 7);
    // A 20-token prefill and 44 one-token sequences in one step (64 rows), then each alone.
    std::vector<std::vector<int32_t>> ids(45);
    ids[0].resize(20);
    for (auto& s : ids) {
      if (s.empty()) s.resize(1);
      for (int32_t& id : s) id = static_cast<int32_t>(rng.Below(V));
    }
    std::vector<std::vector<int32_t>> batch_tables, alone_tables;
    for (size_t i = 0; i < ids.size(); ++i) {
      batch_tables.push_back(h.NewSequence(20));
      alone_tables.push_back(h.NewSequence(20));
    }
    std::vector<Harness::Piece> pieces;
    for (size_t i = 0; i < ids.size(); ++i) pieces.push_back({&batch_tables[i], ids[i], 0, true});
    const std::vector<float> batch = h.Step(pieces);
    ASSERT_EQ(batch.size(), size_t(64 * V));
    int64_t row = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<float> alone = h.Step({{&alone_tables[i], ids[i], 0, true}});
      ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + row * V, alone.size() * sizeof(float)))
          << core::DTypeName(t) << ": sequence " << i << " differs alone and in the batch";
      for (float x : alone) ASSERT_TRUE(std::isfinite(x)) << core::DTypeName(t);
      row += static_cast<int64_t>(ids[i].size());
    }
  }
}

// The routing rules on hand-made logits.
TEST(MoeTest, RouteRowFollowsEachFamilysRule) {
  RouteScratch s;
  int32_t ids[2];
  float wt[2];
  MoeConfig m;
  m.experts = 4;
  m.used = 2;
  const float logits[4] = {1.0f, 3.0f, 3.0f, 0.0f};
  // Routes the row under m as it is now (weights into wt); the chosen experts, in order.
  auto route = [&](const float* bias) {
    RouteRow(m, logits, bias, ids, wt, &s);
    return std::vector<int32_t>(ids, ids + 2);
  };
  // Softmax, top-2, renormalised: experts 1 and 2 tie (the lower id first), half each.
  EXPECT_EQ(route(nullptr), (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(wt[0], 0.5f);
  // Granite's softmax over the chosen logits gives the same weights.
  m.gating = MoeConfig::Gating::kSoftmaxChosen;
  m.norm_weights = false;
  route(nullptr);
  EXPECT_FLOAT_EQ(wt[0], 0.5f);
  EXPECT_FLOAT_EQ(wt[1], 0.5f);
  // Nemotron: sigmoid; a bias that only ranks (expert 3 chosen, weighted by its own sigmoid);
  // two groups of two, one kept: the group {2, 3} wins on its top-2 sum; scaled weights.
  m.gating = MoeConfig::Gating::kSigmoid;
  m.groups = 2;
  m.groups_used = 1;
  m.weights_scale = 2.5f;
  const float bias[4] = {0.0f, 0.0f, 0.0f, 10.0f};
  EXPECT_EQ(route(bias), (std::vector<int32_t>{3, 2}));
  EXPECT_FLOAT_EQ(wt[0], 2.5f * 0.5f);                        // sigmoid(0), unbiased
  EXPECT_FLOAT_EQ(wt[1], 2.5f / (1.0f + std::exp(-3.0f)));  // not renormalised
  m.norm_weights = true;
  route(bias);
  EXPECT_NEAR(wt[0] + wt[1], 2.5f, 1e-6f);
}

// Qwen3-30B-A3B as published (config.json: 48 layers, d 2048, 32/4 heads x 128, 128 experts of
// 768, 8 used, untied): 30.5B parameters, 3.3B activated (the model card's figures).
TEST(MoeTest, ParameterCountsMatchQwen3_30B_A3B) {
  ModelConfig c = *PresetConfig("qwen3moe-a3b-8l");
  c.n_blocks = 48;
  c.layers.clear();
  for (int b = 0; b < 48; ++b) {
    c.layers.push_back(LayerKind::kAttention);
    c.layers.push_back(LayerKind::kMoe);
  }
  EXPECT_NEAR(c.ParameterCount() / 1e9, 30.5, 0.1);
  EXPECT_NEAR(c.ActiveParameterCount() / 1e9, 3.3, 0.1);
  // FLOPs count the active experts only.
  EXPECT_NEAR(c.LinearFlopsPerToken(false) / 2, c.ActiveParameterCount() - 2.0 * c.vocab_size * c.d_model - c.d_model -
                                                     c.n_blocks * (2.0 * c.d_model + 2 * c.head_dim),
              1e6);
}

}  // namespace
}  // namespace radixlm::models
