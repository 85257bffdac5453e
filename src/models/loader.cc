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

#include "core/memory_info.h"
#include "core/quant.h"
#include "core/random.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/arch.h"
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

// Tensors of a file store: by GGUF name, or (a Hugging Face folder) through the architecture's
// map to the checkpoint's names, slicing rows where the checkpoint stacks tensors.
class StoreSource : public WeightSource {
 public:
  StoreSource(const formats::TensorStore* store, const ArchSpec* hf_arch = nullptr, const ModelConfig* config = nullptr)
      : store_(store), arch_(hf_arch), config_(config) {}
  bool HfLayout() const override { return arch_ != nullptr; }
  bool Has(const std::string& name) const override { return store_->Find(Map(name).name) != nullptr; }
  static std::string ShapeText(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  StatusOr<TensorEntry> Get(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<float>* scratch) const override {
    const HfTensorRef ref = Map(name);
    StatusOr<const TensorEntry*> found = store_->Get(ref.name, shape);
    TensorEntry t;
    if (ref.rows < 0 && ref.expert < 0) {
      if (!found.ok()) return found.status();
      t = **found;
      if (ref.add != 0.0f) {  // converted to f32 in scratch, with the checkpoint's offset added
        scratch->resize(t.numel());
        core::ConvertToF32(t.dtype, t.data, scratch->data(), scratch->size());
        for (float& x : *scratch) x += ref.add;
        t.dtype = DType::kF32;
        t.data = scratch->data();
        t.nbytes = scratch->size() * sizeof(float);
      }
    } else if (ref.expert >= 0) {  // one expert (then rows of it) of a 3-D [experts, rows, cols] tensor
      const TensorEntry* whole = store_->Find(ref.name);
      const int64_t rows = ref.rows >= 0 ? ref.rows : (shape.empty() ? 0 : shape[0]);
      if (!whole || whole->shape.size() != 3 || shape.size() != 2 || ref.expert >= whole->shape[0] ||
          whole->shape[2] != shape[1] || shape[0] != rows || ref.row_begin + rows > whole->shape[1] ||
          (core::IsQuantized(whole->dtype) && shape[1] % core::BlockElems(whole->dtype) != 0))
        return core::DataLoss((whole ? whole->file : std::string("model")) + ": tensor '" + ref.name + "' lacks expert " +
                              std::to_string(ref.expert) + " as a [" + std::to_string(rows) + ", " +
                              std::to_string(shape.size() == 2 ? shape[1] : 0) + "] matrix for " + name +
                              (whole ? " (its shape is " + ShapeText(whole->shape) + ")" : " (no such tensor)"));
      const size_t row_bytes = core::RowBytes(whole->dtype, shape[1]);
      t = *whole;
      t.name = ref.name + "[expert " + std::to_string(ref.expert) + "]";
      t.shape = shape;
      t.data = static_cast<const uint8_t*>(whole->data) + row_bytes * (ref.expert * whole->shape[1] + ref.row_begin);
      t.nbytes = row_bytes * rows;
    } else {  // rows of a stacked tensor
      const TensorEntry* whole = store_->Find(ref.name);
      if (!whole || whole->shape.size() != 2 || shape.size() != 2 || shape[0] != ref.rows || whole->shape[1] != shape[1] ||
          ref.row_begin + ref.rows > whole->shape[0] || core::IsQuantized(whole->dtype))
        return core::DataLoss((whole ? whole->file : std::string("model")) + ": tensor '" + ref.name + "' lacks rows [" +
                              std::to_string(ref.row_begin) + ", " + std::to_string(ref.row_begin + ref.rows) + ") of " +
                              std::to_string(shape.size() == 2 ? shape[1] : 0) + " columns for " + name);
      t = *whole;
      t.name = ref.name + "[rows " + std::to_string(ref.row_begin) + ":" + std::to_string(ref.row_begin + ref.rows) + "]";
      t.shape = shape;
      t.data = static_cast<const uint8_t*>(whole->data) + core::RowBytes(whole->dtype, shape[1]) * ref.row_begin;
      t.nbytes = core::RowBytes(whole->dtype, shape[1]) * ref.rows;
    }
    // A NaN or inf weight (or block scale) would load and turn every logit NaN: refused here.
    if (const int64_t at = core::FirstNonFinite(t.dtype, t.data, t.numel()); at >= 0)
      return core::DataLoss(t.file + ": tensor '" + t.name + "' has a value that is not finite (NaN or inf) at " +
                            (core::IsQuantized(t.dtype) ? "block " : "element ") + std::to_string(at));
    if (const int64_t at = core::FirstOutOfRange(t.dtype, t.data, t.numel()); at >= 0)
      return core::DataLoss(t.file + ": tensor '" + t.name + "' block " + std::to_string(at) + " has an MXFP4 scale outside "
                            "2^-24 .. 2^15 with nonzero values (radixlm's kernels carry the scale as an f16)");
    return t;
  }

 private:
  HfTensorRef Map(const std::string& n) const { return arch_ ? arch_->hf_tensor(*config_, n) : StackedExpert(n); }
  const formats::TensorStore* store_;
  const ArchSpec* arch_;       // null: GGUF names
  const ModelConfig* config_;
};

// Seeded random weights: linear weights and embeddings N(0, 0.02), biases N(0, 0.02), norm
// weights N(1, 0.1) (not all ones, so tests notice a norm weight applied to the wrong axis).
// Each tensor's values depend only on (seed, name), so presets are stable as code changes.
class RandomSource : public WeightSource {
 public:
  RandomSource(const ModelConfig& c, uint64_t seed, core::ThreadPool& pool) : config_(c), seed_(seed), pool_(pool) {}
  bool Has(const std::string& name) const override {
    if (name == "output.weight") return !config_.tied_embeddings;
    if (name.find("layer_output_scale") != std::string::npos) return false;  // Gemma 4's, optional there
    if (name.find("ffn_gate_inp_shexp") != std::string::npos) return config_.moe.shared_gate;
    if (name.find("ffn_gate_inp") != std::string::npos) return true;
    if (name.find("exp_probs_b") != std::string::npos) return config_.moe.selection_bias;
    if (name.find("ffn_gate_up_exps") != std::string::npos) return false;  // generated unfused
    if (name.find("_shexp") != std::string::npos && config_.moe.shared_ffn == 0) return false;
    if (name.find("ssm_conv1d.bias") != std::string::npos) return config_.ssm_conv_bias;
    if (name.find("ssm_dt.bias") != std::string::npos) return true;
    if (name.find(".bias") != std::string::npos) return config_.qkv_bias;
    if (name.find("ffn_gate") != std::string::npos) return config_.mlp_gated();
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

// Gated DeltaNet in llama.cpp's GGUF names: attn_qkv (q | k | v), attn_gate (z), ssm_beta,
// ssm_alpha (stacked into one in-projection), ssm_conv1d [conv_dim, d_conv], ssm_dt.bias, ssm_a
// (= -exp(A_log)), ssm_norm [head_dim], ssm_out.
StatusOr<DeltaNetLayerWeights> BuildDeltaNet(const ModelConfig& c, const WeightSource& src, int block, const WeightPlan& storage) {
  const kernels::DeltaNetDims g = c.gdn_dims();
  const int64_t d = c.d_model, cd = g.conv_dim(), vd = g.value_dim(), hv = g.v_heads, K = g.d_conv;
  DeltaNetLayerWeights m;
  RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, Blk(block, "attn_norm.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m.in_proj, GetStacked(src, {Blk(block, "attn_qkv.weight"), Blk(block, "attn_gate.weight"),
                                                       Blk(block, "ssm_beta.weight"), Blk(block, "ssm_alpha.weight")},
                                                 {cd, vd, hv, hv}, d, storage));
  const std::vector<int64_t> conv_shape = src.HfLayout() ? std::vector<int64_t>{cd, 1, K} : std::vector<int64_t>{cd, K};
  RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> conv, GetShaped(src, Blk(block, "ssm_conv1d.weight"), conv_shape));
  m.conv_w.resize(K * cd);
  for (int64_t ch = 0; ch < cd; ++ch)
    for (int64_t k = 0; k < K; ++k) m.conv_w[k * cd + ch] = conv[ch * K + k];
  RADIXLM_ASSIGN_OR_RETURN(m.dt_bias, GetVector(src, Blk(block, "ssm_dt.bias"), hv));
  RADIXLM_ASSIGN_OR_RETURN(m.A, GetVector(src, Blk(block, "ssm_a"), hv));
  if (src.HfLayout())
    for (float& a : m.A) a = -std::exp(a);  // the checkpoint holds A_log
  RADIXLM_ASSIGN_OR_RETURN(m.out_norm, GetVector(src, Blk(block, "ssm_norm.weight"), g.head_dim));
  RADIXLM_ASSIGN_OR_RETURN(m.out_proj, GetStacked(src, {Blk(block, "ssm_out.weight")}, {d}, vd, storage));
  return m;
}

