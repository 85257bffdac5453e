#include "models/loader.h"

#include "core/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/quant.h"
#include "core/random.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/hybrid_config.h"
#include "models/presets.h"

namespace radixlm::models {
namespace {

using core::DType;
using core::Status;
using core::StatusOr;
using formats::TensorEntry;
using nlohmann::json;
namespace fs = std::filesystem;

// Hands out tensors by GGUF name. Random sources generate into `scratch`.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool Has(const std::string& name) const = 0;
  virtual StatusOr<TensorEntry> Get(const std::string& name, const std::vector<int64_t>& shape,
                                    std::vector<float>* scratch) const = 0;
  // Hugging Face tensor layouts: Mamba2 A as A_log, conv1d as [conv_dim, 1, d_conv], Granite's
  // MLP gate and up stacked in one input_linear.
  virtual bool HfLayout() const { return false; }
};

// GGUF name -> Hugging Face name.
std::string HfName(const std::string& arch, const std::string& gguf) {
  using Rules = std::vector<std::pair<std::regex, std::string>>;
  static const Rules kLlama = {
      {std::regex(R"(^token_embd\.weight$)"), "model.embed_tokens.weight"},
      {std::regex(R"(^output_norm\.weight$)"), "model.norm.weight"},
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), "model.layers.$1.input_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_norm\.weight$)"), "model.layers.$1.post_attention_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_q\.(weight|bias)$)"), "model.layers.$1.self_attn.q_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_k\.(weight|bias)$)"), "model.layers.$1.self_attn.k_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_v\.(weight|bias)$)"), "model.layers.$1.self_attn.v_proj.$2"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "model.layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_q_norm\.weight$)"), "model.layers.$1.self_attn.q_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_k_norm\.weight$)"), "model.layers.$1.self_attn.k_norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate\.weight$)"), "model.layers.$1.mlp.gate_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_up\.weight$)"), "model.layers.$1.mlp.up_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "model.layers.$1.mlp.down_proj.weight"},
  };
  // Mamba2 and Nemotron-H: "backbone.", one mixer per layer.
  static const Rules kBackbone = {
      {std::regex(R"(^token_embd\.weight$)"), "backbone.embeddings.weight"},
      {std::regex(R"(^output_norm\.weight$)"), "backbone.norm_f.weight"},
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), "backbone.layers.$1.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_in\.weight$)"), "backbone.layers.$1.mixer.in_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_conv1d\.(weight|bias)$)"), "backbone.layers.$1.mixer.conv1d.$2"},
      {std::regex(R"(^blk\.(\d+)\.ssm_dt\.bias$)"), "backbone.layers.$1.mixer.dt_bias"},
      {std::regex(R"(^blk\.(\d+)\.ssm_a$)"), "backbone.layers.$1.mixer.A_log"},
      {std::regex(R"(^blk\.(\d+)\.ssm_d$)"), "backbone.layers.$1.mixer.D"},
      {std::regex(R"(^blk\.(\d+)\.ssm_norm\.weight$)"), "backbone.layers.$1.mixer.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_out\.weight$)"), "backbone.layers.$1.mixer.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "backbone.layers.$1.mixer.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "backbone.layers.$1.mixer.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_(up|down)\.weight$)"), "backbone.layers.$1.mixer.$2_proj.weight"},
  };
  // Granite-4.0-H (GraniteMoeHybrid): a mixer (mamba or self_attn) and a shared MLP per layer.
  static const Rules kGranite = {
      {std::regex(R"(^token_embd\.weight$)"), "model.embed_tokens.weight"},
      {std::regex(R"(^output_norm\.weight$)"), "model.norm.weight"},
      {std::regex(R"(^output\.weight$)"), "lm_head.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_norm\.weight$)"), "model.layers.$1.input_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_norm\.weight$)"), "model.layers.$1.post_attention_layernorm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_in\.weight$)"), "model.layers.$1.mamba.in_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_conv1d\.(weight|bias)$)"), "model.layers.$1.mamba.conv1d.$2"},
      {std::regex(R"(^blk\.(\d+)\.ssm_dt\.bias$)"), "model.layers.$1.mamba.dt_bias"},
      {std::regex(R"(^blk\.(\d+)\.ssm_a$)"), "model.layers.$1.mamba.A_log"},
      {std::regex(R"(^blk\.(\d+)\.ssm_d$)"), "model.layers.$1.mamba.D"},
      {std::regex(R"(^blk\.(\d+)\.ssm_norm\.weight$)"), "model.layers.$1.mamba.norm.weight"},
      {std::regex(R"(^blk\.(\d+)\.ssm_out\.weight$)"), "model.layers.$1.mamba.out_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_(q|k|v)\.weight$)"), "model.layers.$1.self_attn.$2_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.attn_output\.weight$)"), "model.layers.$1.self_attn.o_proj.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_gate_up\.weight$)"), "model.layers.$1.shared_mlp.input_linear.weight"},
      {std::regex(R"(^blk\.(\d+)\.ffn_down\.weight$)"), "model.layers.$1.shared_mlp.output_linear.weight"},
  };
  const Rules& rules = (arch == "mamba2" || arch == "nemotron_h") ? kBackbone : arch == "granitehybrid" ? kGranite : kLlama;
  for (const auto& [re, fmt] : rules)
    if (std::regex_match(gguf, re)) return std::regex_replace(gguf, re, fmt);
  return gguf;
}

class StoreSource : public WeightSource {
 public:
  StoreSource(const formats::TensorStore* store, bool hf_names, std::string arch = "")
      : store_(store), hf_(hf_names), arch_(std::move(arch)) {}
  bool HfLayout() const override { return hf_; }
  bool Has(const std::string& name) const override { return store_->Find(Map(name)) != nullptr; }
  StatusOr<TensorEntry> Get(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<float>*) const override {
    auto e = store_->Get(Map(name), shape);
    if (!e.ok()) return e.status();
    // A NaN or inf weight (or block scale) would load and turn every logit NaN: refused here.
    const TensorEntry& t = **e;
    if (const int64_t at = core::FirstNonFinite(t.dtype, t.data, t.numel()); at >= 0)
      return core::DataLoss(t.file + ": tensor '" + t.name + "' has a value that is not finite (NaN or inf) at " +
                            (core::IsQuantized(t.dtype) ? "block " : "element ") + std::to_string(at));
    return t;
  }

 private:
  std::string Map(const std::string& n) const { return hf_ ? HfName(arch_, n) : n; }
  const formats::TensorStore* store_;
  bool hf_;
  std::string arch_;
};

