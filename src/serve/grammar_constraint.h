// The grammar module's matcher behind the engine's constraint seam (sampling/constraint.h):
// each sequence gets one GrammarConstraint over a compiled grammar (GrammarCache::GetAsync; the
// server waits for the compile before it submits, so Mask never waits on the step loop).
// Also the server's compile step: a request's output format (response_format, grammar,
// tool_choice) as GBNF text, refused with the compiler's message before anything runs.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "sampling/constraint.h"

namespace radixlm::serve {

class GrammarConstraint : public sampling::TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_future<grammar::GrammarCache::Result> compiled) : compiled_(std::move(compiled)) {}
  // A failed compile or a matcher with nothing allowed masks every token (the engine then ends
  // the request with an error).
  void Mask(std::span<float> logits) override;
  void Accept(int32_t token) override;
  std::string failure() const override;

 private:
  std::shared_future<grammar::GrammarCache::Result> compiled_;
  std::optional<grammar::Matcher> matcher_;
  bool failed_ = false;
  std::vector<uint32_t> bits_;
};

}  // namespace radixlm::serve