// LFM2's short convolution in llama.cpp's GGUF names: attn_norm (operator_norm),
// shortconv.in_proj [3 d, d] (B | C | x), shortconv.conv [d, L] (HF: conv.weight [d, 1, L]),
// shortconv.out_proj [d, d].
StatusOr<ShortConvLayerWeights> BuildShortConv(const ModelConfig& c, const WeightSource& src, int block,
                                               const WeightPlan& storage) {
  const int64_t d = c.d_model, L = c.short_conv;
  ShortConvLayerWeights m;
  RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, Blk(block, "attn_norm.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m.in_proj, GetStacked(src, {Blk(block, "shortconv.in_proj.weight")}, {3 * d}, d, storage));
  const std::vector<int64_t> conv_shape = src.HfLayout() ? std::vector<int64_t>{d, 1, L} : std::vector<int64_t>{d, L};
  RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> conv, GetShaped(src, Blk(block, "shortconv.conv.weight"), conv_shape));
  m.conv_w.resize(L * d);
  for (int64_t ch = 0; ch < d; ++ch)
    for (int64_t k = 0; k < L; ++k) m.conv_w[k * d + ch] = conv[ch * L + k];
  RADIXLM_ASSIGN_OR_RETURN(m.out_proj, GetStacked(src, {Blk(block, "shortconv.out_proj.weight")}, {d}, d, storage));
  return m;
}

// The second norm of a mixer + feed-forward block, or the block's only norm (Nemotron-H).
std::string FeedForwardNorm(const ModelConfig& c, int block) {
  return Blk(block, c.block_per_sublayer ? "attn_norm.weight" : (c.mlp_norm_tensor + ".weight").c_str());
}

// gpt-oss's router and expert biases: ffn_gate_inp.bias [experts], ffn_{gate,up}_exps.bias
// [experts, ffn] (interleaved per expert as gate_up's rows are) and ffn_down_exps.bias
// [experts, d].
Status LoadMoeBiases(const ModelConfig& c, const WeightSource& src, int block, MoeLayerWeights* m) {
  const MoeConfig& mc = c.moe;
  const int64_t E = mc.experts, f = mc.ffn, d = c.d_model;
  if (mc.router_bias) {
    RADIXLM_ASSIGN_OR_RETURN(m->router_bias, GetVector(src, Blk(block, "ffn_gate_inp.bias"), E));
  }
  if (!mc.expert_bias) return Status::Ok();
  RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> gate, GetShaped(src, Blk(block, "ffn_gate_exps.bias"), {E, f}));
  RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> up, GetShaped(src, Blk(block, "ffn_up_exps.bias"), {E, f}));
  RADIXLM_ASSIGN_OR_RETURN(m->down_bias, GetShaped(src, Blk(block, "ffn_down_exps.bias"), {E, d}));
  m->gate_up_bias.reserve(2 * E * f);
  for (int64_t e = 0; e < E; ++e) {
    m->gate_up_bias.insert(m->gate_up_bias.end(), gate.begin() + e * f, gate.begin() + (e + 1) * f);
    m->gate_up_bias.insert(m->gate_up_bias.end(), up.begin() + e * f, up.begin() + (e + 1) * f);
  }
  return Status::Ok();
}

