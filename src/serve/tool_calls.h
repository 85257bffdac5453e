// Tool calls as each model family writes them, one row of a table per format: recognised from
// the chat template's markers, parsed from the model's output back into OpenAI tool_calls, and
// the GBNF that forces valid calls (tool_choice "required" or a named function) whatever the
// model. Formats:
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>   (Qwen2.5, Qwen3,
//                Hermes 2/3, Granite 4)
//   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n
//                </tool_call>   (Qwen3-Coder, Qwen3.5, Nemotron 3)
//   llama3_json  {"name": ..., "parameters": {...}}, optionally after <|python_tag|> (Llama 3.x)
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]   (Mistral Nemo and kin)
//   harmony      <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//                with analysis (reasoning) and final (content) channels   (gpt-oss)
//   pythonic     <|tool_call_start|>[name(key=value, ...), ...]<|tool_call_end|>, values Python
//                literals   (LFM2 / LFM2.5)
// An output that does not parse as calls is content, never a made-up call.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "core/status.h"

namespace radixlm::serve {

struct Tool {
  std::string name, description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // a JSON Schema
};

struct ToolCall {
  std::string id, name;
  std::string arguments;  // JSON text of an object
};

struct ParsedOutput {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};

struct ToolFormat {
  const char* name;
  // Texts that start calls in the output; streaming holds content back from the first one.
  // "{" means: an output whose first non-space character is "{".
  std::vector<std::string> markers;
  // The format's markers are special tokens: the output is decoded with special tokens kept.
  bool special_token_markers = false;
  // Calls need 9-character alphanumeric ids (Mistral's templates refuse others).
  bool short_ids = false;
  // Finds the calls in a complete output (reasoning already taken out, except for harmony
  // whose channels carry it).
  ParsedOutput (*parse)(const std::string& text, std::span<const Tool> tools);
  // GBNF rule `tool-calls`: one call (or, parallel, one or more) naming one of `names`, whose
  // arguments match rule `args_rules[i]` (defined elsewhere in the grammar).
  std::string (*grammar)(std::span<const std::string> names, std::span<const std::string> args_rules, bool parallel);
  // The output's channels carry reasoning and content as well as calls (harmony): the format
  // parses the whole output, nothing is split at <think> first.
  bool channels = false;
  // GBNF for one tool's arguments, its rules all prefixed by `prefix` and starting at
  // `prefix` + "root"; null: the arguments are JSON by the tool's parameters schema.
  core::StatusOr<std::string> (*args_grammar)(const Tool& tool, const std::string& prefix) = nullptr;
  // The text of an assistant turn's calls (OpenAI tool_calls objects) for CallsIntoContent;
  // null: the template renders tool_calls itself.
  std::string (*calls_text)(const nlohmann::ordered_json& tool_calls) = nullptr;
};

// The format a chat template's text uses (nullptr: none recognised, so no tools).
const ToolFormat* DetectToolFormat(const std::string& template_source);
const ToolFormat* FindToolFormat(const std::string& name);

// Splits `text` into reasoning and the rest at <think> / </think> (the reasoning models'
// markers). starts_in_reasoning: the prompt ended inside a <think> block.
void SplitReasoning(const std::string& text, bool starts_in_reasoning, std::string* reasoning, std::string* rest);

// The whole constrained output for tool_choice required / named: optional reasoning (when the
// template thinks), then the format's calls to `tools` (each arguments object generated from its
// parameters schema by the grammar module). Errors: a parameters schema the compiler refuses.
core::StatusOr<std::string> ToolCallGrammar(const ToolFormat& format, std::span<const Tool> tools, bool parallel,
                                            bool reasoning_first);

// OpenAI's strict mode on a schema: every object schema with `properties` and no
// `additionalProperties` gets `additionalProperties: false` (JSON Schema's default would allow
// any extra member; a tool call or strict output has exactly the declared ones).
nlohmann::ordered_json StrictObjects(nlohmann::ordered_json schema);

// Formats whose templates render an assistant turn's calls only as its content (LFM2's: the
// template never reads tool_calls): each such message's tool_calls written into its content in
// the format's own text, so a conversation's earlier calls reach the model as it wrote them.
// Nothing for other formats or templates that read tool_calls themselves.
void CallsIntoContent(const std::string& template_source, nlohmann::ordered_json* chat_vars);

// Assigns ids to parsed calls: "call_" + 24 random characters, or 9 alphanumerics (short_ids).
void AssignCallIds(const ToolFormat& format, core::Rng* rng, std::vector<ToolCall>* calls);

}  // namespace radixlm::serve
