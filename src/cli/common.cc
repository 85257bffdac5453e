#include "cli/common.h"

#include "models/kv_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "formats/gguf.h"
#include "models/presets.h"

namespace radixlm::cli {

void AddModelOptions(CLI::App* cmd, ModelOptions* o, bool positional_model) {
  if (positional_model) cmd->add_option("model", o->model, "GGUF file, Hugging Face folder or random:NAME");
  cmd->add_option("--model,-m", o->model, "GGUF file, Hugging Face folder or random:NAME")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "weight storage: f32 or bf16, converted or dequantised at load (default: the file's own types)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  AddChecked(cmd, "--matmul-precision", o->matmul_precision,
             "bf16 weights: f32 activations (exact), bf16 activations (vdpbf16ps, AVX512_BF16 only), or auto",
             CLI::IsMember({"auto", "f32", "bf16"}));
  AddChecked(cmd, "--kv-dtype", o->kv_dtype, "KV cache element type", CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--threads,-t", o->threads, "compute threads (0 = one per core)")->check(CLI::Range(0, 1024));
  AddChecked(cmd, "--ssm-chunk", o->ssm_chunk,
             "hybrids (Mamba2, Gated DeltaNet): 0 = the exact recurrence (answers never depend on how prompts "
             "are split into steps), N = the chunked form (Mamba2's SSD scan, DeltaNet's WY form) over N tokens",
             CLI::Range(0, 4096));
}

core::StatusOr<std::unique_ptr<models::Transformer>> LoadFromOptions(const ModelOptions& o) {
  models::LoadOptions lo;
  if (!o.dtype.empty()) {
    core::DType d;
    core::ParseDType(o.dtype, &d);
    lo.dtype = d;
  }
  if (o.matmul_precision == "bf16" && !kernels::HasBf16Dot())
    return core::InvalidArgument("--matmul-precision bf16 needs a CPU with AVX512_BF16 (vdpbf16ps); use f32 or auto");
  if (o.matmul_precision != "auto") lo.bf16_activations = o.matmul_precision == "bf16";
  lo.ssm_chunk = o.ssm_chunk;
  if (o.kv_tokens > 0) {
    if (auto c = models::LoadConfig(o.model); c.ok()) {
      const int64_t blocks = (o.kv_tokens + 15) / 16;
      lo.reserve_bytes = static_cast<int64_t>(models::KvStore::BytesPerBlock(*c, 16, KvDtypeOf(o))) * blocks;
      lo.reserve_what = "a KV pool of " + std::to_string(o.kv_tokens) + " tokens";
    }
  }
  return models::LoadModel(o.model, lo);
}

core::DType KvDtypeOf(const ModelOptions& o) {
  core::DType d = core::DType::kBF16;
  core::ParseDType(o.kv_dtype, &d);
  return d;
}

void AddTokenizerOptions(CLI::App* cmd, ModelOptions* o) {
  cmd->add_option("--tokenizer", o->tokenizer, "qwen3|llama3|llama2|gpt4o|gemma3|gpt2, a tokenizer.json, a HF folder or a GGUF (default: the model's)");
  cmd->add_option("--tokenizer-dir", o->tokenizer_dir, "bundled tokenizer data (default: $RADIXLM_TOKENIZER_DIR or the set-up's folder)");
}

namespace {

std::string TokenizerDir(const ModelOptions& o) {
  if (!o.tokenizer_dir.empty()) return o.tokenizer_dir;
  if (const char* env = std::getenv("RADIXLM_TOKENIZER_DIR")) return env;
  return RADIXLM_DEFAULT_TOKENIZER_DIR;
}

core::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> FromPath(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return tokenizer::Tokenizer::FromHfJson((fs::path(path) / "tokenizer.json").string());
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") return tokenizer::Tokenizer::FromHfJson(path);
  RADIXLM_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::Open(path));
  if (!g.Find("tokenizer.ggml.model")) return core::NotFound(path + ": the GGUF carries no tokenizer (tokenizer.ggml.*)");
  return tokenizer::Tokenizer::FromGguf(g);
}

}  // namespace