// Gemma 4's dense-branch norms and scales (MoeConfig::dense_branch): ffn_gate_inp.scale [d],
// ffn_down_exps.scale [experts] (optional), pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2
// and post_ffw_norm [d].
Status LoadDenseBranch(const ModelConfig& c, const WeightSource& src, int block, MoeLayerWeights* m) {
  const int64_t d = c.d_model;
  m->router_norm.assign(d, 1.0f);  // weightless: x / rms(x) * 1 is exact
  RADIXLM_ASSIGN_OR_RETURN(m->router_scale, GetVector(src, Blk(block, "ffn_gate_inp.scale"), d));
  if (src.Has(Blk(block, "ffn_down_exps.scale"))) {
    RADIXLM_ASSIGN_OR_RETURN(m->down_scale, GetVector(src, Blk(block, "ffn_down_exps.scale"), c.moe.experts));
  }
  RADIXLM_ASSIGN_OR_RETURN(m->expert_norm, GetVector(src, Blk(block, "pre_ffw_norm_2.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m->dense_post_norm, GetVector(src, Blk(block, "post_ffw_norm_1.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m->expert_post_norm, GetVector(src, Blk(block, "post_ffw_norm_2.weight"), d));
  RADIXLM_ASSIGN_OR_RETURN(m->post_norm, GetVector(src, Blk(block, "post_ffw_norm.weight"), d));
  return Status::Ok();
}

// A mixture-of-experts layer in llama.cpp's GGUF names: ffn_gate_inp (router) [experts, d],
// exp_probs_b.bias (selection bias), ffn_{gate,up,down}_exps [experts, ...] (one expert at a
// time: ExpertName), ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp [1, d] (shared expert).
StatusOr<MoeLayerWeights> BuildMoe(const ModelConfig& c, const WeightSource& src, int block, const WeightPlan& storage) {
  const MoeConfig& mc = c.moe;
  const int64_t d = c.d_model, f = mc.ffn;
  const bool gated = c.mlp_gated();
  MoeLayerWeights m;
  RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, FeedForwardNorm(c, block), d));
  const WeightPlan f32{DType::kF32, kernels::Bf16Mode::kExact};
  RADIXLM_ASSIGN_OR_RETURN(m.router, GetStacked(src, {Blk(block, "ffn_gate_inp.weight")}, {mc.experts}, d, f32));
  if (mc.selection_bias) {
    RADIXLM_ASSIGN_OR_RETURN(m.selection_bias, GetVector(src, Blk(block, "exp_probs_b.bias"), mc.experts));
  }
  RADIXLM_RETURN_IF_ERROR(LoadMoeBiases(c, src, block, &m));
  // Every expert's slice must start on a panel of 16 rows (kernels::GemmGrouped).
  if ((gated ? 2 * f : f) % kernels::kPanelCols != 0 || d % kernels::kPanelCols != 0)
    return core::Unimplemented(c.name + ": expert MLP size " + std::to_string(f) + " and width " + std::to_string(d) +
                               " must be multiples of 16 (8 with a gate)");
  // llama.cpp's converter may fuse gate and up (--fuse-gate-up-exps: ffn_gate_up_exps, gate rows first).
  const bool fused = gated && src.Has(Blk(block, "ffn_gate_up_exps.weight"));
  std::vector<std::string> in, out;
  for (int64_t e = 0; e < mc.experts; ++e) {
    if (fused) in.push_back(ExpertName(block, "ffn_gate_up_exps", e));
    if (gated && !fused) in.push_back(ExpertName(block, "ffn_gate_exps", e));
    if (!fused) in.push_back(ExpertName(block, "ffn_up_exps", e));
    out.push_back(ExpertName(block, "ffn_down_exps", e));
  }
  RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, in, std::vector<int64_t>(in.size(), fused ? 2 * f : f), d, storage));
  RADIXLM_ASSIGN_OR_RETURN(m.down, GetStacked(src, out, std::vector<int64_t>(out.size(), d), f, storage));
  if (mc.dense_branch) RADIXLM_RETURN_IF_ERROR(LoadDenseBranch(c, src, block, &m));
  if (mc.shared_ffn > 0) {
    // The shared expert; Gemma 4's dense MLP beside the experts has the dense names.
    const int64_t sf = mc.shared_ffn;
    const char* up = mc.dense_branch ? "ffn_up.weight" : "ffn_up_shexp.weight";
    std::vector<std::string> in = {Blk(block, up)};
    if (gated) in.insert(in.begin(), Blk(block, mc.dense_branch ? "ffn_gate.weight" : "ffn_gate_shexp.weight"));
    RADIXLM_ASSIGN_OR_RETURN(m.shared_gate_up, GetStacked(src, in, std::vector<int64_t>(in.size(), sf), d, storage));
    RADIXLM_ASSIGN_OR_RETURN(m.shared_down, GetStacked(src, {Blk(block, mc.dense_branch ? "ffn_down.weight" : "ffn_down_shexp.weight")},
                                                       {d}, sf, storage));
    if (mc.shared_gate) {
      RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> g, GetShaped(src, Blk(block, "ffn_gate_inp_shexp.weight"), {1, d}));
      m.shared_gate = kernels::PackedWeight::Pack(g.data(), DType::kF32, 1, d, DType::kF32);
    }
  }
  return m;
}