// Seeded random weights: linear weights and embeddings N(0, 0.02), biases N(0, 0.02), norm
// weights N(1, 0.1) (not all ones, so tests notice a norm weight applied to the wrong axis).
// Each tensor's values depend only on (seed, name), so presets are stable as code changes.
class RandomSource : public WeightSource {
 public:
  RandomSource(const ModelConfig& c, uint64_t seed, core::ThreadPool& pool) : config_(c), seed_(seed), pool_(pool) {}
  bool Has(const std::string& name) const override {
    if (name == "output.weight") return !config_.tied_embeddings;
    if (name.find("ssm_conv1d.bias") != std::string::npos) return config_.ssm_conv_bias;
    if (name.find("ssm_dt.bias") != std::string::npos) return true;
    if (name.find(".bias") != std::string::npos) return config_.qkv_bias;
    if (name.find("ffn_gate") != std::string::npos) return config_.mlp_act == ModelConfig::MlpAct::kSiluGated;
    if (name.find("attn_q_norm") != std::string::npos || name.find("attn_k_norm") != std::string::npos)
      return config_.qk_norm;
    return name != "rope_freqs.weight";
  }
  StatusOr<TensorEntry> Get(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<float>* scratch) const override {
    TensorEntry e;
    e.name = name;
    e.shape = shape;
    e.file = config_.name;
    e.dtype = DType::kF32;
    scratch->resize(e.numel());
    const bool is_norm = name.find("norm") != std::string::npos || name.find("ssm_d") == name.size() - 5;
    // Mamba2 parameters drawn as Mamba2's initialisation does: A = -U(1, 16); dt_bias the
    // inverse softplus of a log-uniform dt in [0.001, 0.1]; a conv wide enough to mix.
    const bool is_a = name.size() > 6 && name.compare(name.size() - 6, 6, ".ssm_a") == 0;
    const bool is_dt = name.find("ssm_dt.bias") != std::string::npos;
    const float spread = name.find("ssm_conv1d.weight") != std::string::npos ? 0.3f : 0.02f;
    uint64_t h = seed_ * 0x9e3779b97f4a7c15ull + 1469598103934665603ull;
    for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
    // Fixed-size chunks with their own seeds: the values do not depend on the thread count.
    constexpr int64_t kChunk = 1 << 16;
    const int64_t n = e.numel(), chunks = (n + kChunk - 1) / kChunk;
    float* out = scratch->data();
    pool_.ParallelFor(chunks, [&](int, int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        core::Rng rng(h + static_cast<uint64_t>(c) * 0x632be59bd9b4e019ull);
        for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
          if (is_a) {
            out[i] = -static_cast<float>(1.0 + 15.0 * rng.Uniform());
          } else if (is_dt) {
            const double dt = std::exp(std::log(1e-3) + rng.Uniform() * (std::log(0.1) - std::log(1e-3)));
            out[i] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
          } else {
            out[i] = is_norm ? rng.Normal(1.0f, 0.1f) : rng.Normal(0.0f, spread);
          }
        }
      }
    });
    e.data = scratch->data();
    e.nbytes = scratch->size() * 4;
    return e;
  }

 private:
  ModelConfig config_;
  uint64_t seed_;
  core::ThreadPool& pool_;
};

std::vector<float> ToF32(const TensorEntry& e) {
  std::vector<float> v(e.numel());
  core::ConvertToF32(e.dtype, e.data, v.data(), v.size());
  return v;
}

std::string Blk(int i, const char* what) { return "blk." + std::to_string(i) + "." + what; }

StatusOr<std::vector<float>> GetShaped(const WeightSource& src, const std::string& name, const std::vector<int64_t>& shape) {
  std::vector<float> scratch;
  RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, src.Get(name, shape, &scratch));
  return ToF32(e);
}

StatusOr<std::vector<float>> GetVector(const WeightSource& src, const std::string& name, int64_t n) {
  std::vector<float> scratch;
  RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, src.Get(name, {n}, &scratch));
  return ToF32(e);
}

DType DefaultStorage(DType file_dtype) { return file_dtype == DType::kF32 ? DType::kF32 : DType::kBF16; }

// How linear weights are stored: a forced type (--dtype) or each tensor's own (quantised
// tensors stay quantised; f16/bf16 become bf16; f32 stays f32), and how bf16 meets activations.
struct WeightPlan {
  std::optional<DType> forced;
  kernels::Bf16Mode bf16_mode = kernels::Bf16Mode::kExact;
};

// Packs the named [rows_i, n_in] matrices stacked along the output dimension, straight from
// the file's dtype (no f32 copy of a whole tensor, which for a 151936 x 1024 embedding would
// add 622 MB to the peak). Parts of different quantised types stay fused as segments.
StatusOr<kernels::PackedWeight> GetStacked(const WeightSource& src, const std::vector<std::string>& names,
                                           const std::vector<int64_t>& rows, int64_t n_in, const WeightPlan& plan) {
  std::vector<std::vector<float>> scratch(names.size());
  std::vector<kernels::PackedWeight::Part> parts;
  DType plain = DType::kBF16;  // storage of unquantised parts when none forces it
  bool any_plain = false;
  for (size_t i = 0; i < names.size(); ++i) {
    RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, src.Get(names[i], {rows[i], n_in}, &scratch[i]));
    if (core::IsQuantized(e.dtype) && n_in % core::BlockElems(e.dtype) != 0)
      return core::DataLoss(e.file + ": tensor '" + e.name + "' rows are not whole quantisation blocks");
    if (!core::IsQuantized(e.dtype) && !any_plain) {
      plain = DefaultStorage(e.dtype);
      any_plain = true;
    }
    parts.push_back({e.data, e.dtype, rows[i]});
  }
  kernels::PackedWeight::Options o;
  o.keep_quantised = !plan.forced.has_value();
  o.storage = plan.forced.value_or(plain);
  o.bf16_mode = o.storage == DType::kBF16 ? plan.bf16_mode : kernels::Bf16Mode::kExact;
  core::ThreadPool pool;
  return kernels::PackedWeight::PackParts(parts, n_in, o, &pool);
}

