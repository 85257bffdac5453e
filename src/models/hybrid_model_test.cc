// Hybrid (attention + Mamba2) models end to end: decode after prefill equals the prefill of
// the longer sequence; chunked prefill equals one prefill; a checkpoint taken during prefill,
// restored into a fresh state slot, and a prefill of only the suffix reproduce the full
// prefill's logits and final state bit for bit — at chunk boundaries and strictly inside.
#include <gtest/gtest.h>

#include "formats/gguf.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "cache/block_pool.h"
#include "core/random.h"
#include "models/forward_test.h"
#include "models/loader.h"
#include "models/presets.h"
#include "models/ssm_state.h"
#include "models/transformer.h"

namespace radixlm::models {
namespace {

std::vector<int32_t> Ids(int n, int64_t vocab, uint64_t seed) {
  core::Rng rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng.Below(vocab));
  return ids;
}

class HybridHarness {
 public:
  explicit HybridHarness(const std::string& spec)
      : model_(std::move(LoadModel(spec).value())),
        kv_(model_->config(), {64, 16}),
        states_(model_->config(), 8),
        blocks_({64, 16}),
        pool_(2) {
    table_ = *blocks_.Allocate(8);  // 128 positions
  }
  const ModelConfig& config() const { return model_->config(); }
  SsmStateStore& states() { return states_; }

  // Runs ids at positions [start, start + n) on state slot `slot`; logits of every row.
  std::vector<float> Run(const std::vector<int32_t>& ids, int32_t start, int32_t slot,
                         std::vector<SsmCheckpoint> checkpoints = {}) {
    std::vector<int32_t> pos(ids.size()), rows(ids.size());
    std::iota(pos.begin(), pos.end(), start);
    std::iota(rows.begin(), rows.end(), 0);
    ForwardBatch b;
    b.token_ids = ids;
    b.positions = pos;
    b.seqs.push_back({0, static_cast<int64_t>(ids.size()), table_});
    b.logit_rows = rows;
    b.ssm.push_back({slot, std::move(checkpoints)});
    return ForwardLogits(*model_, pool_, b, kv_, &states_);
  }
  // Prefills ids from position 0 into slot `slot`, reset first; logits of every row.
  std::vector<float> Prefill(const std::vector<int32_t>& ids, int32_t slot, std::vector<SsmCheckpoint> checkpoints = {}) {
    states_.Reset(slot);
    return Run(ids, 0, slot, std::move(checkpoints));
  }
  std::vector<float> SlotCopy(int slot) {
    const size_t floats = SsmStateStore::BytesPerSlot(config()) / sizeof(float);
    return std::vector<float>(states_.Ssm(slot, 0), states_.Ssm(slot, 0) + floats);
  }

 private:
  std::unique_ptr<Transformer> model_;
  KvStore kv_;
  SsmStateStore states_;
  cache::BlockPool blocks_;
  core::ThreadPool pool_;
  std::vector<int32_t> table_;
};

double MaxRel(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(double(b[i])));
  }
  return num / den;
}

const char* kPresets[] = {"random:mamba2-tiny", "random:nemotron-h-tiny", "random:granite-h-tiny", "random:qwen35-tiny"};

// The tests every hybrid preset must pass, one case per preset: h runs the preset `spec`.
class HybridPresetTest : public ::testing::TestWithParam<const char*> {
 protected:
  const char* const spec = GetParam();
  HybridHarness h{spec};
  const int64_t V = h.config().vocab_size;
};

INSTANTIATE_TEST_SUITE_P(HybridModel, HybridPresetTest, ::testing::ValuesIn(kPresets),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = std::string(info.param).substr(std::string("random:").size());
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST_P(HybridPresetTest, DecodeAfterPrefillEqualsPrefillOfTheLongerSequence) {
  const auto ids = Ids(30, V, 1);
  const auto full = h.Prefill(ids, 0);
  std::vector<int32_t> prompt(ids.begin(), ids.begin() + 20);
  h.Prefill(prompt, 1);
  for (int t = 20; t < 30; ++t) {
    const auto step = h.Run({ids[t]}, t, 1);
    ASSERT_LT(MaxRel(step.data(), full.data() + t * V, V), 1e-5) << spec << " token " << t;
  }
}

TEST_P(HybridPresetTest, ChunkedPrefillIsBitwiseEqualToOnePrefillWhenChunksMeetTheScanGrid) {
  const auto ids = Ids(40, V, 2);
  const auto full = h.Prefill(ids, 0);
  // Engine chunks of 16 and 24 tokens: boundaries on the 8-token scan grid.
  const auto a = h.Prefill(std::vector<int32_t>(ids.begin(), ids.begin() + 16), 1);
  const auto b = h.Run(std::vector<int32_t>(ids.begin() + 16, ids.end()), 16, 1);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), full.begin())) << spec;
  EXPECT_TRUE(std::equal(b.begin(), b.end(), full.begin() + 16 * V)) << spec;
  EXPECT_EQ(h.SlotCopy(0), h.SlotCopy(1)) << spec;
}