core::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const ModelOptions& o, int64_t model_vocab) {
  const auto families = tokenizer::Tokenizer::NamedFamilies();
  std::unique_ptr<tokenizer::Tokenizer> t;
  if (!o.tokenizer.empty()) {
    if (std::find(families.begin(), families.end(), o.tokenizer) != families.end()) {
      RADIXLM_ASSIGN_OR_RETURN(t, tokenizer::Tokenizer::Named(o.tokenizer, TokenizerDir(o)));
    } else if (!std::filesystem::exists(o.tokenizer)) {
    {
      std::string known;
      for (const std::string& f : families) known += (known.empty() ? "" : ", ") + f;
      return core::NotFound("no bundled tokenizer '" + o.tokenizer + "' (" + known + ") and no such file or folder");
    }
    } else {
      RADIXLM_ASSIGN_OR_RETURN(t, FromPath(o.tokenizer));
    }
  } else if (o.model.rfind("random:", 0) == 0) {
    const std::string family = models::PresetTokenizer(o.model.substr(7));
    if (family.empty()) return core::NotFound("no bundled tokenizer fits " + o.model + "'s vocabulary; pass --tokenizer");
    RADIXLM_ASSIGN_OR_RETURN(t, tokenizer::Tokenizer::Named(family, TokenizerDir(o)));
  } else {
    RADIXLM_ASSIGN_OR_RETURN(t, FromPath(o.model));
  }
  if (model_vocab > 0 && t->vocab_size() > model_vocab)
    return core::InvalidArgument("tokenizer '" + t->name() + "' has " + std::to_string(t->vocab_size()) +
                                 " tokens, more than the model's vocabulary of " + std::to_string(model_vocab));
  // Fewer tokens than output rows: a padded embedding (Qwen's 151,936 rows for 151,669 tokens)
  // or a tokenizer of another model. Either way the rows past it are never sampled (the
  // engine's sampled_vocab); a gap past padding's few percent is named.
  if (model_vocab > 0 && t->vocab_size() < model_vocab * 9 / 10)
    std::fprintf(stderr, "radixlm: warning: tokenizer '%s' has %d tokens for the model's %lld output rows; ids past %d "
                 "are never sampled (is it this model's tokenizer?)\n", t->name().c_str(), t->vocab_size(),
                 static_cast<long long>(model_vocab), t->vocab_size());
  return t;
}

ModelAndTokenizer LoadModelAndTokenizerOrExit(const ModelOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (isatty(2)) std::fprintf(stderr, "loading %s ...", o.model.c_str());
  auto m = LoadFromOptions(o);
  if (isatty(2)) std::fprintf(stderr, "\r\033[K");
  ExitIfError(m.status());
  auto t = LoadTokenizer(o, (*m)->config().vocab_size);
  ExitIfError(t.status());
  // A load long enough to notice (bf16 conversion, repacking quantised panels) says what it was.
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s >= 1.0) std::fprintf(stderr, "radixlm: loaded %s (%s) in %.1f s\n", o.model.c_str(), (*m)->config().name.c_str(), s);
  return {std::move(m).value(), std::move(t).value()};
}

std::vector<int32_t> EndOfTurnIds(const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> ids;
  if (tok.eos_id() >= 0) ids.push_back(tok.eos_id());
  for (const char* end : {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>", "<|end_of_text|>"})
    if (int32_t id = tok.TokenId(end); id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

core::StatusOr<std::vector<int32_t>> ParseIds(const std::string& csv) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < csv.size()) {
    size_t j = csv.find(',', i);
    if (j == std::string::npos) j = csv.size();
    const std::string tok = csv.substr(i, j - i);
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
      return core::InvalidArgument("--ids: '" + tok + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return core::InvalidArgument("--ids: no token ids given");
  return ids;
}

void ExitIfError(const core::Status& st) {
  if (st.ok()) return;
  std::fprintf(stderr, "radixlm: %s\n", st.message().c_str());
  std::exit(1);
}

}  // namespace radixlm::cli