StatusOr<Mamba2LayerWeights> BuildMamba2(const ModelConfig& c, const WeightSource& src, int block, const WeightPlan& storage) {
  const kernels::Mamba2Dims dims = c.ssm_dims();
  const int64_t d = c.d_model, di = dims.d_inner(), cd = dims.conv_dim(), H = dims.n_heads, K = dims.d_conv;
  Mamba2LayerWeights m;
  RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, Blk(block, "attn_norm.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m.in_proj, GetStacked(src, {Blk(block, "ssm_in.weight")}, {di + cd + H}, d, storage));
  std::vector<float> scratch;
  const std::vector<int64_t> conv_shape = src.HfLayout() ? std::vector<int64_t>{cd, 1, K} : std::vector<int64_t>{cd, K};
  RADIXLM_ASSIGN_OR_RETURN(TensorEntry conv, src.Get(Blk(block, "ssm_conv1d.weight"), conv_shape, &scratch));
  const std::vector<float> conv_f32 = ToF32(conv);
  m.conv_w.resize(K * cd);
  for (int64_t ch = 0; ch < cd; ++ch)
    for (int64_t k = 0; k < K; ++k) m.conv_w[k * cd + ch] = conv_f32[ch * K + k];
  if (src.Has(Blk(block, "ssm_conv1d.bias"))) {
    RADIXLM_ASSIGN_OR_RETURN(m.conv_b, GetVector(src, Blk(block, "ssm_conv1d.bias"), cd));
  }
  RADIXLM_ASSIGN_OR_RETURN(m.dt_bias, GetVector(src, Blk(block, "ssm_dt.bias"), H));
  // GGUF keeps A and D as [n_heads, 1] and the gated norm as [n_groups, d_inner / n_groups].
  const bool hf = src.HfLayout();
  const std::vector<int64_t> head_shape = hf ? std::vector<int64_t>{H} : std::vector<int64_t>{H, 1};
  const std::vector<int64_t> norm_shape =
      hf ? std::vector<int64_t>{di} : std::vector<int64_t>{dims.n_groups, di / dims.n_groups};
  RADIXLM_ASSIGN_OR_RETURN(m.A, GetShaped(src, Blk(block, "ssm_a"), head_shape));
  if (hf)
    for (float& a : m.A) a = -std::exp(a);  // the checkpoint holds A_log
  RADIXLM_ASSIGN_OR_RETURN(m.D, GetShaped(src, Blk(block, "ssm_d"), head_shape));
  RADIXLM_ASSIGN_OR_RETURN(m.gated_norm, GetShaped(src, Blk(block, "ssm_norm.weight"), norm_shape));
  RADIXLM_ASSIGN_OR_RETURN(m.out_proj, GetStacked(src, {Blk(block, "ssm_out.weight")}, {d}, di, storage));
  return m;
}

StatusOr<std::unique_ptr<Transformer>> Build(const ModelConfig& c, const WeightSource& src, const WeightPlan& storage) {
  const std::string problem = c.Validate();
  if (!problem.empty()) return core::InvalidArgument(c.name + ": " + problem);
  TransformerWeights w;
  const int64_t d = c.d_model, hd = c.head_dim, q = c.n_heads * hd, kv = c.n_kv_heads * hd;
  const std::vector<int> blocks = c.SublayerBlocks();
  int kv_index = 0, state_index = 0;
  for (size_t li = 0; li < c.layers.size(); ++li) {
    const int block = blocks[li];
    if (c.layers[li] == LayerKind::kAttention) {
      AttentionLayerWeights a;
      RADIXLM_ASSIGN_OR_RETURN(a.norm, GetVector(src, Blk(block, "attn_norm.weight"), d));
      RADIXLM_ASSIGN_OR_RETURN(a.qkv, GetStacked(src, {Blk(block, "attn_q.weight"), Blk(block, "attn_k.weight"), Blk(block, "attn_v.weight")},
                                                 {q, kv, kv}, d, storage));
      if (c.qkv_bias) {
        for (const char* n : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
          RADIXLM_ASSIGN_OR_RETURN(auto b, GetVector(src, Blk(block, n), n[5] == 'q' ? q : kv));
          a.qkv_bias.insert(a.qkv_bias.end(), b.begin(), b.end());
        }
      }
      if (c.qk_norm) {
        RADIXLM_ASSIGN_OR_RETURN(a.q_norm, GetVector(src, Blk(block, "attn_q_norm.weight"), hd));
        RADIXLM_ASSIGN_OR_RETURN(a.k_norm, GetVector(src, Blk(block, "attn_k_norm.weight"), hd));
      }
      RADIXLM_ASSIGN_OR_RETURN(a.o, GetStacked(src, {Blk(block, "attn_output.weight")}, {d}, q, storage));
      a.kv_index = kv_index++;
      w.attention.push_back(std::move(a));
    } else if (c.layers[li] == LayerKind::kMlp) {
      MlpLayerWeights m;
      // A block of its own (Nemotron-H) has one norm; a mixer + MLP block has a second one.
      RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, Blk(block, c.block_per_sublayer ? "attn_norm.weight" : "ffn_norm.weight"), d));
      if (c.mlp_act == ModelConfig::MlpAct::kRelu2) {
        RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, {Blk(block, "ffn_up.weight")}, {c.ffn_dim}, d, storage));
      } else if (c.arch == "granitehybrid" && src.HfLayout()) {  // input_linear = [gate; up]
        RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, {Blk(block, "ffn_gate_up.weight")}, {2 * int64_t{c.ffn_dim}}, d, storage));
      } else {
        RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, {Blk(block, "ffn_gate.weight"), Blk(block, "ffn_up.weight")},
                                                       {c.ffn_dim, c.ffn_dim}, d, storage));
      }
      RADIXLM_ASSIGN_OR_RETURN(m.down, GetStacked(src, {Blk(block, "ffn_down.weight")}, {d}, c.ffn_dim, storage));
      w.mlp.push_back(std::move(m));
    } else {
      RADIXLM_ASSIGN_OR_RETURN(Mamba2LayerWeights m, BuildMamba2(c, src, block, storage));
      m.state_index = state_index++;
      w.mamba.push_back(std::move(m));
    }
  }
  RADIXLM_ASSIGN_OR_RETURN(w.final_norm, GetVector(src, "output_norm.weight", d));
  // Untied embeddings need their own output matrix: using the input table in its place would
  // load without a word and compute other logits (transformers, too, refuses to guess here).
  const bool tied = c.tied_embeddings;
  if (!tied && !src.Has("output.weight"))
    return core::DataLoss(c.name + ": the embeddings are not tied (tie_word_embeddings false) but the model has no "
                          "output matrix (lm_head.weight / output.weight)");
  RADIXLM_ASSIGN_OR_RETURN(w.lm_head, GetStacked(src, {tied ? "token_embd.weight" : "output.weight"}, {c.vocab_size}, d, storage));
  if (!tied) {
    std::vector<float> scratch;
    RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, src.Get("token_embd.weight", {c.vocab_size, d}, &scratch));
    // A quantised table stays quantised (a row is dequantised per lookup); otherwise it is kept
    // in the linear weights' type (f32 -> bf16 conversion when asked).
    if (core::IsQuantized(e.dtype) && !storage.forced) {
      if (d % core::BlockElems(e.dtype) != 0) return core::DataLoss(e.file + ": token_embd.weight rows are not whole blocks");
      w.embedding_dtype = e.dtype;
      w.embedding.Resize(core::RowBytes(e.dtype, d) * c.vocab_size);
      std::memcpy(w.embedding.data(), e.data, w.embedding.size());
    } else {
      const DType table = storage.forced.value_or(DefaultStorage(core::IsQuantized(e.dtype) ? DType::kBF16 : e.dtype));
      w.embedding_dtype = table;
      w.embedding.Resize(static_cast<size_t>(e.numel()) * core::DTypeSize(table));
      std::vector<float> row(d);
      for (int64_t r = 0; r < c.vocab_size; ++r) {
        core::ConvertToF32(e.dtype, static_cast<const uint8_t*>(e.data) + r * core::RowBytes(e.dtype, d), row.data(), d);
        for (int64_t k = 0; k < d; ++k) {
          if (table == DType::kF32) w.embedding.as<float>()[r * d + k] = row[k];
          else w.embedding.as<uint16_t>()[r * d + k] = core::F32ToBf16(row[k]);
        }
      }
    }
  }
  ModelConfig final_config = c;
  final_config.tied_embeddings = tied;
  if (src.Has("rope_freqs.weight")) {
    RADIXLM_ASSIGN_OR_RETURN(final_config.rope_freq_factors, GetVector(src, "rope_freqs.weight", hd / 2));
    for (float f : final_config.rope_freq_factors)
      if (!(f > 0)) return core::DataLoss(c.name + ": rope_freqs.weight has a factor that is not positive");
  }
  return std::make_unique<Transformer>(std::move(final_config), std::move(w));
}

