// How a completion's output is shaped, decided once per request before it runs: the choice
// pipeline's setup (stop strings, reasoning split, the template's tool-call format, logprobs)
// and the grammar the sampler follows (response_format json_object / json_schema, a GBNF
// `grammar`, or tool_choice "required" / a named function: the format's calls with arguments
// generated from the tools' schemas). Grammars are built and compiled on the grammar cache's
// low-priority thread, within its bounds (grammar/grammar_cache.h); Plan waits for the result,
// so a schema or grammar the compiler refuses, or whose first mask would cost more than the
// budget, is a 400 before anything runs.
// One OutputShaper per served model (server and batch), shared by requests (thread-safe).
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "sampling/constraint.h"
#include "serve/choice_output.h"
#include "serve/completion_request.h"
#include "tokenizer/chat_template.h"

namespace radixlm::serve {

struct OutputPlan {
  ChoiceSetup setup;
  std::shared_future<grammar::GrammarCache::Result> grammar;  // valid() when the output is constrained
  // A constraint for one sample (its own matcher state); nullptr when unconstrained.
  std::shared_ptr<sampling::TokenConstraint> NewConstraint() const;
};

class OutputShaper {
 public:
  // chat_template: the served template (nullptr: none); stop_ids: the ids that end an output.
  OutputShaper(const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate* chat_template, std::vector<int32_t> stop_ids);
  // rendered: the chat prompt's text (a template that opens <think> in the prompt starts the
  // output inside reasoning).
  bool Plan(const CompletionRequest& r, const std::string& rendered, OutputPlan* plan, ApiError* err);
  const ToolFormat* tool_format() const { return tool_format_; }

 private:
  std::shared_ptr<const grammar::Vocabulary> Vocab();
  // The request's grammar as a cache key and a builder of its GBNF text (no builder: the output
  // is free); false (err set) for options that contradict each other.
  struct GrammarWork {
    std::string key;
    grammar::GrammarCache::Builder build;
    const char* param = "";
  };
  bool GrammarJob(const CompletionRequest& r, const ChoiceSetup& s, GrammarWork* work, ApiError* err);

  const tokenizer::Tokenizer& tok_;
  std::vector<int32_t> stop_ids_;
  const ToolFormat* tool_format_ = nullptr;
  bool thinks_ = false;   // the template writes <think> blocks
  bool harmony_ = false;  // gpt-oss channels
  std::once_flag vocab_once_;
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  grammar::GrammarCache cache_{grammar::GrammarCache::Config{}};
};

}  // namespace radixlm::serve
