// What a model is, independent of where its weights come from: sizes, the list of layers by
// kind (so hybrids of attention, MLP and Mamba2 layers fit the same description), and the
// conventions (RoPE layout, q/k norm, biases, tied embeddings).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"

namespace radixlm::models {

// A sublayer applies x += F(norm(x)) (pre-norm residual). A Llama/Qwen decoder block is an
// attention sublayer followed by an MLP sublayer.
enum class LayerKind { kAttention, kMlp, kMamba2 };
const char* LayerKindName(LayerKind k);

struct ModelConfig {
  std::string arch;            // "llama", "qwen2", "qwen3"
  std::string name;            // human-readable, e.g. "random:qwen3-0.6b" or general.name
  int64_t vocab_size = 0;
  int d_model = 0;
  int n_blocks = 0;            // decoder blocks (HF num_hidden_layers)
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn_dim = 0;
  float rms_eps = 1e-6f;
  double rope_theta = 10000.0;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kNeox;
  kernels::Llama3RopeScaling rope_scaling;  // factor 0 = none
  std::vector<float> rope_freq_factors;     // GGUF rope_freqs.weight: inv_freq[i] /= factor[i]
  bool qk_norm = false;        // Qwen3: per-head RMSNorm on q and k before RoPE
  bool qkv_bias = false;       // Qwen2: bias on the q, k, v projections
  bool tied_embeddings = false;
  int64_t max_context = 4096;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::vector<LayerKind> layers;  // sublayers in execution order

  int n_attention_layers() const;
  // Parameters, counting a tied embedding once.
  int64_t ParameterCount() const;
  // Matmul FLOPs per token excluding attention scores (2 x non-embedding parameters + lm_head).
  double LinearFlopsPerToken(bool with_lm_head) const;
  std::string Validate() const;  // empty when consistent
};

// Dense decoder: n_blocks x [attention, mlp].
std::vector<LayerKind> DenseLayers(int n_blocks);

}  // namespace radixlm::models
