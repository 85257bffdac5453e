// The architecture registry: one row per architecture, found by its GGUF and Hugging Face
// names, every hook filled, and each preset of a row exporting and loading back through it.
#include "models/arch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "models/loader.h"
#include "models/presets.h"

namespace radixlm::models {
namespace {

TEST(ArchRegistry, EveryRowIsFoundByItsNamesAndHasEveryHook) {
  std::set<std::string> hf_types;
  for (const std::string name : {"llama", "qwen2", "qwen3", "mamba2", "nemotron_h", "granitehybrid"}) {
    const ArchSpec* a = ArchByGguf(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->gguf_name, name);
    EXPECT_FALSE(a->hf_class.empty()) << name;
    EXPECT_TRUE(a->from_gguf && a->from_hf && a->conventions && a->hf_tensor && a->gguf_metadata && a->hf_config &&
                a->hf_layout)
        << name;
    for (const std::string& t : a->hf_model_types) {
      EXPECT_EQ(ArchByHfType(t), a) << t;
      EXPECT_TRUE(hf_types.insert(t).second) << t << " belongs to two rows";
    }
  }
  EXPECT_EQ(ArchByGguf("qwen4"), nullptr);
  EXPECT_EQ(ArchByHfType("bert"), nullptr);
  EXPECT_NE(SupportedGgufArchs().find("granitehybrid"), std::string::npos);
}

// Each random preset's row writes a GGUF and an HF folder whose configs read back as the preset's.
TEST(ArchRegistry, EveryPresetRoundTripsThroughItsRowsExporterAndReaders) {
  const auto dir = std::filesystem::temp_directory_path() / "radixlm_arch_roundtrip";
  std::filesystem::create_directories(dir);
  for (const RandomPreset& p : RandomPresets()) {
    if (p.config.ParameterCount() > 20'000'000) continue;  // the small ones: quick
    const std::string spec = "random:" + p.name;
    for (ExportFormat f : {ExportFormat::kGguf, ExportFormat::kHfFolder}) {
      const std::string out = (dir / (p.name + (f == ExportFormat::kGguf ? ".gguf" : "_hf"))).string();
      const core::Status exported = ExportModel(spec, f, out);
      if (!exported.ok() && exported.code() == core::StatusCode::kUnimplemented) {
        // llama.cpp's GGUF layout cannot say "normalise over all of d_inner" with 2 groups.
        EXPECT_EQ(p.name, "mamba2-tiny") << exported.ToString();
        continue;
      }
      ASSERT_TRUE(exported.ok()) << spec << ": " << exported.ToString();
      auto c = LoadConfig(out);
      ASSERT_TRUE(c.ok()) << spec << ": " << c.status().ToString();
      EXPECT_EQ(c->arch, p.config.arch) << spec;
      EXPECT_EQ(c->layers, p.config.layers) << spec;
      EXPECT_EQ(c->d_model, p.config.d_model) << spec;
      EXPECT_EQ(c->qk_norm, p.config.qk_norm) << spec;
      EXPECT_EQ(c->qkv_bias, p.config.qkv_bias) << spec;
      EXPECT_EQ(c->n_kv_heads, p.config.n_kv_heads) << spec;
    }
  }
}

}  // namespace
}  // namespace radixlm::models
