// The architecture registry: everything that differs by architecture, one row per
// architecture (llama.cpp keeps its names and tensor tables in llama-arch.cpp the same way), so
// a new architecture is its own arch_*.cc (or, for a variant that differs only in its
// feed-forward, a second row in its family's file: qwen3moe, qwen35moe, nemotron_h_moe) plus a
// row in arch.cc — never a string comparison in the loader, the presets or the exporter. A row says:
//   - its names: GGUF general.architecture, Hugging Face model_type values and architectures
//     class (for export);
//   - its hyper-parameters and layer pattern, read from GGUF metadata or a config.json into a
//     ModelConfig (whose layer kinds select the forward: models/transformer.h);
//   - its fixed conventions (q/k norm, biases, RoPE layout, default BOS/EOS), which random
//     presets of the architecture share;
//   - its Hugging Face tensor names, as a map from the GGUF name (the loader's own naming),
//     with a row range for tensors the checkpoint stores stacked (Granite's gate and up);
//   - its exporter: GGUF metadata, and the Hugging Face config.json and tensor layouts.
// Rows are immutable and the registry is built once; lookups are thread-safe.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "formats/gguf.h"
#include "models/model_config.h"

namespace radixlm::models {

// A tensor of a model being exported, by its GGUF name, as f32 in PyTorch shape order.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  // A GGUF export stores matrices as bf16/f16 as soon as each is complete (a model with many
  // experts would not fit in memory as f32): then data is empty and `half` holds them.
  std::vector<uint16_t> half;
};

// Where a GGUF-named tensor lives in a Hugging Face checkpoint: rows [row_begin, row_begin +
// rows) of tensor `name` (rows < 0: all of it).
struct HfTensorRef {
  std::string name;
  int64_t row_begin = 0, rows = -1;
  int64_t expert = -1;  // >= 0: matrix `expert` of a 3-D [experts, rows, cols] tensor, then the rows
  float add = 0.0f;  // added to every value at load (Qwen3.5's norms store w of (1 + w))
};

struct ArchSpec {
  std::string gguf_name;                    // general.architecture
  std::vector<std::string> hf_model_types;  // config.json model_type values read as this architecture
  std::string hf_class;                     // config.json architectures[0] when exporting

  // REQUIRES: g's general.architecture is gguf_name.
  core::StatusOr<ModelConfig> (*from_gguf)(const formats::GgufFile& g) = nullptr;
  // path: config.json (for errors); dir: the folder (the model's name).
  core::StatusOr<ModelConfig> (*from_hf)(const nlohmann::json& config, const std::string& path, const std::string& dir) =
      nullptr;
  // The architecture's fixed conventions on a config (arch, q/k norm, biases, RoPE layout, ...).
  void (*conventions)(ModelConfig* c) = nullptr;
  // The Hugging Face tensor of a GGUF-named one, for a config of this architecture.
  HfTensorRef (*hf_tensor)(const ModelConfig& c, const std::string& gguf_name) = nullptr;
  // Export: this architecture's GGUF metadata keys (beyond general.*, tokenizer.* and the
  // tensors); its config.json; the tensors as its Hugging Face checkpoint stores them (names are
  // mapped afterwards with hf_tensor, so a stacked tensor keeps the name of its first part).
  core::Status (*gguf_metadata)(const ModelConfig& c, formats::GgufWriter* w) = nullptr;
  nlohmann::json (*hf_config)(const ModelConfig& c) = nullptr;
  void (*hf_layout)(const ModelConfig& c, std::vector<NamedTensor>* tensors) = nullptr;
};

// The row for a GGUF architecture name or a config.json model_type; nullptr when none.
const ArchSpec* ArchByGguf(std::string_view name);
const ArchSpec* ArchByHfType(std::string_view model_type);
// "llama, qwen2, ..." (GGUF names) or the model_types, for errors.
std::string SupportedGgufArchs();
std::string SupportedHfTypes();

// Rows, defined in their arch_*.cc files and listed in arch.cc.
const ArchSpec& LlamaArch();
const ArchSpec& Qwen2Arch();
const ArchSpec& Qwen3Arch();
const ArchSpec& Qwen3MoeArch();
const ArchSpec& Mamba2Arch();
const ArchSpec& NemotronHArch();
const ArchSpec& NemotronHMoeArch();
const ArchSpec& GraniteHybridArch();
const ArchSpec& Qwen35Arch();
const ArchSpec& Qwen35MoeArch();
const ArchSpec& Gemma3Arch();
const ArchSpec& Gemma4Arch();
const ArchSpec& GptOssArch();
const ArchSpec& Lfm2Arch();
const ArchSpec& Lfm2MoeArch();

// ---- helpers the rows share ------------------------------------------------------------------

