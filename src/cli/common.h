// Options and helpers shared by the CLI subcommands.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/loader.h"
#include "models/presets.h"
#include "runner/serving_options.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::cli {

// The serving engine's options (runner/serving_options.h), under the name the commands use.
using EngineOptions = runner::ServingOptions;

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


// An option whose value is checked (a range, a set of names, a function) and whose help shows
// its default: most options of the commands.
template <typename T, typename Check>
CLI::Option* AddChecked(CLI::App* cmd, const std::string& name, T& value, const std::string& help, Check&& check) {
  return cmd->add_option(name, value, help)->check(std::forward<Check>(check))->capture_default_str();
}

void AddModelOptions(CLI::App* cmd, ModelOptions* o, bool positional_model = false);
// The KV cache dtype of --kv-dtype.
core::DType KvDtypeOf(const ModelOptions& o);
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
