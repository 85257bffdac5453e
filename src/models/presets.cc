#include "models/presets.h"

#include "models/arch.h"

namespace radixlm::models {
namespace {

// A preset of architecture `arch` (its registry row's conventions: q/k norm, biases, RoPE
// layout, layer pattern of a dense model). Qwen vocabularies add no BOS and end on <|im_end|>.
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
  ArchByGguf(c.arch)->conventions(&c);
  c.max_context = 40960;
  const bool qwen_vocab = vocab == 151936;
  c.bos_id = qwen_vocab ? -1 : 1;
  c.eos_id = qwen_vocab ? 151645 : 2;  // <|im_end|>, </s>
  return c;
}

// Hybrid presets: the Mamba2 mixer with d_inner = heads x head_dim.
ModelConfig MakeHybrid(std::string arch, std::string name, int64_t vocab, int d, int heads, int kv_heads, int head_dim,
                       int ffn, int ssm_heads, int ssm_head_dim, int d_state, int groups, bool tied) {
  ModelConfig c = Make(std::move(arch), std::move(name), vocab, d, 0, heads, kv_heads, head_dim, ffn, tied, 10000);
  c.layers.clear();
  c.use_rope = false;
  c.qk_norm = c.qkv_bias = false;
  c.rope_layout = kernels::RopeLayout::kNeox;
  c.ssm_heads = ssm_heads;
  c.ssm_head_dim = ssm_head_dim;
  c.ssm_state = d_state;
  c.ssm_groups = groups;
  c.ssm_conv = 4;
  c.rms_eps = 1e-5f;
  c.max_context = 1 << 20;  // no positional limit
  return c;
}

// Nemotron-H style: one sublayer per pattern character (M Mamba2, * attention, - MLP).
ModelConfig WithPattern(ModelConfig c, const std::string& pattern) {
  for (char ch : pattern)
    c.layers.push_back(ch == 'M' ? LayerKind::kMamba2 : ch == '*' ? LayerKind::kAttention : LayerKind::kMlp);
  c.n_blocks = static_cast<int>(c.layers.size());
  c.block_per_sublayer = true;
  return c;
}

// Granite-4.0-H style: each layer a mixer (m Mamba2, a attention) followed by a SwiGLU MLP.
ModelConfig WithGraniteLayers(ModelConfig c, const std::string& mixers) {
  for (char ch : mixers) {
    c.layers.push_back(ch == 'm' ? LayerKind::kMamba2 : LayerKind::kAttention);
    c.layers.push_back(LayerKind::kMlp);
  }
  c.n_blocks = static_cast<int>(mixers.size());
  return c;
}

// Qwen3.5 layout: every fourth block's mixer is gated attention, the others Gated DeltaNet.
ModelConfig Qwen35(const char* name, int64_t vocab, int d, int blocks, int heads, int kv_heads, int head_dim, int rope_dim, int ffn,
                   int gdn_k, int gdn_v, int gdn_dim) {
  ModelConfig c;
  c.arch = "qwen35";
  c.name = std::string("random:") + name;
  c.vocab_size = vocab;
  c.d_model = d;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.rope_dim = rope_dim;
  c.ffn_dim = ffn;
  c.gdn_k_heads = gdn_k;
  c.gdn_v_heads = gdn_v;
  c.gdn_head_dim = gdn_dim;
  c.ssm_conv = 4;
  c.tied_embeddings = true;
  c.rope_theta = 1e7;
  c.rms_eps = 1e-6f;
  c.max_context = 262144;
  ArchByGguf(c.arch)->conventions(&c);
  for (int i = 0; i < blocks; ++i) {
    c.layers.push_back((i + 1) % 4 == 0 ? LayerKind::kAttention : LayerKind::kDeltaNet);
    c.layers.push_back(LayerKind::kMlp);
  }
  c.n_blocks = blocks;
  c.bos_id = -1;
  c.eos_id = 151645;
  return c;
}

// A preset with a mixture of experts in place of every dense MLP (the row's conventions set the
// routing; see ModelConfig::moe).
ModelConfig WithExperts(ModelConfig c, int experts, int used, int ffn, int shared_ffn) {
  c.moe.experts = experts;
  c.moe.used = used;
  c.moe.ffn = ffn;
  c.moe.shared_ffn = shared_ffn;
  for (LayerKind& k : c.layers)
    if (k == LayerKind::kMlp) k = LayerKind::kMoe;
  c.ffn_dim = 0;
  return c;
}

// The dense presets: Qwen3 at its real 0.6B shape and tiny Qwen3, Qwen2 and Llama models.
void AddDensePresets(std::vector<RandomPreset>* p) {
  p->push_back({"qwen3-0.6b", "Qwen3-0.6B shape: 28 blocks, d 1024, 16/8 heads x 128, MLP 3072, tied",
                Make("qwen3", "qwen3-0.6b", 151936, 1024, 28, 16, 8, 128, 3072, true, 1e6)});
  p->push_back({"tiny", "Qwen3 architecture, 2 blocks, d 64, 4/2 heads x 16, MLP 128, Qwen3 vocabulary, tied",
                Make("qwen3", "tiny", 151936, 64, 2, 4, 2, 16, 128, true, 1e6)});
  p->push_back({"qwen2-tiny", "Qwen2 architecture (q/k/v bias), 2 blocks, d 64, 4/2 heads x 16, tied",
                Make("qwen2", "qwen2-tiny", 151936, 64, 2, 4, 2, 16, 128, true, 1e6)});
  p->push_back({"llama2-tiny", "Llama-2 architecture, 2 blocks, d 64, 4 heads x 16 (MHA), 32000 vocab, untied",
                Make("llama", "llama2-tiny", 32000, 64, 2, 4, 4, 16, 160, false, 10000)});
  RandomPreset l3{"llama3-tiny", "Llama-3.1 architecture with RoPE scaling, 3 blocks, d 96, 6/2 heads x 16, untied",
                  Make("llama", "llama3-tiny", 128256, 96, 3, 6, 2, 16, 192, false, 500000)};
  // Scaling windows small enough that test-length positions cross every regime.
  l3.config.rope_scaling = {8.0f, 1.0f, 4.0f, 32};
  l3.config.bos_id = 128000;
  l3.config.eos_id = 128009;
  p->push_back(std::move(l3));
}

// The mixture-of-experts presets over attention trunks (Qwen3-MoE, Qwen3.5-MoE).
void AddMoePresets(std::vector<RandomPreset>* p) {
  p->push_back({"qwen3moe-tiny", "Qwen3-MoE architecture, 2 blocks, d 64, 4/2 heads x 16, 8 experts (2 used) of MLP 32, Qwen3 vocabulary, untied",
                WithExperts(Make("qwen3moe", "qwen3moe-tiny", 151936, 64, 2, 4, 2, 16, 0, false, 1e6), 8, 2, 32, 0)});
  p->push_back({"qwen3moe-a3b-8l",
                "Qwen3-30B-A3B's layer shape, 8 of its 48 blocks: d 2048, 32/4 heads x 128, 128 experts (8 used) of MLP 768, "
                "Qwen3 vocabulary, untied (5.6B parameters, 1.1B active)",
                WithExperts(Make("qwen3moe", "qwen3moe-a3b-8l", 151936, 2048, 8, 32, 4, 128, 0, false, 1e6), 128, 8, 768, 0)});
  ModelConfig q35m = Qwen35("qwen35moe-tiny", 151936, 64, 4, 4, 2, 32, 8, 0, 2, 4, 16);
  q35m.arch = "qwen35moe";
  ArchByGguf(q35m.arch)->conventions(&q35m);
  p->push_back({"qwen35moe-tiny",
                "Qwen3.5-MoE layout: qwen35-tiny's trunk with 8 experts (2 used) of MLP 32 and a sigmoid-gated shared expert of 48 "
                "in every block",
                WithExperts(std::move(q35m), 8, 2, 32, 48)});
}

// The tiny hybrid (and pure Mamba2) presets with dense MLPs.
void AddHybridPresets(std::vector<RandomPreset>* p) {
  ModelConfig m2 = MakeHybrid("mamba2", "mamba2-tiny", 32000, 64, 0, 0, 0, 0, 4, 32, 16, 2, false);
  m2.layers.assign(3, LayerKind::kMamba2);
  m2.n_blocks = 3;
  m2.block_per_sublayer = true;
  p->push_back({"mamba2-tiny", "Mamba2, 3 layers, d 64, 4 SSM heads x 32, d_state 16, 2 groups, 32000 vocab, untied",
                std::move(m2)});
  ModelConfig nh = WithPattern(MakeHybrid("nemotron_h", "nemotron-h-tiny", 32000, 64, 4, 2, 16, 128, 4, 16, 16, 2, false),
                               "M-M*-M-");
  nh.mlp_act = ModelConfig::MlpAct::kRelu2;
  nh.ssm_norm_group = 4 * 16 / 2;  // Nemotron-H normalises per group
  p->push_back({"nemotron-h-tiny", "Nemotron-H layout M-M*-M- (Mamba2, relu^2 MLP, attention without RoPE), d 64, untied",
                std::move(nh)});
  ModelConfig gr = WithGraniteLayers(MakeHybrid("granitehybrid", "granite-h-tiny", 32000, 64, 4, 2, 16, 96, 4, 16, 16, 1, true),
                                     "mmam");
  gr.embedding_multiplier = 12.0f;
  gr.residual_multiplier = 0.22f;
  gr.attention_multiplier = 0.0078125f;
  gr.logits_scaling = 6.0f;
  p->push_back({"granite-h-tiny", "Granite-4.0-H layout (mixer + SwiGLU MLP per layer, multipliers), 4 layers, d 64, tied",
                std::move(gr)});
}

// The tiny hybrid presets with a mixture of experts (Granite-4.0-H-Tiny, Nemotron-3-Nano layouts).
void AddHybridMoePresets(std::vector<RandomPreset>* p) {
  ModelConfig grm = WithExperts(WithGraniteLayers(MakeHybrid("granitehybrid", "granite-h-moe-tiny", 151936, 64, 4, 2, 16, 0, 8, 16,
                                                             16, 1, true), "mmam"), 8, 2, 32, 48);
  grm.embedding_multiplier = 12.0f;
  grm.residual_multiplier = 0.22f;
  grm.attention_multiplier = 0.0078125f;
  grm.logits_scaling = 6.0f;
  p->push_back({"granite-h-moe-tiny",
                "Granite-4.0-H-Tiny layout: granite-h-tiny's mixers, 8 experts (2 used) of MLP 32 and a shared MLP of 48 per layer, Qwen3 vocabulary",
                std::move(grm)});
  ModelConfig nhm = WithExperts(WithPattern(MakeHybrid("nemotron_h", "nemotron-h-moe-tiny", 151936, 64, 4, 2, 16, 0, 4, 16, 16, 2,
                                                       false), "ME*EME"), 8, 2, 32, 48);
  nhm.arch = "nemotron_h_moe";
  nhm.name = "random:nemotron-h-moe-tiny";
  nhm.mlp_act = ModelConfig::MlpAct::kRelu2;
  nhm.ssm_norm_group = 4 * 16 / 2;
  ArchByGguf(nhm.arch)->conventions(&nhm);
  nhm.moe.norm_weights = true;
  nhm.moe.weights_scale = 2.5f;
  nhm.moe.groups = 2;
  nhm.moe.groups_used = 1;
  p->push_back({"nemotron-h-moe-tiny",
                "Nemotron-3-Nano layout ME*EME: sigmoid router with correction bias, 2 groups (1 used), 8 relu^2 experts (2 used) of "
                "32, scale 2.5, shared expert 48, d 64, Qwen3 vocabulary, untied",
                std::move(nhm)});
}

// The BASELINES.md hybrid and the Qwen3.5 presets.
void AddHybridBaselineAndQwen35Presets(std::vector<RandomPreset>* p) {
  // BASELINES.md's hybrid: 20 Mamba2 + 4 GQA attention layers, a SwiGLU MLP in every layer.
  ModelConfig h4 = WithGraniteLayers(MakeHybrid("granitehybrid", "hybrid-0.4b", 100352, 1024, 8, 4, 128, 2048, 32, 64, 128, 1, true),
                                     "mmmmmammmmmammmmmammmmma");
  h4.bos_id = -1;
  h4.eos_id = 100257;
  p->push_back({"hybrid-0.4b", "Granite-4.0-H layout of BASELINES.md: 24 layers (20 Mamba2 d_state 128, 4 GQA), d 1024, MLP 2048, vocab 100352, tied",
                std::move(h4)});
  p->push_back({"qwen35-tiny",
                "Qwen3.5 layout: 4 blocks (3 Gated DeltaNet, 2 key / 4 value heads x 16; 1 gated attention, 4/2 heads x 32, "
                "rotary 8 of 32), d 64, MLP 128, Qwen3 vocabulary, tied",
                Qwen35("qwen35-tiny", 151936, 64, 4, 4, 2, 32, 8, 128, 2, 4, 16)});
  p->push_back({"qwen35-0.8b",
                "Qwen3.5-0.8B shape: 24 blocks (18 Gated DeltaNet 16/16 heads x 128, 6 gated attention 8/2 heads x 256, rotary 64), "
                "d 1024, MLP 3584, Qwen3 vocabulary (151936, not its own 248320), tied",
                Qwen35("qwen35-0.8b", 151936, 1024, 24, 8, 2, 256, 64, 3584, 16, 16, 128)});
}

// Sliding-window presets: windows short enough that tests reach past them.
void AddSlidingWindowPresets(std::vector<RandomPreset>* p) {
  ModelConfig g = Make("gemma3", "gemma3-tiny", 151936, 64, 7, 4, 2, 32, 128, true, 1e6);
  for (int& w : g.layer_window) w = w > 0 ? 32 : 0;  // blocks 0-4 and 6 slide, 5 is global
  g.bos_id = -1;
  g.eos_id = 151645;
  p->push_back({"gemma3-tiny",
                "Gemma 3 layout: 7 blocks (6 sliding-window attention with a 32-token window and RoPE base 1e4, block 5 global "
                "with base 1e6), 4/2 heads x 32, q/k norms, post-norms, GeGLU 128, d 64, Qwen3 vocabulary, tied",
                std::move(g)});
}

// LFM2: short convolutions with attention at blocks 2 and 5 (LFM2-1.2B's pattern, cut short);
// the MoE keeps two leading dense blocks, as LFM2-8B-A1B does.
void AddLfm2Presets(std::vector<RandomPreset>* p) {
  auto layout = [](ModelConfig* c) {
    c->layers.clear();
    for (int b = 0; b < c->n_blocks; ++b) {
      c->layers.push_back(b % 3 == 2 ? LayerKind::kAttention : LayerKind::kShortConv);
      c->layers.push_back(LayerKind::kMlp);
    }
  };
  ModelConfig dense = Make("lfm2", "lfm2-tiny", 151936, 64, 6, 4, 2, 16, 128, true, 1e6);
  layout(&dense);
  p->push_back({"lfm2-tiny",
                "LFM2 layout: 6 blocks (gated short convolutions of 3 taps, attention at blocks 2 and 5 with q/k norms), "
                "4/2 heads x 16, SwiGLU 128, d 64, Qwen3 vocabulary, tied",
                std::move(dense)});
  ModelConfig moe = Make("lfm2moe", "lfm2moe-tiny", 151936, 64, 6, 4, 2, 16, 128, true, 1e6);
  layout(&moe);
  for (size_t i = 5; i < moe.layers.size(); i += 2) moe.layers[i] = LayerKind::kMoe;  // blocks 2-5
  moe.moe = {.experts = 8, .used = 2, .ffn = 32, .gating = MoeConfig::Gating::kSigmoid, .selection_bias = true};
  p->push_back({"lfm2moe-tiny",
                "LFM2-MoE layout: lfm2-tiny's mixers, 2 dense blocks then 8 experts (2 used, sigmoid routing with a "
                "selection bias) of SwiGLU 32, d 64, Qwen3 vocabulary, tied",
                std::move(moe)});
}

std::vector<RandomPreset> Build() {
  std::vector<RandomPreset> p;
  // The order here is the order RandomPresets() lists them in.
  AddDensePresets(&p);
  AddMoePresets(&p);
  AddHybridPresets(&p);
  AddHybridMoePresets(&p);
  AddHybridBaselineAndQwen35Presets(&p);
  AddSlidingWindowPresets(&p);
  AddLfm2Presets(&p);
  // Each preset's bundled tokenizer: the family whose vocabulary size it was given.
  static const std::pair<int64_t, const char*> kVocabularies[] = {{151936, "qwen3"}, {128256, "llama3"}, {32000, "llama2"}};
  for (RandomPreset& r : p)
    for (const auto& [vocab, family] : kVocabularies)
      if (r.config.vocab_size == vocab) r.tokenizer = family;
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

std::string PresetTokenizer(const std::string& name) {
  for (const auto& p : RandomPresets())
    if (p.name == name) return p.tokenizer;
  return "";
}

uint64_t PresetSeed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

}  // namespace radixlm::models
