#include "cli/common.h"

#include <cstdlib>

namespace radixlm::cli {

void AddModelOptions(CLI::App* cmd, ModelOptions* o, bool positional_model) {
  if (positional_model) cmd->add_option("model", o->model, "GGUF file, Hugging Face folder or random:NAME");
  cmd->add_option("--model,-m", o->model, "GGUF file, Hugging Face folder or random:NAME")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "weight storage: f32 or bf16 (converted at load)")->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--threads,-t", o->threads, "compute threads (0 = one per core)");
}

core::StatusOr<std::unique_ptr<models::Transformer>> LoadFromOptions(const ModelOptions& o) {
  models::LoadOptions lo;
  if (!o.dtype.empty()) {
    core::DType d;
    core::ParseDType(o.dtype, &d);
    lo.dtype = d;
  }
  return models::LoadModel(o.model, lo);
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
