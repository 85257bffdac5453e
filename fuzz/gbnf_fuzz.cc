// GBNF grammars (grammar/grammar.h, pda.h, matcher.h): what a client sends as `grammar`. The
// input is text: the grammar, optionally a line "%%" and text to feed it. Parse, lower, compile
// for a byte vocabulary with the first mask costed (GrammarCache::Compile, the server's path,
// under a small work budget), then feed the text (its first 32 bytes) byte by byte, filling a mask at every step,
// and take the shortest completion. Refusals are fine; a crash, a hang (every step is within
// the work budget) or a mask that allows a token AcceptToken then refuses is a finding.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "grammar/grammar_cache.h"

namespace {

std::shared_ptr<const radixlm::grammar::Vocabulary> ByteVocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("ab");
    t.push_back("\"}");
    t.push_back("</s>");
    const std::vector<int32_t> stop = {258};
    return std::make_shared<const radixlm::grammar::Vocabulary>(std::move(t), std::span<const int32_t>{}, stop);
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find("\n%%\n");
  const std::string_view gbnf = in.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? std::string_view() : in.substr(split + 4);
  // The work per input is bounded by bytes fed x 2 x kFuel (a mask and an accept per byte, each
  // under its budget): at most 32 bytes, 20k units each, so an input never runs into
  // libFuzzer's 10 s timeout however ambiguous its grammar (the server's budget is kStepFuel).
  constexpr int64_t kFuel = 20000;
  constexpr size_t kMaxFed = 32;
  auto g = radixlm::grammar::GrammarCache::Compile(gbnf, ByteVocab(), kFuel);
  if (!g.ok()) return 0;
  radixlm::grammar::Matcher m(*g);
  m.set_fuel(kFuel);
  std::vector<uint32_t> mask((ByteVocab()->size() + 31) / 32);
  for (char c : text.substr(0, kMaxFed)) {
    if (!m.FillNextTokenMask(mask)) return 0;  // over its budget: the sequence would end
    const auto b = static_cast<uint8_t>(c);
    const bool allowed = (mask[b >> 5] >> (b & 31)) & 1;
    const bool accepted = m.AcceptToken(b);
    if (accepted != allowed && !m.over_budget()) radixlm::fuzz::Fail("the mask and AcceptToken disagree on a byte");
    if (!accepted) break;
  }
  (void)m.ShortestCompletion(4096);
  return 0;
}
