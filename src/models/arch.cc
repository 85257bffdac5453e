#include "models/arch.h"

#include <array>
#include <functional>

namespace radixlm::models {
namespace {

// The registry: one row per architecture.
const std::vector<std::reference_wrapper<const ArchSpec>>& Rows() {
  static const std::vector<std::reference_wrapper<const ArchSpec>> rows = {
      LlamaArch(), Qwen2Arch(), Qwen3Arch(), Qwen3MoeArch(), Mamba2Arch(), NemotronHArch(), NemotronHMoeArch(), GraniteHybridArch(), Qwen35Arch(), Qwen35MoeArch(),
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

std::string ExpertName(int block, const char* stem, int64_t expert) {
  return "blk." + std::to_string(block) + "." + stem + "." + std::to_string(expert) + ".weight";
}

HfTensorRef StackedExpert(const std::string& name) {
  static const std::regex kExpert(R"(^(blk\.\d+\.\w+_(?:exps|experts))\.(\d+)\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, kExpert) || m[2].length() > 6) return {name};
  HfTensorRef r{m[1].str() + ".weight"};
  r.expert = std::stoll(m[2].str());
  return r;
}

void SplitExpertTensors(const ModelConfig&, std::vector<NamedTensor>* tensors) {
  static const std::regex kStacked(R"(^blk\.(\d+)\.(\w+_exps)\.weight$)");
  std::vector<NamedTensor> out;
  for (NamedTensor& t : *tensors) {
    std::smatch m;
    if (t.shape.size() != 3 || !std::regex_match(t.name, m, kStacked)) {
      out.push_back(std::move(t));
      continue;
    }
    const int64_t per = t.shape[1] * t.shape[2];
    for (int64_t e = 0; e < t.shape[0]; ++e)
      out.push_back({ExpertName(std::stoi(m[1].str()), m[2].str().c_str(), e), {t.shape[1], t.shape[2]},
                     std::vector<float>(t.data.begin() + e * per, t.data.begin() + (e + 1) * per), {}});
  }
  *tensors = std::move(out);
}

void FuseExpertGateUp(NamedTensor* gate, const NamedTensor& up) {
  const int64_t E = gate->shape[0], per = gate->shape[1] * gate->shape[2];
  std::vector<float> fused;
  fused.reserve(2 * E * per);
  for (int64_t e = 0; e < E; ++e) {
    fused.insert(fused.end(), gate->data.begin() + e * per, gate->data.begin() + (e + 1) * per);
    fused.insert(fused.end(), up.data.begin() + e * per, up.data.begin() + (e + 1) * per);
  }
  gate->data = std::move(fused);
  gate->shape[1] *= 2;
}

std::string MapHfName(const std::vector<HfNameRule>& rules, const std::string& gguf_name) {
  for (const HfNameRule& r : rules)
    if (std::regex_match(gguf_name, r.pattern)) return std::regex_replace(gguf_name, r.pattern, r.replacement);
  return gguf_name;
}

}  // namespace radixlm::models