// The functions an architecture's file defines, and the row that names them.
struct ArchFunctions {
  decltype(ArchSpec::from_gguf) from_gguf;
  decltype(ArchSpec::from_hf) from_hf;
  decltype(ArchSpec::hf_tensor) hf_tensor;
  decltype(ArchSpec::gguf_metadata) gguf_metadata;
  decltype(ArchSpec::hf_config) hf_config;
  decltype(ArchSpec::hf_layout) hf_layout;
};
ArchSpec MakeArch(std::string gguf_name, std::vector<std::string> hf_model_types, std::string hf_class,
                  void (*conventions)(ModelConfig*), const ArchFunctions& f);

// The attention decoder's sizes every architecture's GGUF states the same way (general.name,
// width, blocks, MLP width unless !ffn_required, heads, kv heads, head size, RMS epsilon, RoPE
// base, context), each checked, and the vocabulary (ReadGgufVocabulary). Rotary embeddings over
// part of a head (rope.dimension_count < head size) are refused.
core::Status ReadAttentionGguf(const formats::GgufFile& g, bool ffn_required, ModelConfig* c);
// The part of that every row reads: architecture, name, width, blocks (at least min_blocks) and
// heads, each checked.
core::Status ReadGgufTrunk(const formats::GgufFile& g, int min_blocks, ModelConfig* c);
// A config.json's hidden_size, num_hidden_layers, intermediate_size and num_attention_heads, read
// wide and checked before use (get<int>() would narrow 4294967296 to 0). Throws json errors.
core::Status ReadHfSizes(const nlohmann::json& j, const std::string& path, ModelConfig* c);
// config.json's layer_types of a config's sliding windows ("sliding_attention" / "full_attention").
nlohmann::json HfLayerTypes(const ModelConfig& c);
// Each block's sliding window, as llama.cpp's load_swa_pattern reads it: 0 everywhere without
// "<arch>.attention.sliding_window"; else that window on every block but those an
// "attention.sliding_window_pattern" bool array marks false, or (an integer pattern, default
// `every`) the last block of each `every` (0: every block slides).
core::StatusOr<std::vector<int>> ReadGgufSlidingWindows(const formats::GgufFile& g, int n_blocks, int64_t every);
// What every GGUF says the same way: tied embeddings (no output.weight), the vocabulary (from
// token_embd.weight's rows) and BOS / EOS.
core::Status ReadGgufVocabulary(const formats::GgufFile& g, ModelConfig* c);
// The sizes under "<arch>." every GGUF starts with: context length (at most 2^30), width, blocks.
void WriteGgufSizes(const ModelConfig& c, formats::GgufWriter* w);
// The attention and MLP sizes under "<arch>." every architecture writes the same way (context
// length, width, blocks, MLP, heads, head sizes, RMS epsilon, RoPE base and dimensions).
void WriteAttentionGguf(const ModelConfig& c, formats::GgufWriter* w);

// Gemma 3 and 4's decoder (arch_gemma3.cc): q/k norm, NeoX RoPE, dense blocks, GeGLU with the
// tanh GELU, post-attention and post-MLP norms, embeddings times sqrt(d_model).
void GemmaDecoderConventions(ModelConfig* c);

// "blk.N.what"
std::string Blk(int block, const char* what);
// Experts are asked for one at a time as "blk.N.<stem>.E.weight" (blk.3.ffn_up_exps.7.weight);
// GGUF stores them stacked in the 3-D "blk.N.<stem>.weight" [experts, rows, n_in].
std::string ExpertName(int block, const char* stem, int64_t expert);
// The stacked GGUF tensor and the expert of an expert name; {name} (expert -1) for any other.
HfTensorRef StackedExpert(const std::string& name);
// Export to checkpoints that keep one tensor per expert: each stacked [experts, rows, cols]
// "blk.N.<stem>.weight" becomes its experts' ExpertName tensors.
void SplitExpertTensors(const ModelConfig& c, std::vector<NamedTensor>* tensors);
// Export to checkpoints that stack each expert's gate and up: gate [E, I, H] becomes
// [E, 2I, H], expert e's gate rows then its up rows (Qwen3.5-MoE gate_up_proj, Granite
// input_linear). REQUIRES: both 3-D of the same shape.
void FuseExpertGateUp(NamedTensor* gate, const NamedTensor& up);
// GGUF name -> HF name by the first matching rule (std::regex_replace format: "$1" = the block
// index); the GGUF name itself when none matches.
struct HfNameRule {
  std::regex pattern;
  std::string replacement;
};
std::string MapHfName(const std::vector<HfNameRule>& rules, const std::string& gguf_name);
// The rules of a Llama-style trunk's tensors under `prefix` ("model.", or "" where the caller
// prefixes): embeddings, final norm, each block's input norm and the norm before its MLP (GGUF
// "blk.N.<mlp_norm>.weight"); then `rules`.
std::vector<HfNameRule> LlamaTrunkRules(const std::string& prefix, const std::string& mlp_norm, std::vector<HfNameRule> rules);

}  // namespace radixlm::models