// ---- config readers ------------------------------------------------------------------------

StatusOr<ModelConfig> ConfigFromGguf(const formats::GgufFile& g) {
  ModelConfig c;
  RADIXLM_ASSIGN_OR_RETURN(c.arch, g.GetString("general.architecture"));
  if (c.arch == "mamba2" || c.arch == "nemotron_h" || c.arch == "granitehybrid") return HybridConfigFromGguf(g, c.arch);
  if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "qwen3")
    return core::Unimplemented(g.path() + ": architecture '" + c.arch +
                               "' is not supported (llama, qwen2, qwen3, mamba2, nemotron_h, granitehybrid)");
  const std::string a = c.arch + ".";
  const StatusOr<std::string> name = g.GetString("general.name");  // optional; the path when absent or not text
  c.name = name.ok() ? *name : g.path();
  RADIXLM_ASSIGN_OR_RETURN(int64_t d, g.GetInt(a + "embedding_length"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t blocks, g.GetInt(a + "block_count"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t ffn, g.GetInt(a + "feed_forward_length"));
  RADIXLM_ASSIGN_OR_RETURN(int64_t heads, g.GetInt(a + "attention.head_count"));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "embedding_length", d, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "block_count", blocks, 1, kMaxBlocks));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "feed_forward_length", ffn, 1, kMaxDim));
  RADIXLM_RETURN_IF_ERROR(CheckSize(g.path() + ": " + a + "attention.head_count", heads, 1, kMaxHeads));
  c.d_model = static_cast<int>(d);
  c.n_blocks = static_cast<int>(blocks);
  c.ffn_dim = static_cast<int>(ffn);
  c.n_heads = static_cast<int>(heads);
  c.n_kv_heads = static_cast<int>(g.GetIntOr(a + "attention.head_count_kv", heads));
  c.head_dim = static_cast<int>(g.GetIntOr(a + "attention.key_length", d / heads));
  const int64_t rot = g.GetIntOr(a + "rope.dimension_count", c.head_dim);
  if (rot != c.head_dim) return core::Unimplemented(g.path() + ": partial rotary embeddings (rope.dimension_count " + std::to_string(rot) + ")");
  c.rms_eps = static_cast<float>(g.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_theta = g.GetFloatOr(a + "rope.freq_base", 10000.0);
  c.max_context = g.GetIntOr(a + "context_length", 4096);
  c.rope_layout = c.arch == "llama" ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kNeox;
  c.qk_norm = c.arch == "qwen3";
  c.qkv_bias = c.arch == "qwen2";
  c.tied_embeddings = g.tensors().Find("output.weight") == nullptr;
  const TensorEntry* emb = g.tensors().Find("token_embd.weight");
  if (!emb || emb->shape.size() != 2) return core::DataLoss(g.path() + ": missing or malformed token_embd.weight");
  c.vocab_size = emb->shape[0];
  c.bos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.bos_token_id", -1));
  c.eos_id = static_cast<int32_t>(g.GetIntOr("tokenizer.ggml.eos_token_id", -1));
  c.layers = DenseLayers(c.n_blocks);
  return c;
}

// A GGUF whose tokenizer has more tokens than its embedding has rows cannot be right: every id
// past the table would read another tensor's bytes or be refused, and the logits would not
// cover the tokenizer (a 64-row table under a 50,257-token tokenizer loaded and ran).
Status CheckGgufVocabulary(const formats::GgufFile& g, const ModelConfig& c) {
  const formats::GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  if (tokens && static_cast<int64_t>(tokens->array.size()) > c.vocab_size)
    return core::DataLoss(g.path() + ": the tokenizer has " + std::to_string(tokens->array.size()) +
                          " tokens but token_embd.weight only " + std::to_string(c.vocab_size) + " rows");
  return core::Status::Ok();
}

StatusOr<ModelConfig> ConfigFromGgufChecked(const formats::GgufFile& g) {
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, ConfigFromGguf(g));
  RADIXLM_RETURN_IF_ERROR(CheckGgufVocabulary(g, c));
  return c;
}

StatusOr<ModelConfig> ConfigFromHf(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in) return core::NotFound(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return core::DataLoss(path.string() + ": not valid JSON");
  ModelConfig c;
  if (!j.contains("model_type") || !j["model_type"].is_string())
    return core::DataLoss(path.string() + ": 'model_type' is missing or not a string");
  const std::string type = j["model_type"].get<std::string>();
  if (type == "mamba2" || type == "nemotron_h" || type == "granitemoehybrid") return HybridConfigFromHf(j, type, path.string(), dir);
  if (type != "llama" && type != "qwen2" && type != "qwen3")
    return core::Unimplemented(path.string() + ": model_type '" + type +
                               "' is not supported (llama, qwen2, qwen3, mamba2, nemotron_h, granitemoehybrid)");
  c.arch = type;
  c.name = dir;
  try {
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    // Read wide and checked before use: get<int>() would narrow 4294967296 to 0.
    for (auto [key, out, hi] : {std::tuple{"hidden_size", &c.d_model, kMaxDim}, {"num_hidden_layers", &c.n_blocks, kMaxBlocks},
                                {"intermediate_size", &c.ffn_dim, kMaxDim}, {"num_attention_heads", &c.n_heads, kMaxHeads}}) {
      const int64_t v = j.at(key).get<int64_t>();
      RADIXLM_RETURN_IF_ERROR(CheckSize(path.string() + ": " + key, v, 1, hi));
      *out = static_cast<int>(v);
    }
    c.n_kv_heads = j.value("num_key_value_heads", c.n_heads);
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int>() : c.d_model / c.n_heads;
    c.rms_eps = j.value("rms_norm_eps", 1e-6f);
    c.rope_theta = j.value("rope_theta", 10000.0);
    c.max_context = j.value("max_position_embeddings", int64_t{4096});
    c.tied_embeddings = j.value("tie_word_embeddings", false);
    c.qk_norm = type == "qwen3";
    c.qkv_bias = type == "qwen2" || j.value("attention_bias", false);
    if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int32_t>();
    if (j.contains("eos_token_id")) {
      const json& e = j["eos_token_id"];
      if (e.is_number_integer()) c.eos_id = e.get<int32_t>();
      else if (e.is_array() && !e.empty()) c.eos_id = e[0].get<int32_t>();
    }
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
      const json& rs = j["rope_scaling"];
      const std::string rt = rs.value("rope_type", rs.value("type", ""));
      if (rt != "llama3") return core::Unimplemented(path.string() + ": rope_scaling type '" + rt + "' (only llama3)");
      c.rope_scaling.factor = rs.at("factor").get<float>();
      c.rope_scaling.low_freq_factor = rs.value("low_freq_factor", 1.0f);
      c.rope_scaling.high_freq_factor = rs.value("high_freq_factor", 4.0f);
      c.rope_scaling.original_max_position = rs.value("original_max_position_embeddings", 8192);
    }
  } catch (const json::exception& e) {
    return core::DataLoss(path.string() + ": " + e.what());
  }
  c.rope_layout = kernels::RopeLayout::kNeox;
  c.layers = DenseLayers(c.n_blocks);
  return c;
}