// An attention layer in llama.cpp's GGUF names: attn_norm, attn_{q,k,v} (stacked into one
// projection; q twice as tall with an output gate), their biases (qkv_bias), attn_{q,k}_norm
// (qk_norm) and attn_output, in attention layer `index`'s shape: a layer reading another's KV
// (Gemma 4) has only attn_q, and with attn_v_optional a layer may lack attn_v (V = K's
// projection). kv_index is the layer whose KV it reads.
StatusOr<AttentionLayerWeights> BuildAttention(const ModelConfig& c, const WeightSource& src, int block, int index,
                                               const WeightPlan& storage) {
  const int64_t d = c.d_model, hd = c.AttnHeadDim(index), q = c.n_heads * hd, kv = c.AttnKvHeads(index) * hd;
  AttentionLayerWeights a;
  a.head_dim = static_cast<int>(hd);
  a.n_kv_heads = c.AttnKvHeads(index);
  a.kv_index = c.KvSource(index);
  a.writes_kv = c.OwnsKv(index);
  a.v_from_k = a.writes_kv && c.attn_v_optional && !src.Has(Blk(block, "attn_v.weight"));
  RADIXLM_ASSIGN_OR_RETURN(a.norm, GetVector(src, Blk(block, "attn_norm.weight"), d));
  const int64_t q_rows = c.attn_output_gate ? 2 * q : q;  // [q_h | gate_h] per head
  std::vector<std::string> names = {Blk(block, "attn_q.weight")};
  std::vector<int64_t> rows = {q_rows};
  if (a.writes_kv) {
    names.push_back(Blk(block, "attn_k.weight"));
    rows.push_back(kv);
  }
  if (a.writes_kv && !a.v_from_k) {
    names.push_back(Blk(block, "attn_v.weight"));
    rows.push_back(kv);
  }
  RADIXLM_ASSIGN_OR_RETURN(a.qkv, GetStacked(src, names, rows, d, storage));
  if (c.qkv_bias) {
    for (const char* n : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
      RADIXLM_ASSIGN_OR_RETURN(auto b, GetVector(src, Blk(block, n), n[5] == 'q' ? q : kv));
      a.qkv_bias.insert(a.qkv_bias.end(), b.begin(), b.end());
    }
  }
  if (c.qk_norm) {
    RADIXLM_ASSIGN_OR_RETURN(a.q_norm, GetVector(src, Blk(block, "attn_q_norm.weight"), hd));
    if (a.writes_kv) {
      RADIXLM_ASSIGN_OR_RETURN(a.k_norm, GetVector(src, Blk(block, "attn_k_norm.weight"), hd));
    }
  }
  if (c.v_norm && a.writes_kv) a.v_norm.assign(hd, 1.0f);  // weightless: x / rms(x) * 1 is exact
  RADIXLM_ASSIGN_OR_RETURN(a.o, GetStacked(src, {Blk(block, "attn_output.weight")}, {d}, q, storage));
  if (c.post_norms) {
    RADIXLM_ASSIGN_OR_RETURN(a.post_norm, GetVector(src, Blk(block, "post_attention_norm.weight"), d));
  }
  if (c.attn_output_bias) {
    RADIXLM_ASSIGN_OR_RETURN(a.o_bias, GetVector(src, Blk(block, "attn_output.bias"), d));
  }
  if (c.attn_sinks) {
    RADIXLM_ASSIGN_OR_RETURN(a.sinks, GetVector(src, Blk(block, "attn_sinks.weight"), c.n_heads));
  }
  return a;
}

// A dense MLP (MLP layer `index`): its norm, ffn_gate and ffn_up stacked (ffn_up alone for
// relu^2), ffn_down.
StatusOr<MlpLayerWeights> BuildMlp(const ModelConfig& c, const WeightSource& src, int block, int index,
                                   const WeightPlan& storage) {
  const int64_t d = c.d_model, f = c.MlpFfn(index);
  MlpLayerWeights m;
  m.ffn = static_cast<int>(f);
  // A block of its own (Nemotron-H) has one norm; a mixer + MLP block has a second one.
  RADIXLM_ASSIGN_OR_RETURN(m.norm, GetVector(src, FeedForwardNorm(c, block), d));
  if (!c.mlp_gated()) {
    RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, {Blk(block, "ffn_up.weight")}, {f}, d, storage));
  } else {
    RADIXLM_ASSIGN_OR_RETURN(m.gate_up, GetStacked(src, {Blk(block, "ffn_gate.weight"), Blk(block, "ffn_up.weight")},
                                                   {f, f}, d, storage));
  }
  RADIXLM_ASSIGN_OR_RETURN(m.down, GetStacked(src, {Blk(block, "ffn_down.weight")}, {d}, f, storage));
  if (c.post_norms) {
    RADIXLM_ASSIGN_OR_RETURN(m.post_norm, GetVector(src, Blk(block, "post_ffw_norm.weight"), d));
  }
  return m;
}

// A lookup table [vocab, d] (token_embd of a model whose embeddings are not tied; a tied model
// looks its rows up in lm_head; Gemma 4's per_layer_token_embd).
Status LoadTable(const ModelConfig& c, const WeightSource& src, const WeightPlan& storage, const std::string& name,
                 int64_t d, core::AlignedBuffer* out, DType* out_dtype) {
  std::vector<float> scratch;
  RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, src.Get(name, {c.vocab_size, d}, &scratch));
  // A quantised table stays quantised (a row is dequantised per lookup); otherwise it is kept
  // in the linear weights' type (f32 -> bf16 conversion when asked).
  if (core::IsQuantized(e.dtype) && !storage.forced) {
    if (d % core::BlockElems(e.dtype) != 0) return core::DataLoss(e.file + ": " + name + " rows are not whole blocks");
    *out_dtype = e.dtype;
    out->Resize(core::RowBytes(e.dtype, d) * c.vocab_size);
    std::memcpy(out->data(), e.data, out->size());
  } else {
    const DType table = storage.forced.value_or(DefaultStorage(core::IsQuantized(e.dtype) ? DType::kBF16 : e.dtype));
    *out_dtype = table;
    out->Resize(static_cast<size_t>(e.numel()) * core::DTypeSize(table));
    std::vector<float> row(d);
    for (int64_t r = 0; r < c.vocab_size; ++r) {
      core::ConvertToF32(e.dtype, static_cast<const uint8_t*>(e.data) + r * core::RowBytes(e.dtype, d), row.data(), d);
      for (int64_t k = 0; k < d; ++k) {
        if (table == DType::kF32) out->as<float>()[r * d + k] = row[k];
        else out->as<uint16_t>()[r * d + k] = core::F32ToBf16(row[k]);
      }
    }
  }
  return core::Status::Ok();
}

