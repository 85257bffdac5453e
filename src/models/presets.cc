#include "models/presets.h"

namespace radixlm::models {
namespace {

ModelConfig Make(std::string arch, std::string name, int64_t vocab, int d, int blocks, int heads,
                 int kv_heads, int head_dim, int ffn, bool tied, double theta) {
  ModelConfig c;
  c.arch = std::move(arch);
  c.name = "random:" + name;
  c.vocab_size = vocab;
  c.d_model = d;
  c.n_blocks = blocks;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.ffn_dim = ffn;
  c.tied_embeddings = tied;
  c.rope_theta = theta;
  c.rms_eps = 1e-6f;
  c.qk_norm = c.arch == "qwen3";
  c.qkv_bias = c.arch == "qwen2";
  // GGUF conventions (so a preset equals its own GGUF export): llama is interleaved.
  c.rope_layout = c.arch == "llama" ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kNeox;
  c.layers = DenseLayers(blocks);
  c.max_context = 40960;
  if (c.arch == "qwen3" || c.arch == "qwen2") {
    c.bos_id = -1;        // Qwen adds no BOS
    c.eos_id = 151645;    // <|im_end|>
  } else {
    c.bos_id = 1;
    c.eos_id = 2;
  }
  return c;
}

std::vector<RandomPreset> Build() {
  std::vector<RandomPreset> p;
  p.push_back({"qwen3-0.6b", "Qwen3-0.6B shape: 28 blocks, d 1024, 16/8 heads x 128, MLP 3072, tied",
               Make("qwen3", "qwen3-0.6b", 151936, 1024, 28, 16, 8, 128, 3072, true, 1e6)});
  p.push_back({"tiny", "Qwen3 architecture, 2 blocks, d 64, 4/2 heads x 16, MLP 128, Qwen3 vocabulary, tied",
               Make("qwen3", "tiny", 151936, 64, 2, 4, 2, 16, 128, true, 1e6)});
  p.push_back({"qwen2-tiny", "Qwen2 architecture (q/k/v bias), 2 blocks, d 64, 4/2 heads x 16, tied",
               Make("qwen2", "qwen2-tiny", 151936, 64, 2, 4, 2, 16, 128, true, 1e6)});
  p.push_back({"llama2-tiny", "Llama-2 architecture, 2 blocks, d 64, 4 heads x 16 (MHA), 32000 vocab, untied",
               Make("llama", "llama2-tiny", 32000, 64, 2, 4, 4, 16, 160, false, 10000)});
  RandomPreset l3{"llama3-tiny", "Llama-3.1 architecture with RoPE scaling, 3 blocks, d 96, 6/2 heads x 16, untied",
                  Make("llama", "llama3-tiny", 128256, 96, 3, 6, 2, 16, 192, false, 500000)};
  // Scaling windows small enough that test-length positions cross every regime.
  l3.config.rope_scaling = {8.0f, 1.0f, 4.0f, 32};
  l3.config.bos_id = 128000;
  l3.config.eos_id = 128009;
  p.push_back(std::move(l3));
  return p;
}

}  // namespace

const std::vector<RandomPreset>& RandomPresets() {
  static const std::vector<RandomPreset> presets = Build();
  return presets;
}

core::StatusOr<ModelConfig> PresetConfig(const std::string& name) {
  std::string known;
  for (const auto& p : RandomPresets()) {
    if (p.name == name) return p.config;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return core::NotFound("no random preset '" + name + "' (known: " + known + ")");
}

uint64_t PresetSeed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

}  // namespace radixlm::models