bool IsRandom(const std::string& spec) { return spec.rfind("random:", 0) == 0; }

}  // namespace

std::vector<std::string> RandomPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : RandomPresets()) names.push_back(p.name);
  return names;
}

namespace {

// Model files are untrusted input: whatever a malformed one makes a reader throw (a JSON type
// error, an allocation refused) becomes an error naming the model, never a terminated process.
template <typename Fn>
auto Guarded(const std::string& spec, Fn&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::exception& e) {
    return core::DataLoss("model '" + spec + "': malformed or too large (" + std::string(e.what()).substr(0, 300) + ")");
  }
}

}  // namespace

StatusOr<ModelConfig> LoadConfig(const std::string& spec) {
  if (IsRandom(spec)) return PresetConfig(spec.substr(7));
  StatusOr<ModelConfig> c = Guarded(spec, [&]() -> StatusOr<ModelConfig> {
    if (fs::is_directory(spec)) return ConfigFromHf(spec);
    RADIXLM_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::Open(spec));
    return ConfigFromGgufChecked(g);
  });
  if (c.ok())
    if (const std::string problem = c->Validate(); !problem.empty()) return core::InvalidArgument(spec + ": " + problem);
  return c;
}

namespace {

// Random presets are generated in f32 and stored as f32 unless asked; files keep their types.
WeightPlan PlanOf(const LoadOptions& options, std::optional<DType> default_storage) {
  WeightPlan plan;
  plan.forced = options.dtype;
  if (!plan.forced && default_storage) plan.forced = DefaultStorage(*default_storage);
  plan.bf16_mode = options.bf16_activations.value_or(kernels::HasBf16Dot()) ? kernels::Bf16Mode::kBf16Activations
                                                                           : kernels::Bf16Mode::kExact;
  return plan;
}

StatusOr<std::unique_ptr<Transformer>> LoadModelUnguarded(const std::string& spec, const LoadOptions& options) {
  if (IsRandom(spec)) {
    RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(spec.substr(7)));
    core::ThreadPool pool;
    RandomSource src(c, PresetSeed(spec.substr(7)), pool);
    if (options.ssm_chunk) c.ssm_chunk = *options.ssm_chunk;
    return Build(c, src, PlanOf(options, DType::kF32));
  }
  if (fs::is_directory(spec)) {
    RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, ConfigFromHf(spec));
    RADIXLM_ASSIGN_OR_RETURN(auto store, formats::ReadSafetensorsFolder(spec));
    StoreSource src(store.get(), /*hf_names=*/true, c.arch);
    const TensorEntry* any = store->Find(HfName(c.arch, "token_embd.weight"));
    if (options.ssm_chunk) c.ssm_chunk = *options.ssm_chunk;
    return Build(c, src, PlanOf(options, any ? any->dtype : DType::kF32));
  }
  if (!fs::exists(spec))
    return core::NotFound("model '" + spec + "': no such file or folder (or use random:NAME; presets: " +
                          [] { std::string s; for (auto& n : RandomPresetNames()) s += (s.empty() ? "" : ", ") + n; return s; }() + ")");
  RADIXLM_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::Open(spec));
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, ConfigFromGgufChecked(g));
  StoreSource src(&g.tensors(), /*hf_names=*/false);
  if (options.ssm_chunk) c.ssm_chunk = *options.ssm_chunk;
  return Build(c, src, PlanOf(options, std::nullopt));
}

}  // namespace

StatusOr<std::unique_ptr<Transformer>> LoadModel(const std::string& spec, const LoadOptions& options) {
  return Guarded(spec, [&] { return LoadModelUnguarded(spec, options); });
}

// ---- export --------------------------------------------------------------------------------

