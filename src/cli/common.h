// Options and helpers shared by the CLI subcommands.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/loader.h"
#include "models/presets.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::cli {

struct ModelOptions {
  std::string model = models::kDefaultModel;
  std::string dtype;   // empty = the file's own (quantised stays quantised, f32 stays f32, f16/bf16 -> bf16)
  std::string matmul_precision = "auto";  // bf16 weights: f32 | bf16 activations | auto (bf16 where AVX512_BF16)
  std::string kv_dtype = "bf16";          // KV cache: f32 | bf16 | f16
  int threads = 0;     // 0 = one per core
  int ssm_chunk = 0;   // Mamba2 scan: 0 = the exact recurrence, N = chunks of N tokens (models::LoadOptions)
  std::string tokenizer;      // family name, tokenizer.json, HF folder or GGUF; default: the model's
  std::string tokenizer_dir;  // where set-up put the bundled tokenizer data
  // KV tokens the command will allocate beside the model: the load is refused up front when the
  // weights and that pool do not fit in the memory available (models::LoadOptions).
  int64_t kv_tokens = 0;
};

struct EngineOptions {
  int64_t kv_tokens = 32768;
  int32_t block_tokens = 16;
  bool no_prefix_cache = false;
  std::string kv_eviction = "lru";
  int step_tokens = 256;
  int max_running = 16;
  // Models with recurrent layers (Mamba2, Gated DeltaNet): the hybrid cache policy and its checkpoint slots.
  std::string hybrid_policy = "marconi";
  int checkpoint_slots = 32;
  bool prompt_end_checkpoints = false;  // keep each prompt's end state (exact repeats hit)
  int64_t prompt_end_min_gap = 256;     // ... where it lies this far past the state the request has
  // Commands whose prompts are chat histories re-rendered from text (serve, chat) keep prompt
  // ends by default: see ChatServingDefaults.
  // Intra-step prefix dedup of prefill rows (RadixMLP in the engine).
  double prefill_compaction_threshold = 0.92;
  std::string prefill_compaction = "trie";
  // Cascade attention for decode rows sharing prefix blocks (answers are the same either way).
  std::string cascade = "on";
  // The disk tier under the KV pool (cli/cache_tier_setup.h): off without a folder.
  std::string cache_dir;
  double cache_disk_gb = 10;
  bool cache_fsync = false;
  std::string cache_namespace;
  // Speculative decoding (engine::SpeculateConfig): off | ngram | tree, drafts of at most draft_max.
  std::string speculate = "off";
  int draft_max = 8;
  int spec_max_rows = 16;
  bool spec_fixed = false;  // drafts as long as found (no cost model)
};

void AddModelOptions(CLI::App* cmd, ModelOptions* o, bool positional_model = false);
// The KV cache dtype of --kv-dtype.
core::DType KvDtypeOf(const ModelOptions& o);
// What the matrix products of a loaded model compute with, for `info` and `bench`: e.g.
// "q4_k weights x int8 activations (avx512 vnni)", "bf16 weights x bf16 activations (vdpbf16ps)".
std::string MatmulDescription(const models::Transformer& m);
core::StatusOr<std::unique_ptr<models::Transformer>> LoadFromOptions(const ModelOptions& o);
void AddTokenizerOptions(CLI::App* cmd, ModelOptions* o);
// The tokenizer named by --tokenizer, else the model's own (GGUF metadata, the HF folder's
// tokenizer.json), else for random presets the bundled family whose vocabulary fits.
core::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const ModelOptions& o, int64_t model_vocab);
struct ModelAndTokenizer {
  std::unique_ptr<models::Transformer> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};
// The model and its tokenizer (see LoadTokenizer); prints the error and exits on failure.
ModelAndTokenizer LoadModelAndTokenizerOrExit(const ModelOptions& o);
// The tokens that end a turn or a text for this tokenizer (EOS, <|im_end|>, <|eot_id|>, ...).
std::vector<int32_t> EndOfTurnIds(const tokenizer::Tokenizer& tok);
core::StatusOr<std::vector<int32_t>> ParseIds(const std::string& csv);
// Prints the status to stderr and exits with code 1 when not OK.
void ExitIfError(const core::Status& st);

}  // namespace radixlm::cli
