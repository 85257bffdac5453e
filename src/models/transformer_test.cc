#include "models/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>

#include "cache/block_pool.h"
#include "core/random.h"
#include "core/temp_dir_test.h"
#include "formats/gguf.h"
#include "models/forward_harness_test.h"
#include "models/loader.h"

namespace radixlm::models {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Transformer> Load(const std::string& spec, core::DType dt = core::DType::kF32) {
  auto m = LoadModel(spec, {dt});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<int32_t> RandomIds(int n, int64_t vocab, uint64_t seed) {
  core::Rng rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng.Below(vocab));
  return ids;
}

bool BitwiseEqual(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(TransformerTest, DecodeWithKvCacheEqualsRecomputingTheWholeSequence) {
  for (const char* spec : {"random:tiny", "random:llama3-tiny"}) {
    auto m = Load(spec);
    const int64_t V = m->config().vocab_size;
    Harness h(*m);
    const auto ids = RandomIds(40, V, 1);
    const auto t_full = h.NewSequence(40), t_inc = h.NewSequence(40);
    const auto full = h.Step({{&t_full, ids, 0, true}});  // [40, V]
    // Incremental: prefill 30, then 10 single-token decode steps.
    auto got = h.Step({{&t_inc, std::vector<int32_t>(ids.begin(), ids.begin() + 30), 0, false}});
    EXPECT_TRUE(BitwiseEqual(got.data(), full.data() + 29 * V, V)) << spec;
    for (int p = 30; p < 40; ++p) {
      got = h.Step({{&t_inc, {ids[p]}, p, false}});
      EXPECT_TRUE(BitwiseEqual(got.data(), full.data() + p * V, V)) << spec << " position " << p;
    }
  }
}

TEST(TransformerTest, SequenceLogitsAreBitwiseIdenticalAloneAndInsideABatch) {
  auto m = Load("random:tiny");
  const int64_t V = m->config().vocab_size;
  Harness h(*m);
  const auto a = RandomIds(33, V, 2), b = RandomIds(7, V, 3), c = RandomIds(20, V, 4);
  const auto ta = h.NewSequence(40), tb = h.NewSequence(40), tc = h.NewSequence(40);
  const auto tb2 = h.NewSequence(40), tc2 = h.NewSequence(40);
  const auto alone_a = h.Step({{&ta, a, 0, true}});
  // Prepare c's first 19 tokens so it can take part as a decode row.
  h.Step({{&tc, std::vector<int32_t>(c.begin(), c.end() - 1), 0, false}});
  const auto alone_c = h.Step({{&tc, {c.back()}, 19, false}});
  const auto alone_b = h.Step({{&tb, b, 0, true}});
  // The same work in one batch: b (prefill), a (prefill) and c (decode), on fresh blocks.
  h.Step({{&tc2, std::vector<int32_t>(c.begin(), c.end() - 1), 0, false}});
  const auto ta2 = h.NewSequence(40);
  const auto batch = h.Step({{&tb2, b, 0, true}, {&ta2, a, 0, true}, {&tc2, {c.back()}, 19, false}});
  EXPECT_TRUE(BitwiseEqual(batch.data(), alone_b.data(), 7 * V));
  EXPECT_TRUE(BitwiseEqual(batch.data() + 7 * V, alone_a.data(), 33 * V));
  EXPECT_TRUE(BitwiseEqual(batch.data() + 40 * V, alone_c.data(), V));
}

TEST(TransformerTest, ChunkedPrefillIsBitwiseEqualToOnePrefill) {
  auto m = Load("random:qwen2-tiny");
  const int64_t V = m->config().vocab_size;
  Harness h(*m);
  const auto ids = RandomIds(50, V, 5);
  const auto t1 = h.NewSequence(50), t2 = h.NewSequence(50);
  const auto whole = h.Step({{&t1, ids, 0, false}});
  std::vector<float> chunked;
  for (int start = 0; start < 50; start += 17)
    chunked = h.Step({{&t2, std::vector<int32_t>(ids.begin() + start, ids.begin() + std::min(50, start + 17)), start, false}});
  EXPECT_TRUE(BitwiseEqual(whole.data(), chunked.data(), V));
}

class ExportTest : public ::testing::Test {
 protected:
  std::vector<float> Logits(const std::string& spec, const std::vector<int32_t>& ids) {
    auto m = Load(spec);
    if (!m) return {};
    Harness h(*m);
    const auto t = h.NewSequence(ids.size());
    return h.Step({{&t, ids, 0, true}});
  }
  const core::TempDir tmp_{"radixlm_models"};
  const std::string dir_ = tmp_.path();
};

TEST_F(ExportTest, PresetEqualsItsGgufExportBitwiseAndItsHfExportClosely) {
  const auto ids = RandomIds(40, 128256, 6);
  const auto preset = Logits("random:llama3-tiny", ids);
  ASSERT_TRUE(ExportModel("random:llama3-tiny", ExportFormat::kGguf, dir_ + "/m.gguf").ok());
  ASSERT_TRUE(ExportModel("random:llama3-tiny", ExportFormat::kHfFolder, dir_ + "/hf").ok());
  const auto gguf = Logits(dir_ + "/m.gguf", ids);
  const auto hf = Logits(dir_ + "/hf", ids);
  ASSERT_EQ(gguf.size(), preset.size());
  EXPECT_TRUE(BitwiseEqual(gguf.data(), preset.data(), preset.size()));
  // HF Llama: NeoX RoPE on un-permuted q/k rows; same function, other summation order.
  ASSERT_EQ(hf.size(), preset.size());
  float err = 0, scale = 0;
  for (size_t i = 0; i < hf.size(); ++i) {
    err = std::max(err, std::fabs(hf[i] - preset[i]));
    scale = std::max(scale, std::fabs(preset[i]));
  }
  EXPECT_LE(err, 1e-5f * scale);
}

TEST_F(ExportTest, Bf16WeightsStayCloseToF32) {
  const auto ids = RandomIds(20, 151936, 7);
  auto f32 = Load("random:tiny", core::DType::kF32), bf16 = Load("random:tiny", core::DType::kBF16);
  EXPECT_EQ(bf16->weight_dtype(), core::DType::kBF16);
  Harness h1(*f32), h2(*bf16);
  const auto t1 = h1.NewSequence(20), t2 = h2.NewSequence(20);
  const auto a = h1.Step({{&t1, ids, 0, false}}), b = h2.Step({{&t2, ids, 0, false}});
  float err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  EXPECT_LE(err, 2e-2f * scale);  // bf16 keeps 8 mantissa bits
  EXPECT_GT(err, 0.0f);           // and really is a different storage
}

TEST_F(ExportTest, LoaderErrorsNameTheFileTensorAndProblem) {
  // A GGUF whose q projection has the wrong shape.
  auto cfg = LoadConfig("random:tiny");
  ASSERT_TRUE(cfg.ok());
  formats::GgufWriter w;
  w.Set("general.architecture", formats::GgufValue::Str("qwen3"));
  w.Set("qwen3.embedding_length", formats::GgufValue::U32(16));
  w.Set("qwen3.block_count", formats::GgufValue::U32(1));
  w.Set("qwen3.feed_forward_length", formats::GgufValue::U32(8));
  w.Set("qwen3.attention.head_count", formats::GgufValue::U32(2));
  std::vector<float> emb(16 * 16, 0.1f), q(7 * 16, 0.1f), norm(16, 1.0f);
  w.AddTensor("token_embd.weight", core::DType::kF32, {16, 16}, emb.data());
  w.AddTensor("blk.0.attn_norm.weight", core::DType::kF32, {16}, norm.data());
  w.AddTensor("blk.0.attn_q.weight", core::DType::kF32, {7, 16}, q.data());
  const std::string path = dir_ + "/bad.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  auto m = LoadModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("bad.gguf: tensor 'blk.0.attn_q.weight' has shape [7, 16], expected [16, 16]"),
            std::string::npos) << m.status().message();
  EXPECT_NE(LoadModel("random:nope").status().message().find("no random preset 'nope'"), std::string::npos);
  EXPECT_EQ(LoadModel(dir_ + "/absent.gguf").status().code(), core::StatusCode::kNotFound);
}

TEST_F(ExportTest, MalformedConfigsAreErrorsNotCrashes) {
  // Each of these divided by zero, asked for 2^64 layers, or threw out of the loader.
  const std::string llama = R"("model_type": "llama", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
                                 "num_hidden_layers": 1, "num_attention_heads": 2)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model_type": 1})", "model_type"},
      {"{" + llama + R"(, "num_attention_heads": 0})", "num_attention_heads is 0"},
      {"{" + llama + R"(, "num_hidden_layers": -1})", "num_hidden_layers is -1"},
      {"{" + llama + R"(, "hidden_size": 4294967296})", "hidden_size is 4294967296"},
      {R"({"model_type": "nemotron_h", "vocab_size": 32, "hidden_size": 16, "num_attention_heads": 0, "head_dim": 8,
           "mamba_num_heads": 2, "intermediate_size": 8, "hybrid_override_pattern": "M*"})", "num_attention_heads is 0"},
      {R"({"model_type": "granitemoehybrid", "vocab_size": 32, "hidden_size": 16, "num_attention_heads": 0,
           "mamba_n_heads": 2, "layer_types": ["mamba"]})", "num_attention_heads is 0"},
      {R"({"model_type": "mamba2", "vocab_size": 32, "hidden_size": 16, "num_heads": 2, "num_hidden_layers": -1})",
       "num_hidden_layers is -1"},
      // Mixtures of experts: more experts used than exist, none at all, a group count that
      // does not divide them, latent projections.
      {"{" + std::string(R"("model_type": "qwen3_moe", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
                             "num_hidden_layers": 1, "num_attention_heads": 2, "num_experts": 4, "num_experts_per_tok": 5,
                             "moe_intermediate_size": 8)") + "}", "num_experts_per_tok is 5"},
      {"{" + std::string(R"("model_type": "qwen3_moe", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
                             "num_hidden_layers": 1, "num_attention_heads": 2, "num_experts": 0, "num_experts_per_tok": 1,
                             "moe_intermediate_size": 8)") + "}", "expert count is 0"},
      {R"({"model_type": "nemotron_h", "vocab_size": 32, "hidden_size": 16, "num_attention_heads": 2, "head_dim": 8,
           "mamba_num_heads": 2, "hybrid_override_pattern": "ME", "n_routed_experts": 6, "num_experts_per_tok": 2,
           "moe_intermediate_size": 16, "n_group": 4, "topk_group": 1})", "expert groups must divide"},
      {R"({"model_type": "nemotron_h", "vocab_size": 32, "hidden_size": 16, "num_attention_heads": 2, "head_dim": 8,
           "mamba_num_heads": 2, "hybrid_override_pattern": "ME", "n_routed_experts": 4, "num_experts_per_tok": 2,
           "moe_intermediate_size": 16, "moe_latent_size": 8})", "latent expert projections"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string d = dir_ + "/c" + std::to_string(i);
    fs::create_directories(d);
    std::ofstream(d + "/config.json") << cases[i].first;
    auto c = LoadConfig(d);
    ASSERT_FALSE(c.ok()) << cases[i].first;
    EXPECT_NE(c.status().message().find(cases[i].second), std::string::npos) << c.status().message();
  }
  // GGUF: INT64_MIN / -1 traps; a head count below 1 is refused before any division.
  formats::GgufWriter w;
  w.Set("general.architecture", formats::GgufValue::Str("llama"));
  w.Set("llama.embedding_length", formats::GgufValue::Of(formats::GgufType::kI64, std::numeric_limits<int64_t>::min()));
  w.Set("llama.block_count", formats::GgufValue::U32(1));
  w.Set("llama.feed_forward_length", formats::GgufValue::U32(8));
  w.Set("llama.attention.head_count", formats::GgufValue::I32(-1));
  std::vector<float> emb(16 * 16, 0.1f);
  w.AddTensor("token_embd.weight", core::DType::kF32, {16, 16}, emb.data());
  ASSERT_TRUE(w.Write(dir_ + "/trap.gguf").ok());
  auto g = LoadConfig(dir_ + "/trap.gguf");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("embedding_length is -9223372036854775808"), std::string::npos) << g.status().message();
  w.Set("llama.embedding_length", formats::GgufValue::U32(16));
  w.Set("llama.attention.head_count", formats::GgufValue::U32(2));
  w.Set("general.name", formats::GgufValue::U32(7));  // not text: the path names the model (was bad_variant_access)
  ASSERT_TRUE(w.Write(dir_ + "/name.gguf").ok());
  auto named = LoadConfig(dir_ + "/name.gguf");
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->name, dir_ + "/name.gguf");
}