// Gemma 4: the per-layer input weights (per_layer_input > 0) and each block's end
// (BlockEndWeights: inp_gate, proj, post_norm; layer_output_scale where the file has it).
// Nothing for a model with neither.
Status BuildBlockEnds(const ModelConfig& c, const WeightSource& src, const WeightPlan& storage, TransformerWeights* w) {
  const int64_t d = c.d_model, P = c.per_layer_input;
  bool any_scale = false;
  for (int b = 0; b < c.n_blocks; ++b) any_scale |= src.Has(Blk(b, "layer_output_scale.weight"));
  if (P == 0 && !any_scale) return Status::Ok();
  if (P > 0) {
    PerLayerInputWeights& pl = w->per_layer;
    RADIXLM_RETURN_IF_ERROR(LoadTable(c, src, storage, "per_layer_token_embd.weight", c.n_blocks * P, &pl.table, &pl.table_dtype));
    RADIXLM_ASSIGN_OR_RETURN(pl.model_proj, GetStacked(src, {"per_layer_model_proj.weight"}, {c.n_blocks * P}, d, storage));
    RADIXLM_ASSIGN_OR_RETURN(pl.proj_norm, GetVector(src, "per_layer_proj_norm.weight", P));
  }
  for (int b = 0; b < c.n_blocks; ++b) {
    BlockEndWeights e;
    if (P > 0) {
      RADIXLM_ASSIGN_OR_RETURN(e.gate, GetStacked(src, {Blk(b, "inp_gate.weight")}, {P}, d, storage));
      RADIXLM_ASSIGN_OR_RETURN(e.proj, GetStacked(src, {Blk(b, "proj.weight")}, {d}, P, storage));
      RADIXLM_ASSIGN_OR_RETURN(e.post_norm, GetVector(src, Blk(b, "post_norm.weight"), d));
    }
    if (src.Has(Blk(b, "layer_output_scale.weight"))) {
      RADIXLM_ASSIGN_OR_RETURN(const std::vector<float> scale, GetVector(src, Blk(b, "layer_output_scale.weight"), 1));
      if (!std::isfinite(scale[0])) return core::DataLoss(c.name + ": " + Blk(b, "layer_output_scale.weight") + " is not finite");
      e.output_scale = scale[0];
    }
    w->block_end.push_back(std::move(e));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Transformer>> Build(const ModelConfig& c, const WeightSource& src, const WeightPlan& storage) {
  const std::string problem = c.Validate();
  if (!problem.empty()) return core::InvalidArgument(c.name + ": " + problem);
  TransformerWeights w;
  const int64_t d = c.d_model, hd = c.head_dim;
  const std::vector<int> blocks = c.SublayerBlocks();
  int kv_index = 0, state_index = 0;
  for (size_t li = 0; li < c.layers.size(); ++li) {
    const int block = blocks[li];
    if (c.layers[li] == LayerKind::kAttention) {
      RADIXLM_ASSIGN_OR_RETURN(AttentionLayerWeights a, BuildAttention(c, src, block, kv_index, storage));
      a.window = c.layer_window.empty() ? 0 : c.layer_window[kv_index];
      ++kv_index;
      w.attention.push_back(std::move(a));
    } else if (c.layers[li] == LayerKind::kMlp) {
      RADIXLM_ASSIGN_OR_RETURN(MlpLayerWeights m, BuildMlp(c, src, block, static_cast<int>(w.mlp.size()), storage));
      w.mlp.push_back(std::move(m));
    } else if (c.layers[li] == LayerKind::kMoe) {
      RADIXLM_ASSIGN_OR_RETURN(MoeLayerWeights m, BuildMoe(c, src, block, storage));
      w.moe.push_back(std::move(m));
    } else if (c.layers[li] == LayerKind::kMamba2) {
      RADIXLM_ASSIGN_OR_RETURN(Mamba2LayerWeights m, BuildMamba2(c, src, block, storage));
      m.state_index = state_index++;
      w.mamba.push_back(std::move(m));
    } else if (c.layers[li] == LayerKind::kShortConv) {
      RADIXLM_ASSIGN_OR_RETURN(ShortConvLayerWeights m, BuildShortConv(c, src, block, storage));
      m.state_index = state_index++;
      w.short_conv.push_back(std::move(m));
    } else {
      RADIXLM_ASSIGN_OR_RETURN(DeltaNetLayerWeights m, BuildDeltaNet(c, src, block, storage));
      m.state_index = state_index++;
      w.deltanet.push_back(std::move(m));
    }
  }
  RADIXLM_ASSIGN_OR_RETURN(w.final_norm, GetVector(src, c.final_norm_tensor + ".weight", d));
  // Untied embeddings need their own output matrix: using the input table in its place would
  // load without a word and compute other logits (transformers, too, refuses to guess here).
  const bool tied = c.tied_embeddings;
  if (!tied && !src.Has("output.weight"))
    return core::DataLoss(c.name + ": the embeddings are not tied (tie_word_embeddings false) but the model has no "
                          "output matrix (lm_head.weight / output.weight)");
  RADIXLM_ASSIGN_OR_RETURN(w.lm_head, GetStacked(src, {tied ? "token_embd.weight" : "output.weight"}, {c.vocab_size}, d, storage));
  if (!tied) RADIXLM_RETURN_IF_ERROR(LoadTable(c, src, storage, "token_embd.weight", d, &w.embedding, &w.embedding_dtype));
  RADIXLM_RETURN_IF_ERROR(BuildBlockEnds(c, src, storage, &w));
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
  RADIXLM_ASSIGN_OR_RETURN(const std::string arch, g.GetString("general.architecture"));
  const ArchSpec* spec = ArchByGguf(arch);
  if (!spec) return core::Unimplemented(g.path() + ": architecture '" + arch + "' is not supported (" + SupportedGgufArchs() + ")");
  return spec->from_gguf(g);
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

// Tensors of blocks the metadata does not have (block_count lowered to 3 of 4 loaded and ran
// three blocks of the four): the file contradicts itself.
Status CheckGgufBlocks(const formats::GgufFile& g, const ModelConfig& c) {
  for (const auto& [name, e] : g.tensors().entries()) {
    if (name.rfind("blk.", 0) != 0) continue;
    const int64_t block = std::strtoll(name.c_str() + 4, nullptr, 10);
    if (block >= c.n_blocks)
      return core::DataLoss(g.path() + ": tensor '" + name + "' belongs to block " + std::to_string(block) + ", but the file's " +
                            "block_count is " + std::to_string(c.n_blocks));
  }
  return core::Status::Ok();
}

StatusOr<ModelConfig> ConfigFromGgufChecked(const formats::GgufFile& g) {
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, ConfigFromGguf(g));
  RADIXLM_RETURN_IF_ERROR(g.TypeError());  // a key of the wrong type, read as its default
  RADIXLM_RETURN_IF_ERROR(CheckGgufVocabulary(g, c));
  RADIXLM_RETURN_IF_ERROR(CheckGgufBlocks(g, c));
  return c;
}

StatusOr<ModelConfig> ConfigFromHf(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in) return core::NotFound(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return core::DataLoss(path.string() + ": not valid JSON");
  if (!j.contains("model_type") || !j["model_type"].is_string())
    return core::DataLoss(path.string() + ": 'model_type' is missing or not a string");
  const std::string type = j["model_type"].get<std::string>();
  const ArchSpec* spec = ArchByHfType(type);
  if (!spec) return core::Unimplemented(path.string() + ": model_type '" + type + "' is not supported (" + SupportedHfTypes() + ")");
  return spec->from_hf(j, path.string(), dir);
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

// What the weights will take in memory once loaded: a file's own types stay as they are (its
// size), a forced type costs its element size per parameter, a random preset is f32.
int64_t WeightBytesEstimate(const std::string& spec, const ModelConfig& c, const LoadOptions& options) {
  const int64_t params = c.ParameterCount();
  if (options.dtype) return params * static_cast<int64_t>(core::DTypeSize(*options.dtype));
  if (IsRandom(spec)) return params * 4;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    int64_t bytes = 0;
    for (const auto& e : fs::directory_iterator(spec, ec))
      if (e.path().extension() == ".safetensors") bytes += static_cast<int64_t>(e.file_size(ec));
    return bytes;
  }
  const auto size = fs::file_size(spec, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

// Refuses a load that cannot fit: the weights and the caller's reservation (its KV pool) against
// the memory available, before a byte of weights is read or allocated.
Status CheckFitsInMemory(const std::string& spec, const LoadOptions& options) {
  const int64_t avail = core::AvailableMemoryBytes();
  if (avail < 0) return Status::Ok();
  const StatusOr<ModelConfig> config = LoadConfig(spec);
  if (!config.ok()) return Status::Ok();  // the load itself says what is wrong with the model
  const ModelConfig& c = *config;
  const int64_t weights = WeightBytesEstimate(spec, c, options);
  const int64_t need = weights + std::max<int64_t>(0, options.reserve_bytes);
  if (need <= avail) return Status::Ok();
  std::string msg = "model '" + spec + "' needs " + core::HumanBytes(double(weights)) + " for its weights";
  if (options.reserve_bytes > 0)
    msg += " and " + core::HumanBytes(double(options.reserve_bytes)) + " for " +
           (options.reserve_what.empty() ? std::string("its KV pool") : options.reserve_what);
  msg += ", but " + core::HumanBytes(double(avail)) + " of memory is available";
  if (c.CountLayers(LayerKind::kMoe) > 0)
    msg += " (a mixture of experts keeps all " + std::to_string(c.moe.experts) + " experts of every layer in memory, " +
           "though a token uses " + std::to_string(c.moe.used) + ")";
  msg += ": use a smaller quantisation";
  if (options.reserve_bytes > 0) msg += ", fewer --kv-tokens";
  return core::ResourceExhausted(msg + " or free memory");
}

StatusOr<std::unique_ptr<Transformer>> LoadModelUnguarded(const std::string& spec, const LoadOptions& options) {
  RADIXLM_RETURN_IF_ERROR(CheckFitsInMemory(spec, options));
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
    const ArchSpec* arch = ArchByGguf(c.arch);
    StoreSource src(store.get(), arch, &c);
    const TensorEntry* any = store->Find(arch->hf_tensor(c, "token_embd.weight").name);
    if (options.ssm_chunk) c.ssm_chunk = *options.ssm_chunk;
    return Build(c, src, PlanOf(options, any ? any->dtype : DType::kF32));
  }
  if (!fs::exists(spec))
    return core::NotFound("model '" + spec + "': no such file or folder (or use random:NAME; presets: " +
                          [] { std::string s; for (auto& n : RandomPresetNames()) s += (s.empty() ? "" : ", ") + n; return s; }() + ")");
  RADIXLM_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::Open(spec));
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, ConfigFromGgufChecked(g));
  StoreSource src(&g.tensors());
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

using TensorList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

void AttentionTensors(const ModelConfig& c, int b, TensorList* want) {
  const int64_t d = c.d_model, hd = c.head_dim, q = c.n_heads * hd, kv = c.n_kv_heads * hd;
  want->push_back({Blk(b, "attn_norm.weight"), {d}});
  want->push_back({Blk(b, "attn_q.weight"), {c.attn_output_gate ? 2 * q : q, d}});
  want->push_back({Blk(b, "attn_k.weight"), {kv, d}});
  want->push_back({Blk(b, "attn_v.weight"), {kv, d}});
  if (c.qkv_bias) {
    want->push_back({Blk(b, "attn_q.bias"), {q}});
    want->push_back({Blk(b, "attn_k.bias"), {kv}});
    want->push_back({Blk(b, "attn_v.bias"), {kv}});
  }
  if (c.qk_norm) {
    want->push_back({Blk(b, "attn_q_norm.weight"), {hd}});
    want->push_back({Blk(b, "attn_k_norm.weight"), {hd}});
  }
  want->push_back({Blk(b, "attn_output.weight"), {d, q}});
  if (c.attn_output_bias) want->push_back({Blk(b, "attn_output.bias"), {d}});
  if (c.attn_sinks) want->push_back({Blk(b, "attn_sinks.weight"), {c.n_heads}});
  if (c.post_norms) want->push_back({Blk(b, "post_attention_norm.weight"), {d}});
}

void MlpTensors(const ModelConfig& c, int b, TensorList* want) {
  const int64_t d = c.d_model;
  want->push_back({FeedForwardNorm(c, b), {d}});
  if (c.mlp_gated()) want->push_back({Blk(b, "ffn_gate.weight"), {c.ffn_dim, d}});
  want->push_back({Blk(b, "ffn_up.weight"), {c.ffn_dim, d}});
  want->push_back({Blk(b, "ffn_down.weight"), {d, c.ffn_dim}});
  if (c.post_norms) want->push_back({Blk(b, "post_ffw_norm.weight"), {d}});
}

// Experts are listed one by one (ExpertName) and stacked into their 3-D tensor by AllTensors.
void MoeTensors(const ModelConfig& c, int b, TensorList* want) {
  const int64_t d = c.d_model, f = c.moe.ffn, sf = c.moe.shared_ffn;
  const bool gated = c.mlp_gated();
  want->push_back({FeedForwardNorm(c, b), {d}});
  want->push_back({Blk(b, "ffn_gate_inp.weight"), {c.moe.experts, d}});
  if (c.moe.selection_bias) want->push_back({Blk(b, "exp_probs_b.bias"), {c.moe.experts}});
  if (c.moe.router_bias) want->push_back({Blk(b, "ffn_gate_inp.bias"), {c.moe.experts}});
  if (c.moe.expert_bias) {
    want->push_back({Blk(b, "ffn_gate_exps.bias"), {c.moe.experts, f}});
    want->push_back({Blk(b, "ffn_up_exps.bias"), {c.moe.experts, f}});
    want->push_back({Blk(b, "ffn_down_exps.bias"), {c.moe.experts, d}});
  }
  for (const char* stem : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    if (!gated && stem[4] == 'g') continue;
    for (int64_t e = 0; e < c.moe.experts; ++e)
      want->push_back({ExpertName(b, stem, e), stem[4] == 'd' ? std::vector<int64_t>{d, f} : std::vector<int64_t>{f, d}});
  }
  if (sf > 0) {
    if (gated) want->push_back({Blk(b, "ffn_gate_shexp.weight"), {sf, d}});
    want->push_back({Blk(b, "ffn_up_shexp.weight"), {sf, d}});
    want->push_back({Blk(b, "ffn_down_shexp.weight"), {d, sf}});
    if (c.moe.shared_gate) want->push_back({Blk(b, "ffn_gate_inp_shexp.weight"), {1, d}});
  }
}

void Mamba2Tensors(const ModelConfig& c, int b, bool gguf_shapes, TensorList* want) {
  const int64_t d = c.d_model;
  const kernels::Mamba2Dims sd = c.ssm_dims();
  want->push_back({Blk(b, "attn_norm.weight"), {d}});
  want->push_back({Blk(b, "ssm_in.weight"), {sd.d_inner() + sd.conv_dim() + sd.n_heads, d}});
  want->push_back({Blk(b, "ssm_conv1d.weight"), {sd.conv_dim(), sd.d_conv}});
  if (c.ssm_conv_bias) want->push_back({Blk(b, "ssm_conv1d.bias"), {sd.conv_dim()}});
  want->push_back({Blk(b, "ssm_dt.bias"), {sd.n_heads}});
  const std::vector<int64_t> head = gguf_shapes ? std::vector<int64_t>{sd.n_heads, 1} : std::vector<int64_t>{sd.n_heads};
  want->push_back({Blk(b, "ssm_a"), head});
  want->push_back({Blk(b, "ssm_d"), head});
  want->push_back({Blk(b, "ssm_norm.weight"), gguf_shapes ? std::vector<int64_t>{sd.n_groups, sd.d_inner() / sd.n_groups}
                                                          : std::vector<int64_t>{sd.d_inner()}});
  want->push_back({Blk(b, "ssm_out.weight"), {d, sd.d_inner()}});
}

void DeltaNetTensors(const ModelConfig& c, int b, TensorList* want) {
  const int64_t d = c.d_model;
  const kernels::DeltaNetDims g = c.gdn_dims();
  want->push_back({Blk(b, "attn_norm.weight"), {d}});
  want->push_back({Blk(b, "attn_qkv.weight"), {g.conv_dim(), d}});
  want->push_back({Blk(b, "attn_gate.weight"), {g.value_dim(), d}});
  want->push_back({Blk(b, "ssm_beta.weight"), {g.v_heads, d}});
  want->push_back({Blk(b, "ssm_alpha.weight"), {g.v_heads, d}});
  want->push_back({Blk(b, "ssm_conv1d.weight"), {g.conv_dim(), g.d_conv}});
  want->push_back({Blk(b, "ssm_dt.bias"), {g.v_heads}});
  want->push_back({Blk(b, "ssm_a"), {g.v_heads}});
  want->push_back({Blk(b, "ssm_norm.weight"), {g.head_dim}});
  want->push_back({Blk(b, "ssm_out.weight"), {d, g.value_dim()}});
}

void ShortConvTensors(const ModelConfig& c, int b, TensorList* want) {
  const int64_t d = c.d_model;
  want->push_back({Blk(b, "attn_norm.weight"), {d}});
  want->push_back({Blk(b, "shortconv.in_proj.weight"), {3 * d, d}});
  want->push_back({Blk(b, "shortconv.conv.weight"), {d, c.short_conv}});
  want->push_back({Blk(b, "shortconv.out_proj.weight"), {d, d}});
}

// `done` is called on each tensor once it is complete.
std::vector<NamedTensor> AllTensors(const ModelConfig& c, const WeightSource& src, Status* status, bool gguf_shapes,
                                    const std::function<void(NamedTensor*)>& done = nullptr) {
  const int64_t d = c.d_model;
  TensorList want = {{"token_embd.weight", {c.vocab_size, d}}};
  const std::vector<int> blocks = c.SublayerBlocks();
  for (size_t li = 0; li < c.layers.size(); ++li) {
    switch (c.layers[li]) {
      case LayerKind::kAttention: AttentionTensors(c, blocks[li], &want); break;
      case LayerKind::kMlp: MlpTensors(c, blocks[li], &want); break;
      case LayerKind::kMamba2: Mamba2Tensors(c, blocks[li], gguf_shapes, &want); break;
      case LayerKind::kDeltaNet: DeltaNetTensors(c, blocks[li], &want); break;
      case LayerKind::kShortConv: ShortConvTensors(c, blocks[li], &want); break;
      case LayerKind::kMoe: MoeTensors(c, blocks[li], &want); break;
    }
  }
  want.push_back({c.final_norm_tensor + ".weight", {d}});
  if (!c.tied_embeddings) want.push_back({"output.weight", {c.vocab_size, d}});
  std::vector<NamedTensor> out;
  for (auto& [name, shape] : want) {
    std::vector<float> scratch;
    auto e = src.Get(name, shape, &scratch);
    if (!e.ok()) { *status = e.status(); return {}; }
    // Experts come one by one: each joins its stacked [experts, rows, cols] tensor.
    const HfTensorRef stacked = StackedExpert(name);
    const bool continues = stacked.expert > 0 && !out.empty() && out.back().name == stacked.name;
    if (!out.empty() && !continues && done) done(&out.back());
    if (stacked.expert >= 0) {
      if (!continues) out.push_back({stacked.name, {0, shape[0], shape[1]}, {}, {}});
      NamedTensor& t = out.back();
      ++t.shape[0];
      const std::vector<float> v = ToF32(*e);
      t.data.insert(t.data.end(), v.begin(), v.end());
      continue;
    }
    out.push_back({name, shape, ToF32(*e), {}});
  }
  if (!out.empty() && done) done(&out.back());
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

// f16/bf16 exports convert the matrices; norms, routers, SSM parameters and RoPE factors stay f32, as
// the converters keep them.
DType StorageOf(const NamedTensor& t, DType dtype) {
  if (t.name.find("ffn_gate_inp") != std::string::npos) return DType::kF32;  // routers (llama.cpp's converter keeps them f32)
  const bool small = t.name.find("norm") != std::string::npos || t.name.find("ssm_") != std::string::npos;
  const bool matrix = t.shape.size() >= 2 && (!small || t.name.find("ssm_in") != std::string::npos ||
                                              t.name.find("ssm_out") != std::string::npos);
  return matrix ? dtype : DType::kF32;
}

// The bytes of t in `dtype` (f32: its own data; else converted into *half).
const void* StoredData(const NamedTensor& t, DType dtype, std::vector<uint16_t>* half) {
  if (!t.half.empty()) return t.half.data();
  if (dtype == DType::kF32) return t.data.data();
  half->resize(t.data.size());
  for (size_t k = 0; k < t.data.size(); ++k) (*half)[k] = dtype == DType::kBF16 ? core::F32ToBf16(t.data[k]) : core::F32ToF16(t.data[k]);
  return half->data();
}

Status ExportGguf(const ModelConfig& c, const ArchSpec& arch, const std::vector<NamedTensor>& tensors, DType dtype,
                  const std::vector<std::pair<std::string, formats::GgufValue>>& metadata, const std::string& out_path) {
  using formats::GgufValue;
  auto has_key = [&](const std::string& key) {
    return std::any_of(metadata.begin(), metadata.end(), [&](const auto& kv) { return kv.first == key; });
  };
  formats::GgufWriter wr;
  wr.Set("general.architecture", GgufValue::Str(c.arch));
  wr.Set("general.name", GgufValue::Str(c.name));
  RADIXLM_RETURN_IF_ERROR(arch.gguf_metadata(c, &wr));
  for (const auto& [key, value] : metadata) wr.Set(key, value);
  if (c.bos_id >= 0 && !has_key("tokenizer.ggml.bos_token_id")) wr.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(c.bos_id));
  if (c.eos_id >= 0 && !has_key("tokenizer.ggml.eos_token_id")) wr.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(c.eos_id));
  std::vector<std::vector<uint16_t>> half(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const DType dt = StorageOf(tensors[i], dtype);
    wr.AddTensor(tensors[i].name, dt, tensors[i].shape, StoredData(tensors[i], dt, &half[i]));
  }
  return wr.Write(out_path);
}

// A Hugging Face folder: the row's tensor layouts and names, and its config.json with the keys
// every architecture shares.
Status ExportHf(const ModelConfig& c, const ArchSpec& arch, std::vector<NamedTensor> tensors, DType dtype,
                const std::string& out_path) {
  if (arch.hf_model_types.empty())
    return core::Unimplemented(c.arch + ": radixlm does not write Hugging Face folders of this architecture (use GGUF)");
  std::error_code ec;
  fs::create_directories(out_path, ec);
  if (ec) return core::IoError(out_path + ": " + ec.message());
  arch.hf_layout(c, &tensors);
  std::vector<std::vector<uint16_t>> half(tensors.size());
  std::vector<formats::SafetensorsTensor> st;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const DType dt = StorageOf(tensors[i], dtype);
    st.push_back({arch.hf_tensor(c, tensors[i].name).name, dt, tensors[i].shape, StoredData(tensors[i], dt, &half[i])});
  }
  RADIXLM_RETURN_IF_ERROR(formats::WriteSafetensorsFile((fs::path(out_path) / "model.safetensors").string(), st));
  json cfg = arch.hf_config(c);
  cfg.update({{"architectures", {arch.hf_class}}, {"model_type", arch.hf_model_types.front()}, {"vocab_size", c.vocab_size},
              {"hidden_size", c.d_model}, {"tie_word_embeddings", c.tied_embeddings},
              {"torch_dtype", dtype == DType::kF32 ? "float32" : dtype == DType::kBF16 ? "bfloat16" : "float16"}});
  if (c.bos_id >= 0) cfg["bos_token_id"] = c.bos_id;
  if (c.eos_id >= 0) cfg["eos_token_id"] = c.eos_id;
  std::ofstream(fs::path(out_path) / "config.json") << core::JsonText(cfg, 2) << "\n";
  return Status::Ok();
}

}  // namespace