namespace {

// The GGUF-named tensors of a model (f32), generated or read, in a stable order.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

std::vector<NamedTensor> AllTensors(const ModelConfig& c, const WeightSource& src, Status* status, bool gguf_shapes) {
  const int64_t d = c.d_model, hd = c.head_dim, q = c.n_heads * hd, kv = c.n_kv_heads * hd;
  const kernels::Mamba2Dims sd = c.ssm_dims();
  std::vector<std::pair<std::string, std::vector<int64_t>>> want = {{"token_embd.weight", {c.vocab_size, d}}};
  const std::vector<int> blocks = c.SublayerBlocks();
  for (size_t li = 0; li < c.layers.size(); ++li) {
    const int b = blocks[li];
    if (c.layers[li] == LayerKind::kAttention) {
      want.push_back({Blk(b, "attn_norm.weight"), {d}});
      want.push_back({Blk(b, "attn_q.weight"), {q, d}});
      want.push_back({Blk(b, "attn_k.weight"), {kv, d}});
      want.push_back({Blk(b, "attn_v.weight"), {kv, d}});
      if (c.qkv_bias) {
        want.push_back({Blk(b, "attn_q.bias"), {q}});
        want.push_back({Blk(b, "attn_k.bias"), {kv}});
        want.push_back({Blk(b, "attn_v.bias"), {kv}});
      }
      if (c.qk_norm) {
        want.push_back({Blk(b, "attn_q_norm.weight"), {hd}});
        want.push_back({Blk(b, "attn_k_norm.weight"), {hd}});
      }
      want.push_back({Blk(b, "attn_output.weight"), {d, q}});
    } else if (c.layers[li] == LayerKind::kMlp) {
      want.push_back({Blk(b, c.block_per_sublayer ? "attn_norm.weight" : "ffn_norm.weight"), {d}});
      if (c.mlp_act == ModelConfig::MlpAct::kSiluGated) want.push_back({Blk(b, "ffn_gate.weight"), {c.ffn_dim, d}});
      want.push_back({Blk(b, "ffn_up.weight"), {c.ffn_dim, d}});
      want.push_back({Blk(b, "ffn_down.weight"), {d, c.ffn_dim}});
    } else {
      want.push_back({Blk(b, "attn_norm.weight"), {d}});
      want.push_back({Blk(b, "ssm_in.weight"), {sd.d_inner() + sd.conv_dim() + sd.n_heads, d}});
      want.push_back({Blk(b, "ssm_conv1d.weight"), {sd.conv_dim(), sd.d_conv}});
      if (c.ssm_conv_bias) want.push_back({Blk(b, "ssm_conv1d.bias"), {sd.conv_dim()}});
      want.push_back({Blk(b, "ssm_dt.bias"), {sd.n_heads}});
      const std::vector<int64_t> head = gguf_shapes ? std::vector<int64_t>{sd.n_heads, 1} : std::vector<int64_t>{sd.n_heads};
      want.push_back({Blk(b, "ssm_a"), head});
      want.push_back({Blk(b, "ssm_d"), head});
      want.push_back({Blk(b, "ssm_norm.weight"), gguf_shapes ? std::vector<int64_t>{sd.n_groups, sd.d_inner() / sd.n_groups}
                                                             : std::vector<int64_t>{sd.d_inner()}});
      want.push_back({Blk(b, "ssm_out.weight"), {d, sd.d_inner()}});
    }
  }
  want.push_back({"output_norm.weight", {d}});
  if (!c.tied_embeddings) want.push_back({"output.weight", {c.vocab_size, d}});
  std::vector<NamedTensor> out;
  for (auto& [name, shape] : want) {
    std::vector<float> scratch;
    auto e = src.Get(name, shape, &scratch);
    if (!e.ok()) { *status = e.status(); return {}; }
    out.push_back({name, shape, ToF32(*e)});
  }
  return out;
}

// Llama 3 scaled frequencies expressed as llama.cpp's rope_freqs divisors.
std::vector<float> RopeFreqFactors(const ModelConfig& c) {
  const auto plain = kernels::MakeRopeTable(c.rope_layout, c.head_dim, c.rope_theta);
  const auto scaled = kernels::MakeRopeTable(c.rope_layout, c.head_dim, c.rope_theta, &c.rope_scaling);
  std::vector<float> f(plain.inv_freq.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = plain.inv_freq[i] / scaled.inv_freq[i];
  return f;
}

// llama.cpp's converter permutes HF q/k rows so that interleaved RoPE equals HF's NeoX RoPE;
// this is its inverse (GGUF row h*hd + 2i + j  <-  HF row h*hd + j*hd/2 + i).
std::vector<float> UnpermuteLlamaRows(const std::vector<float>& w, int n_heads, int head_dim, int64_t cols) {
  std::vector<float> out(w.size());
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const int64_t g = int64_t{h} * head_dim + 2 * i + j, hf = int64_t{h} * head_dim + j * head_dim / 2 + i;
        std::copy(w.begin() + g * cols, w.begin() + (g + 1) * cols, out.begin() + hf * cols);
      }
  return out;
}

// Hugging Face folder of a Mamba2 / Nemotron-H / Granite-4.0-H model: HF tensor layouts
// (A_log, conv1d [conv_dim, 1, d_conv], Granite's stacked input_linear) and its config.json.
Status WriteHybridHf(const ModelConfig& c, std::vector<NamedTensor> tensors, DType dtype, const std::string& out_path) {
  const kernels::Mamba2Dims sd = c.ssm_dims();
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    NamedTensor& t = tensors[i];
    if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0) {
      for (float& a : t.data) a = std::log(-a);
    } else if (t.name.find("ssm_conv1d.weight") != std::string::npos) {
      t.shape = {sd.conv_dim(), 1, sd.d_conv};
    } else if (c.arch == "granitehybrid" && t.name.find("ffn_gate.weight") != std::string::npos) {
      NamedTensor& up = tensors[i + 1];  // AllTensors lists gate, then up
      NamedTensor merged{t.name.substr(0, t.name.find("ffn_gate")) + "ffn_gate_up.weight", {2 * t.shape[0], t.shape[1]}, t.data};
      merged.data.insert(merged.data.end(), up.data.begin(), up.data.end());
      out.push_back(std::move(merged));
      ++i;
      continue;
    }
    out.push_back(std::move(t));
  }
  std::vector<std::vector<uint16_t>> half(out.size());
  std::vector<formats::SafetensorsTensor> st;
  for (size_t i = 0; i < out.size(); ++i) {
    const DType dt = out[i].shape.size() == 2 ? dtype : DType::kF32;
    const void* data = out[i].data.data();
    if (dt != DType::kF32) {
      half[i].resize(out[i].data.size());
      for (size_t k = 0; k < half[i].size(); ++k)
        half[i][k] = dt == DType::kBF16 ? core::F32ToBf16(out[i].data[k]) : core::F32ToF16(out[i].data[k]);
      data = half[i].data();
    }
    st.push_back({HfName(c.arch, out[i].name), dt, out[i].shape, data});
  }
  RADIXLM_RETURN_IF_ERROR(formats::WriteSafetensorsFile((fs::path(out_path) / "model.safetensors").string(), st));
  json cfg = {{"vocab_size", c.vocab_size}, {"hidden_size", c.d_model}, {"tie_word_embeddings", c.tied_embeddings},
              {"torch_dtype", dtype == DType::kF32 ? "float32" : dtype == DType::kBF16 ? "bfloat16" : "float16"}};
  if (c.bos_id >= 0) cfg["bos_token_id"] = c.bos_id;
  if (c.eos_id >= 0) cfg["eos_token_id"] = c.eos_id;
  if (c.arch == "mamba2") {
    cfg.update({{"architectures", {"Mamba2ForCausalLM"}}, {"model_type", "mamba2"}, {"num_hidden_layers", c.n_blocks},
                {"num_heads", c.ssm_heads}, {"head_dim", c.ssm_head_dim}, {"state_size", c.ssm_state},
                {"n_groups", c.ssm_groups}, {"conv_kernel", c.ssm_conv}, {"expand", c.ssm_heads * c.ssm_head_dim / c.d_model},
                {"use_conv_bias", c.ssm_conv_bias}, {"use_bias", false}, {"layer_norm_epsilon", c.rms_eps},
                {"chunk_size", c.ssm_chunk > 0 ? c.ssm_chunk : 256}});  // HF's default; ours is a runtime choice
  } else if (c.arch == "nemotron_h") {
    std::string pattern;
    for (LayerKind k : c.layers) pattern += k == LayerKind::kMamba2 ? 'M' : k == LayerKind::kAttention ? '*' : '-';
    cfg.update({{"architectures", {"NemotronHForCausalLM"}}, {"model_type", "nemotron_h"},
                {"num_hidden_layers", c.layers.size()}, {"hybrid_override_pattern", pattern},
                {"mamba_num_heads", c.ssm_heads}, {"mamba_head_dim", c.ssm_head_dim}, {"ssm_state_size", c.ssm_state},
                {"n_groups", c.ssm_groups}, {"conv_kernel", c.ssm_conv}, {"use_conv_bias", c.ssm_conv_bias},
                {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                {"intermediate_size", c.ffn_dim}, {"mlp_hidden_act", "relu2"}, {"layer_norm_epsilon", c.rms_eps},
                {"use_bias", false}, {"mamba_hidden_act", "silu"}});
  } else {
    json types = json::array();
    for (LayerKind k : c.layers)
      if (k != LayerKind::kMlp) types.push_back(k == LayerKind::kMamba2 ? "mamba" : "attention");
    cfg.update({{"architectures", {"GraniteMoeHybridForCausalLM"}}, {"model_type", "granitemoehybrid"},
                {"num_hidden_layers", c.n_blocks}, {"layer_types", types}, {"mamba_n_heads", c.ssm_heads},
                {"mamba_d_head", c.ssm_head_dim}, {"mamba_d_state", c.ssm_state}, {"mamba_n_groups", c.ssm_groups},
                {"mamba_d_conv", c.ssm_conv}, {"mamba_expand", c.ssm_heads * c.ssm_head_dim / c.d_model},
                {"mamba_conv_bias", c.ssm_conv_bias}, {"mamba_proj_bias", false},
                {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
                {"shared_intermediate_size", c.ffn_dim}, {"num_local_experts", 0}, {"rms_norm_eps", c.rms_eps},
                {"embedding_multiplier", c.embedding_multiplier}, {"residual_multiplier", c.residual_multiplier},
                {"attention_multiplier", c.attention_multiplier}, {"logits_scaling", c.logits_scaling},
                {"position_embedding_type", c.use_rope ? "rope" : "nope"}, {"rope_theta", c.rope_theta},
                {"hidden_act", "silu"}});
  }
  std::ofstream(fs::path(out_path) / "config.json") << core::JsonText(cfg, 2) << "\n";
  return Status::Ok();
}

}  // namespace

