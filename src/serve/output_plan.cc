#include "serve/output_plan.h"

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "serve/grammar_constraint.h"

namespace radixlm::serve {
namespace {

bool Bad(ApiError* err, const std::string& message, const char* param) {
  *err = {400, message, "invalid_request_error", param, "invalid_value"};
  return false;
}

// The prompt leaves the model inside a reasoning block (DeepSeek-R1, Qwen3.5 thinking, ...).
bool EndsInsideThink(const std::string& text) {
  const size_t open = text.rfind("<think>");
  return open != std::string::npos && text.find("</think>", open) == std::string::npos &&
         text.find_first_not_of(" \t\r\n", open + 7) == std::string::npos;
}

// The prompt closed an empty reasoning block for the model (Qwen3 with enable_thinking false):
// the output has none.
bool EndsAfterThink(const std::string& text) {
  const size_t close = text.rfind("</think>");
  return close != std::string::npos && text.find_first_not_of(" \t\r\n", close + 8) == std::string::npos;
}

}  // namespace

std::shared_ptr<sampling::TokenConstraint> OutputPlan::NewConstraint() const {
  if (!grammar.valid()) return nullptr;
  return std::make_shared<GrammarConstraint>(grammar);
}

OutputShaper::OutputShaper(const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate* chat_template,
                           std::vector<int32_t> stop_ids)
    : tok_(tok), stop_ids_(std::move(stop_ids)) {
  if (!chat_template) return;
  tool_format_ = DetectToolFormat(chat_template->source());
  harmony_ = tool_format_ && tool_format_->channels;
  thinks_ = !harmony_ && chat_template->source().find("<think>") != std::string::npos;
}

std::shared_ptr<const grammar::Vocabulary> OutputShaper::Vocab() {
  std::call_once(vocab_once_, [this] {
    std::vector<std::string> bytes(static_cast<size_t>(tok_.vocab_size()));
    std::vector<int32_t> special;
    for (int32_t id = 0; id < tok_.vocab_size(); ++id) {
      bytes[id] = tok_.TokenBytes(id);
      if (tok_.IsSpecial(id)) special.push_back(id);
    }
    vocab_ = std::make_shared<const grammar::Vocabulary>(std::move(bytes), special, stop_ids_);
  });
  return vocab_;
}

bool OutputShaper::GrammarJob(const CompletionRequest& r, const ChoiceSetup& s, GrammarWork* work, ApiError* err) {
  const bool calls = r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed;
  if (calls && r.format != OutputFormat::kText)
    return Bad(err, "tool_choice \"required\" or a named function already constrains the output; drop response_format / grammar",
               "tool_choice");
  if (!calls && r.format == OutputFormat::kText) return true;  // unconstrained
  // What the grammar depends on, as its cache key; the text is built on the cache's thread.
  std::vector<Tool> tools;
  if (calls) {
    tools = r.tools;
    if (r.tool_choice == ToolChoice::kNamed) std::erase_if(tools, [&](const Tool& t) { return t.name != r.tool_name; });
  }
  const bool think = s.starts_in_reasoning, reasoning_first = s.reasoning && !s.starts_in_reasoning;
  const ToolFormat* format = s.tool_format;
  const OutputFormat kind = r.format;
  const std::string text = r.format_text;
  work->param = calls ? "tools" : kind == OutputFormat::kGrammar ? "grammar" : "response_format";
  work->key = std::to_string(static_cast<int>(kind)) + (calls ? "c" : "") + (think ? "t" : "") + (reasoning_first ? "r" : "") +
              (r.parallel_tool_calls ? "p" : "") + ":" + (format ? format->name : "") + ":" + text;
  for (const Tool& t : tools) work->key += "\n" + t.name + "\x01" + t.parameters.dump();
  work->build = [=, parallel = r.parallel_tool_calls]() -> core::StatusOr<std::string> {
    grammar::JsonSchemaOptions inner;
    inner.rule_prefix = "out-";
    std::string body;  // rules whose start is out-root (or root for a user grammar)
    switch (kind) {
      case OutputFormat::kText: break;
      case OutputFormat::kJsonObject: body = grammar::JsonObjectGbnf(inner); break;
      case OutputFormat::kJsonSchema: {
        auto g = grammar::JsonSchemaToGbnf(text, inner);
        if (!g.ok()) return core::InvalidArgument("response_format json_schema: " + g.status().message());
        body = *g;
        break;
      }
      case OutputFormat::kGrammar: return text;
    }
    if (calls) {
      auto g = ToolCallGrammar(*format, tools, parallel, reasoning_first);
      if (!g.ok()) return g.status();
      if (!think) return *g;
      // Rename its start so the reasoning block can lead.
      body = "out-root ::= root-calls\n" + std::string(*g).replace(0, 4, "root-calls");
    }
    // Inside an open <think>: free reasoning (no "<"), its end, then the constrained output.
    return think ? "root ::= [^<]* \"</think>\" [\\n]* out-root\n" + body : "root ::= out-root\n" + body;
  };
  return true;
}

bool OutputShaper::Plan(const CompletionRequest& r, const std::string& rendered, OutputPlan* plan, ApiError* err) {
  ChoiceSetup& s = plan->setup;
  s.chat = r.chat;
  s.stop_strings = r.stop_strings;
  s.min_tokens = r.params.min_tokens;
  s.stop_ids = r.params.stop_ids;
  s.top_logprobs = r.top_logprobs;
  if (r.chat) {
    s.reasoning = thinks_ && !EndsAfterThink(rendered);
    s.starts_in_reasoning = s.reasoning && EndsInsideThink(rendered);
    s.harmony = harmony_;
    if (harmony_) s.tool_format = tool_format_;  // its channels carry reasoning and content too
    if (r.tool_choice != ToolChoice::kNone) {
      if (!tool_format_)
        return Bad(err, "this model's chat template writes tool calls in no format radixlm parses (hermes, qwen3_coder, "
                        "llama3_json, mistral, harmony); send tool_choice \"none\" or no tools", "tools");
      s.tool_format = tool_format_;
      s.tools = r.tools;
    }
  }
  GrammarWork work;
  if (!GrammarJob(r, s, &work, err)) return false;
  if (!work.build) return true;
  // Built, compiled and its first mask costed on the cache's low-priority thread; this request
  // waits for it (the cost is bounded), and a grammar refused there is this client's 400.
  plan->grammar = cache_.GetAsync(std::move(work.key), std::move(work.build), Vocab());
  const grammar::GrammarCache::Result& compiled = plan->grammar.get();
  if (!compiled.ok()) return Bad(err, compiled.status().message(), work.param);
  return true;
}

}  // namespace radixlm::serve
