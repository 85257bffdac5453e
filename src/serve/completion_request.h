// Parsing and validating a /v1/completions or /v1/chat/completions body, before any model or
// tokenizer is involved: what the client asked for, or the OpenAI-style error to answer.
// Strict: a field of another JSON type, an integer outside its range, or an option this server
// does not implement is a 400, never a silently different request. Objects keep the client's
// key order (tool schemas and messages render, and schemas constrain, in that order).
// Then BuildPrompt turns the prompt (text, token ids or chat messages rendered by the model's
// template with the tools) into token ids.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "serve/http_common.h"
#include "serve/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

// The parts of the server's configuration a request is checked against.
struct CompletionLimits {
  std::string model_name;
  int default_max_tokens = 256;
  std::vector<int32_t> stop_ids;  // always end generation (EOS, end of turn)
  bool allow_special_in_content = false;  // chat content may spell special tokens (else: text)
  // What one request may make the server hold or compute (each refused with a 400 naming it):
  int max_stop_strings = 4;         // OpenAI's limit
  size_t max_stop_bytes = 1024;     // each stop string (the filter holds back up to this much text)
  int64_t max_total_tokens = 131072;  // prompt + every sample's max_tokens (best_of x max_tokens)
};

inline constexpr int kMaxChoices = 16;  // n

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
enum class OutputFormat { kText, kJsonObject, kJsonSchema, kGrammar };

struct CompletionRequest {
  bool chat = false;
  // The prompt: chat variables for the template (messages, tools, chat_template_kwargs,
  // reasoning_effort), or (completions) a text or token ids.
  nlohmann::ordered_json chat_vars;
  std::vector<std::string> literal_texts;  // message contents: text even if they spell special tokens
  std::vector<Tool> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_name;  // kNamed
  bool parallel_tool_calls = true;
  // response_format / grammar: the schema (compact JSON) or GBNF text.
  OutputFormat format = OutputFormat::kText;
  std::string format_text;
  int top_logprobs = -1;  // -1: no logprobs; else the alternatives per token (0-20)
  bool echo = false;      // completions: the prompt's text before the completion
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  engine::RequestParams params;  // max_tokens, sampling, stop ids; the prompt is BuildPrompt's
  std::vector<std::string> stop_strings;
  bool stream = false, return_token_ids = false, include_usage = true;
  int n = 1;  // completions of the one prompt (choices); samples i use seed + i
  int best_of = 1;  // samples drawn (>= n); the n most likely (cumulative logprob) are returned
  bool default_max_tokens = false;  // max_tokens not given: the server cuts it to the room left
  bool allow_special_in_content = false;  // CompletionLimits'
};

// REQUIRES: params.prompt built. The prompt plus every sample's max_tokens within
// limits.max_total_tokens (this also bounds the response: n choices of at most max_tokens).
bool CheckRequestSize(const CompletionRequest& request, const CompletionLimits& limits, ApiError* err);

// Which of the samples best_of returns: the n highest cumulative log-probabilities, best first
// (ties: the lower index).
std::vector<int> BestOf(const std::vector<double>& cumulative_logprobs, int n);

bool ParseCompletionRequest(const nlohmann::ordered_json& body, bool chat, const CompletionLimits& limits,
                            CompletionRequest* out, ApiError* err);
// The chat-only fields (messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs,
// reasoning_effort) and the output fields (response_format, grammar, logprobs, top_logprobs,
// echo); chat_request.cc.
bool ParseChatFields(const nlohmann::ordered_json& body, CompletionRequest* out, ApiError* err);
// llama.cpp's --logit-bias spec TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 151645+8), the bias in
// [-100, 100] as a request's logit_bias; nothing when the spec is not one.
std::optional<std::pair<int32_t, float>> ParseLogitBiasSpec(const std::string& spec);
bool ParseOutputFields(const nlohmann::ordered_json& body, CompletionRequest* out, ApiError* err);

// The prompt's token ids: the chat rendered with the model's template (nullopt: the model has
// none, a 400; special-token strings inside message content are text unless allowed), a text
// encoded with special tokens added, or the ids as given.
// rendered (optional): the chat prompt's text. A chat's earlier tool calls go into their
// messages' content first where the template needs it (CallsIntoContent), in request.chat_vars,
// so every later rendering of the conversation sees them the same way.
bool BuildPrompt(CompletionRequest& request, const tokenizer::Tokenizer& tok,
                 const std::optional<tokenizer::ChatTemplate>& chat_format, std::vector<int32_t>* ids, ApiError* err,
                 std::string* rendered = nullptr);

}  // namespace radixlm::serve