TEST_P(HybridPresetTest, PrefillFromACheckpointPlusSuffixReproducesTheFullPrefill) {
  const auto ids = Ids(40, V, 3);
  // A checkpoint on the scan grid (16) and one strictly inside a chunk (21).
  for (auto [at, slot] : {std::pair{16, 4}, std::pair{21, 5}}) {
    const auto full = h.Prefill(ids, 0, {{at, slot}});
    h.states().Copy(slot, 6);  // restore into a working slot
    const auto rest = h.Run(std::vector<int32_t>(ids.begin() + at, ids.end()), at, 6);
    EXPECT_TRUE(std::equal(rest.begin(), rest.end(), full.begin() + at * V)) << spec << " checkpoint at " << at;
    EXPECT_EQ(h.SlotCopy(6), h.SlotCopy(0)) << spec << " final state from checkpoint at " << at;
  }
}

TEST(HybridModel, CheckpointEqualsTheStateOfAPrefillThatStopsThere) {
  HybridHarness h("random:nemotron-h-tiny");
  const auto ids = Ids(40, h.config().vocab_size, 4);
  h.Prefill(ids, 0, {{21, 4}});
  h.Prefill(std::vector<int32_t>(ids.begin(), ids.begin() + 21), 1);
  EXPECT_EQ(h.SlotCopy(4), h.SlotCopy(1));
}

// The presets written as GGUF (llama.cpp's nemotron_h / granitehybrid layout: A as -exp(A_log),
// A and D as [n_heads, 1], the gated norm as [n_groups, group]) and as Hugging Face folders
// load back to the same model.
TEST(HybridModel, GgufAndHfExportsLoadBackToTheSameModel) {
  const std::string dir = (std::filesystem::temp_directory_path() / "radixlm_hybrid_export").string();
  std::filesystem::create_directories(dir);
  for (const char* name : {"nemotron-h-tiny", "granite-h-tiny", "qwen35-tiny"}) {
    const std::string spec = std::string("random:") + name;
    const std::string gguf = dir + "/" + name + ".gguf", hf = dir + "/" + name + "_hf";
    ASSERT_TRUE(ExportModel(spec, ExportFormat::kGguf, gguf).ok()) << name;
    ASSERT_TRUE(ExportModel(spec, ExportFormat::kHfFolder, hf).ok()) << name;
    auto cfg = LoadConfig(gguf);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    EXPECT_EQ(cfg->layers, PresetConfig(name)->layers) << name;
    const auto ids = Ids(24, 32000, 9);
    std::vector<std::vector<float>> logits;
    for (const std::string& s : {spec, gguf, hf}) {
      HybridHarness h(s);
      logits.push_back(h.Prefill(ids, 0));
    }
    // The scan's chunk size is the engine's choice, not the file's (the preset uses 8, a
    // loaded file 64), so the summation order differs slightly.
    EXPECT_LT(MaxRel(logits[1].data(), logits[0].data(), logits[0].size()), 1e-5) << name << ": GGUF export";
    EXPECT_LT(MaxRel(logits[2].data(), logits[0].data(), logits[0].size()), 1e-5) << name << ": HF export";
  }
}

// Granite's positional-embedding switch, as llama.cpp reads it: an exported NoPE preset says
// rope.scaling.finetuned = false; a file without the key (or with true) uses RoPE, which
// changes the logits of the attention layers' positions.
TEST(HybridModel, GraniteGgufReadsItsRopeSwitch) {
  const std::string dir = (std::filesystem::temp_directory_path() / "radixlm_granite_rope").string();
  std::filesystem::create_directories(dir);
  const std::string nope = dir + "/nope.gguf", rope = dir + "/rope.gguf";
  ASSERT_TRUE(ExportModel("random:granite-h-tiny", ExportFormat::kGguf, nope).ok());
  // The same file with the switch turned on.
  auto file = formats::GgufFile::Open(nope);
  ASSERT_TRUE(file.ok());
  formats::GgufWriter w;
  for (const auto& [key, value] : file->metadata())
    w.Set(key, key == "granitehybrid.rope.scaling.finetuned" ? formats::GgufValue::Bool(true) : value);
  for (const auto& [name, e] : file->tensors().entries()) w.AddTensor(name, e.dtype, e.shape, e.data);
  ASSERT_TRUE(w.Write(rope).ok());
  auto off = LoadConfig(nope), on = LoadConfig(rope);
  ASSERT_TRUE(off.ok() && on.ok());
  EXPECT_FALSE(off->use_rope);
  EXPECT_TRUE(on->use_rope);
  EXPECT_EQ(on->rope_layout, kernels::RopeLayout::kInterleaved);
  const auto ids = Ids(24, 32000, 10);
  HybridHarness a(nope), b(rope);
  const std::vector<float> la = a.Prefill(ids, 0), lb = b.Prefill(ids, 0);
  // Random small weights make attention nearly uniform, so the rotation moves logits only a
  // little; but it must move them.
  EXPECT_GT(MaxRel(la.data(), lb.data(), la.size()), 1e-7) << "RoPE changes the attention layers";
}

}  // namespace
}  // namespace radixlm::models