Status ExportModel(const std::string& spec, ExportFormat format, const std::string& out_path, DType dtype,
                   const std::vector<std::pair<std::string, formats::GgufValue>>& metadata) {
  auto has_key = [&](const std::string& key) {
    for (const auto& kv : metadata)
      if (kv.first == key) return true;
    return false;
  };
  if (!IsRandom(spec)) return core::InvalidArgument("export takes a random:NAME preset");
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(spec.substr(7)));
  core::ThreadPool pool;
  RandomSource src(c, PresetSeed(spec.substr(7)), pool);
  Status st;
  std::vector<NamedTensor> tensors = AllTensors(c, src, &st, format == ExportFormat::kGguf);
  RADIXLM_RETURN_IF_ERROR(st);
  if (c.rope_scaling.factor > 0 && format == ExportFormat::kGguf)
    tensors.push_back({"rope_freqs.weight", {c.head_dim / 2}, RopeFreqFactors(c)});
  // Storage conversion for f16/bf16 exports (norms and rope factors stay f32, as converters do).
  std::vector<std::vector<uint16_t>> half(tensors.size());
  auto tensor_dtype = [&](const NamedTensor& t) {
    const bool small = t.name.find("norm") != std::string::npos || t.name.find("ssm_") != std::string::npos;
    return t.shape.size() == 2 && (!small || t.name.find("ssm_in") != std::string::npos || t.name.find("ssm_out") != std::string::npos)
               ? dtype
               : DType::kF32;
  };
  auto tensor_data = [&](size_t i) -> const void* {
    const NamedTensor& t = tensors[i];
    if (tensor_dtype(t) == DType::kF32) return t.data.data();
    half[i].resize(t.data.size());
    for (size_t k = 0; k < t.data.size(); ++k)
      half[i][k] = dtype == DType::kBF16 ? core::F32ToBf16(t.data[k]) : core::F32ToF16(t.data[k]);
    return half[i].data();
  };
  const bool hybrid = c.n_ssm_layers() > 0 || !c.use_rope;
  if (format == ExportFormat::kGguf && hybrid) {
    if (c.arch == "granitehybrid" || c.arch == "nemotron_h" || c.arch == "mamba2") {
      if (c.arch != "granitehybrid" && c.ssm_norm_group_size() != c.ssm_heads * c.ssm_head_dim / c.ssm_groups)
        return core::Unimplemented("GGUF (llama.cpp) normalises the gated norm per group; " + c.name + " does not");
    }
    formats::GgufWriter wr;
    using formats::GgufValue;
    using formats::GgufType;
    const std::string a = c.arch + ".";
    wr.Set("general.architecture", GgufValue::Str(c.arch));
    wr.Set("general.name", GgufValue::Str(c.name));
    wr.Set(a + "context_length", GgufValue::U32(static_cast<uint32_t>(std::min<int64_t>(c.max_context, 1 << 30))));
    wr.Set(a + "embedding_length", GgufValue::U32(c.d_model));
    wr.Set(a + "block_count", GgufValue::U32(c.n_blocks));
    wr.Set(a + "ssm.conv_kernel", GgufValue::U32(c.ssm_conv));
    wr.Set(a + "ssm.inner_size", GgufValue::U32(c.ssm_heads * c.ssm_head_dim));
    wr.Set(a + "ssm.state_size", GgufValue::U32(c.ssm_state));
    wr.Set(a + "ssm.time_step_rank", GgufValue::U32(c.ssm_heads));
    wr.Set(a + "ssm.group_count", GgufValue::U32(c.ssm_groups));
    wr.Set(a + "attention.layer_norm_rms_epsilon", GgufValue::F32(c.rms_eps));
    // llama.cpp's nemotron_h loader requires the plain key too (it falls back to it for RMS).
    if (c.arch == "nemotron_h") wr.Set(a + "attention.layer_norm_epsilon", GgufValue::F32(c.rms_eps));
    wr.Set(a + "attention.key_length", GgufValue::U32(c.head_dim));
    wr.Set(a + "attention.value_length", GgufValue::U32(c.head_dim));
    std::vector<GgufValue> kv_heads, ffn;
    const std::vector<int> blocks = c.SublayerBlocks();
    std::vector<int> attn(c.n_blocks, 0), mlp(c.n_blocks, 0);
    for (size_t li = 0; li < c.layers.size(); ++li) {
      if (c.layers[li] == LayerKind::kAttention) attn[blocks[li]] = 1;
      if (c.layers[li] == LayerKind::kMlp) mlp[blocks[li]] = 1;
    }
    for (int b = 0; b < c.n_blocks; ++b) {
      kv_heads.push_back(GgufValue::U32(attn[b] ? c.n_kv_heads : 0));
      ffn.push_back(GgufValue::U32(mlp[b] ? c.ffn_dim : 0));
    }
    // As llama.cpp's converter writes it: one q head count (llama.cpp derives the head size
    // from layer 0's count, which a per-layer array makes 0 for a Mamba2 first layer) and the kv
    // head counts per layer, 0 marking a recurrent layer.
    wr.Set(a + "attention.head_count", GgufValue::U32(c.n_heads));
    wr.Set(a + "attention.head_count_kv", GgufValue::Array(GgufType::kU32, kv_heads));
    if (c.arch == "nemotron_h") {
      wr.Set(a + "feed_forward_length", GgufValue::Array(GgufType::kU32, ffn));
    } else {
      wr.Set(a + "feed_forward_length", GgufValue::U32(c.arch == "granitehybrid" ? c.ffn_dim : 0));
    }
    if (c.arch == "granitehybrid") {
      // llama.cpp applies RoPE to a granitehybrid file unless this says false.
      wr.Set(a + "rope.scaling.finetuned", GgufValue::Bool(c.use_rope));
      if (c.use_rope) {
        wr.Set(a + "rope.freq_base", GgufValue::F32(static_cast<float>(c.rope_theta)));
        wr.Set(a + "rope.dimension_count", GgufValue::U32(c.head_dim));
      }
      wr.Set(a + "expert_shared_feed_forward_length", GgufValue::U32(c.ffn_dim));
      wr.Set(a + "embedding_scale", GgufValue::F32(c.embedding_multiplier));
      wr.Set(a + "residual_scale", GgufValue::F32(c.residual_multiplier));
      wr.Set(a + "attention.scale", GgufValue::F32(c.attention_multiplier));
      wr.Set(a + "logit_scale", GgufValue::F32(c.logits_scaling));
    }
    for (const auto& [key, value] : metadata) wr.Set(key, value);
    if (c.bos_id >= 0 && !has_key("tokenizer.ggml.bos_token_id")) wr.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(c.bos_id));
    if (c.eos_id >= 0 && !has_key("tokenizer.ggml.eos_token_id")) wr.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(c.eos_id));
    for (size_t i = 0; i < tensors.size(); ++i)
      wr.AddTensor(tensors[i].name, tensor_dtype(tensors[i]), tensors[i].shape, tensor_data(i));
    return wr.Write(out_path);
  }
  if (format == ExportFormat::kGguf) {
    formats::GgufWriter wr;
    using formats::GgufValue;
    const std::string a = c.arch + ".";
    wr.Set("general.architecture", GgufValue::Str(c.arch));
    wr.Set("general.name", GgufValue::Str(c.name));
    wr.Set(a + "context_length", GgufValue::U32(static_cast<uint32_t>(c.max_context)));
    wr.Set(a + "embedding_length", GgufValue::U32(c.d_model));
    wr.Set(a + "block_count", GgufValue::U32(c.n_blocks));
    wr.Set(a + "feed_forward_length", GgufValue::U32(c.ffn_dim));
    wr.Set(a + "attention.head_count", GgufValue::U32(c.n_heads));
    wr.Set(a + "attention.head_count_kv", GgufValue::U32(c.n_kv_heads));
    wr.Set(a + "attention.key_length", GgufValue::U32(c.head_dim));
    wr.Set(a + "attention.value_length", GgufValue::U32(c.head_dim));
    wr.Set(a + "attention.layer_norm_rms_epsilon", GgufValue::F32(c.rms_eps));
    wr.Set(a + "rope.freq_base", GgufValue::F32(static_cast<float>(c.rope_theta)));
    wr.Set(a + "rope.dimension_count", GgufValue::U32(c.head_dim));
    for (const auto& [key, value] : metadata) wr.Set(key, value);
    if (c.bos_id >= 0 && !has_key("tokenizer.ggml.bos_token_id")) wr.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(c.bos_id));
    if (c.eos_id >= 0 && !has_key("tokenizer.ggml.eos_token_id")) wr.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(c.eos_id));
    for (size_t i = 0; i < tensors.size(); ++i)
      wr.AddTensor(tensors[i].name, tensor_dtype(tensors[i]), tensors[i].shape, tensor_data(i));
    return wr.Write(out_path);
  }
  // Hugging Face folder.
  std::error_code ec;
  fs::create_directories(out_path, ec);
  if (ec) return core::IoError(out_path + ": " + ec.message());
  if (c.arch == "llama") {
    for (auto& t : tensors) {
      if (t.name.find("attn_q.weight") != std::string::npos) t.data = UnpermuteLlamaRows(t.data, c.n_heads, c.head_dim, c.d_model);
      if (t.name.find("attn_k.weight") != std::string::npos) t.data = UnpermuteLlamaRows(t.data, c.n_kv_heads, c.head_dim, c.d_model);
    }
  }
  if (hybrid) {
    RADIXLM_RETURN_IF_ERROR(WriteHybridHf(c, tensors, dtype, out_path));
    return Status::Ok();
  }
  std::vector<formats::SafetensorsTensor> st_tensors;
  for (size_t i = 0; i < tensors.size(); ++i)
    st_tensors.push_back({HfName(c.arch, tensors[i].name), tensor_dtype(tensors[i]), tensors[i].shape, tensor_data(i)});
  RADIXLM_RETURN_IF_ERROR(formats::WriteSafetensorsFile((fs::path(out_path) / "model.safetensors").string(), st_tensors));
  json cfg = {{"architectures", {c.arch == "llama" ? "LlamaForCausalLM" : c.arch == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM"}},
              {"model_type", c.arch}, {"vocab_size", c.vocab_size}, {"hidden_size", c.d_model},
              {"num_hidden_layers", c.n_blocks}, {"intermediate_size", c.ffn_dim},
              {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
              {"head_dim", c.head_dim}, {"rms_norm_eps", c.rms_eps}, {"rope_theta", c.rope_theta},
              {"max_position_embeddings", c.max_context}, {"tie_word_embeddings", c.tied_embeddings},
              {"hidden_act", "silu"}, {"torch_dtype", dtype == DType::kF32 ? "float32" : dtype == DType::kBF16 ? "bfloat16" : "float16"}};
  if (c.bos_id >= 0) cfg["bos_token_id"] = c.bos_id;
  if (c.eos_id >= 0) cfg["eos_token_id"] = c.eos_id;
  if (c.rope_scaling.factor > 0)
    cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  std::ofstream(fs::path(out_path) / "config.json") << core::JsonText(cfg, 2) << "\n";
  return Status::Ok();
}

}  // namespace radixlm::models
