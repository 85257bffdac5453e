// JSON Schemas (grammar/json_schema.h): what a client sends as response_format json_schema or a
// tool's parameters. The input is a schema (JSON text), optionally a line "%%" and an instance.
// Convert to GBNF (bounded: size, visits, merges), compile with the first mask costed (the
// server's path), and feed the instance when there is one. Refusals are fine; a crash, a hang,
// an exception escaping the compiler, or GBNF that fails to parse back is a finding.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_feed.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find("\n%%\n");
  const std::string_view schema = in.substr(0, split);
  auto gbnf = radixlm::grammar::JsonSchemaToGbnf(schema);
  if (!gbnf.ok()) return 0;
  if (!radixlm::grammar::ParseGbnf(*gbnf).ok() && gbnf->size() <= radixlm::grammar::GrammarLimits{}.max_text_bytes)
    radixlm::fuzz::Fail("a schema's GBNF does not parse back");
  static auto vocab = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("</s>");
    const std::vector<int32_t> stop = {256};
    return std::make_shared<const radixlm::grammar::Vocabulary>(std::move(t), std::span<const int32_t>{}, stop);
  }();
  auto g = radixlm::grammar::GrammarCache::Compile(*gbnf, vocab, 200000);
  if (!g.ok() || split == std::string_view::npos) return 0;
  const auto instance = nlohmann::ordered_json::parse(in.substr(split + 4), nullptr, false);
  if (instance.is_discarded()) return 0;
  radixlm::grammar::Matcher m(*g);
  m.set_fuel(200000);
  (void)radixlm::grammar::FeedJson(m, instance, radixlm::grammar::FeedStyle::kCompact);
  return 0;
}