Status ExportModel(const std::string& spec, ExportFormat format, const std::string& out_path, DType dtype,
                   const std::vector<std::pair<std::string, formats::GgufValue>>& metadata) {
  if (!IsRandom(spec)) return core::InvalidArgument("export takes a random:NAME preset");
  RADIXLM_ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(spec.substr(7)));
  const ArchSpec* arch = ArchByGguf(c.arch);
  if (!arch) return core::Unimplemented("no exporter for architecture '" + c.arch + "'");
  core::ThreadPool pool;
  RandomSource src(c, PresetSeed(spec.substr(7)), pool);
  Status st;
  // GGUF: each matrix stored in its export type as soon as it is complete.
  auto to_half = [dtype](NamedTensor* t) {
    const DType dt = StorageOf(*t, dtype);
    if (dt == DType::kF32) return;
    StoredData(*t, dt, &t->half);
    std::vector<float>().swap(t->data);
  };
  std::vector<NamedTensor> tensors =
      AllTensors(c, src, &st, format == ExportFormat::kGguf,
                 format == ExportFormat::kGguf ? std::function<void(NamedTensor*)>(to_half) : nullptr);
  RADIXLM_RETURN_IF_ERROR(st);
  if (format == ExportFormat::kHfFolder) return ExportHf(c, *arch, std::move(tensors), dtype, out_path);
  if (c.rope_scaling.factor > 0) tensors.push_back({"rope_freqs.weight", {c.head_dim / 2}, RopeFreqFactors(c)});
  return ExportGguf(c, *arch, tensors, dtype, metadata, out_path);
}

}  // namespace radixlm::models