TEST_F(ExportTest, UntiedEmbeddingsWithoutAnOutputMatrixAreAnError) {
  ASSERT_TRUE(ExportModel("random:tiny", ExportFormat::kHfFolder, dir_ + "/hf").ok());  // tied, no lm_head
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir_ + "/hf/config.json"));
  ASSERT_EQ(cfg["tie_word_embeddings"], true);
  cfg["tie_word_embeddings"] = false;
  std::ofstream(dir_ + "/hf/config.json") << cfg.dump();
  auto m = LoadModel(dir_ + "/hf");
  ASSERT_FALSE(m.ok()) << "the input table was used as the output matrix without a word";
  EXPECT_NE(m.status().message().find("no output matrix"), std::string::npos) << m.status().message();
}

TEST(SharedDataTest, LlamaCppWrittenGgufLoadsAndRuns) {
  const char* shared = std::getenv("RADIXLM_SHARED_DATA");  // CMake's; unset: no shared data
  const std::string path = std::string(shared ? shared : "") + "/models/llama-2-tiny-random.gguf";
  if (shared == nullptr || !fs::exists(path)) GTEST_SKIP() << "shared data absent (RADIXLM_SHARED_DATA)";
  auto m = Load(path);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().arch, "llama");
  EXPECT_EQ(m->config().rope_layout, kernels::RopeLayout::kInterleaved);
  EXPECT_EQ(m->config().bos_id, 1);
  EXPECT_FALSE(m->config().tied_embeddings);
  Harness h(*m);
  const auto t = h.NewSequence(5);
  const auto logits = h.Step({{&t, {1, 450, 4996, 17354, 1701}, 0, false}});
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace radixlm::models
