// Builds a Transformer from a model spec: a GGUF file, a Hugging Face model folder
// (config.json + safetensors, sharded or not), or `random:NAME`, a seeded random-initialised
// preset of a real shape. All three go through one path: a WeightSource hands out tensors by
// their GGUF names, and the loader checks shapes against the config and packs them for the
// GEMM kernel (converting to the requested dtype), so the file mapping is needed only while
// loading and resident memory is the packed weights.
//
// Conventions kept from the formats (so files written by other tools load correctly):
//  - GGUF `llama` uses interleaved RoPE (llama.cpp's converter permutes q/k rows);
//    Hugging Face Llama and every Qwen use NeoX RoPE.
//  - Llama 3.1 RoPE scaling: `rope_scaling` in config.json, `rope_freqs.weight` in GGUF.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "models/transformer.h"

namespace radixlm::models {

struct LoadOptions {
  // Storage dtype of the linear weights (f32 or bf16, converting or dequantising); default:
  // each tensor's own: quantised GGUF types stay quantised, f16/bf16 become bf16, f32 stays f32.
  std::optional<core::DType> dtype;
  // bf16 weights with bf16-rounded activations (vdpbf16ps, llama.cpp's arithmetic) or with f32
  // activations (exact). Default: bf16 activations where the CPU has AVX512_BF16.
  // REQUIRES: true only where kernels::HasBf16Dot() (else the scalar emulation runs, slowly).
  std::optional<bool> bf16_activations;
  // Models with Mamba2 layers: the scan (ModelConfig::ssm_chunk; default 0, the exact recurrence).
  std::optional<int> ssm_chunk;
  // Memory the caller will take beside the weights (its KV pool), and what it is for (errors).
  // A load whose weights and this would exceed the memory available (core/memory_info.h) is
  // refused before anything is read.
  int64_t reserve_bytes = 0;
  std::string reserve_what;
};

core::StatusOr<std::unique_ptr<Transformer>> LoadModel(const std::string& spec, const LoadOptions& options = {});

// Model config only (cheap: reads metadata, generates no weights).
core::StatusOr<ModelConfig> LoadConfig(const std::string& spec);

// Names of the random presets, e.g. "qwen3-0.6b", "tiny".
std::vector<std::string> RandomPresetNames();

enum class ExportFormat { kGguf, kHfFolder };
// Writes a model's weights as f32 to a GGUF file or a Hugging Face folder (config.json +
// model.safetensors). Used to hand random presets to other implementations (the PyTorch
// reference) and in loader round-trip tests.
// `metadata` is added to a GGUF's keys (a tokenizer's tokenizer.ggml.*, which llama.cpp needs).
core::Status ExportModel(const std::string& spec, ExportFormat format, const std::string& out_path,
                         core::DType dtype = core::DType::kF32,
                         const std::vector<std::pair<std::string, formats::GgufValue>>& metadata = {});

}  // namespace radixlm::models
