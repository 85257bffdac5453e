#include "models/arch.h"

#include <array>
#include <functional>

namespace radixlm::models {
namespace {

// The registry: one row per architecture.
const std::vector<std::reference_wrapper<const ArchSpec>>& Rows() {
  static const std::vector<std::reference_wrapper<const ArchSpec>> rows = {
      LlamaArch(), Qwen2Arch(), Qwen3Arch(), Mamba2Arch(), NemotronHArch(), GraniteHybridArch(), Qwen35Arch(),
  };
  return rows;
}

}  // namespace

const ArchSpec* ArchByGguf(std::string_view name) {
  for (const ArchSpec& a : Rows())
    if (a.gguf_name == name) return &a;
  return nullptr;
}

const ArchSpec* ArchByHfType(std::string_view model_type) {
  for (const ArchSpec& a : Rows())
    for (const std::string& t : a.hf_model_types)
      if (t == model_type) return &a;
  return nullptr;
}

std::string SupportedGgufArchs() {
  std::string s;
  for (const ArchSpec& a : Rows()) s += (s.empty() ? "" : ", ") + a.gguf_name;
  return s;
}

std::string SupportedHfTypes() {
  std::string s;
  for (const ArchSpec& a : Rows())
    for (const std::string& t : a.hf_model_types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

std::string Blk(int block, const char* what) { return "blk." + std::to_string(block) + "." + what; }

std::string MapHfName(const std::vector<HfNameRule>& rules, const std::string& gguf_name) {
  for (const HfNameRule& r : rules)
    if (std::regex_match(gguf_name, r.pattern)) return std::regex_replace(gguf_name, r.pattern, r.replacement);
  return gguf_name;
}

}  // namespace radixlm::models
