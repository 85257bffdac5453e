// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as a front door
// (serve/front_door.h): what Claude Code and the @anthropic-ai/sdk speak.
//
// Reading: the body becomes the internal chat request, field by field (a table in
// messages_api.cc, and docs/agents.md):
//   system (a string or text blocks; Claude Code's per-prompt "x-anthropic-billing-header" block
//   is dropped, as llama.cpp normalises it, so prefixes repeat across sessions) -> a system
//   message; messages: text blocks -> content (blocks joined by blank lines), tool_use ->
//   tool_calls, tool_result -> tool messages (a result for an id no earlier tool_use has is a
//   400), thinking -> reasoning_content, redacted_thinking dropped, a mid-conversation system
//   message appended to the user message it follows, else folded into the next one (most chat
//   templates refuse a late system message; appending keeps a growing conversation's prefix);
//   tools (custom) -> function tools, server tools (web_search_..., bash_...) skipped;
//   tool_choice auto / any / tool / none; stop_sequences; temperature, top_p, top_k; thinking
//   enabled / adaptive / disabled -> the template's enable_thinking; output_config.effort ->
//   reasoning_effort, output_config.format -> a JSON-schema constraint; cache_control marks ->
//   the prompt is marked for the prefix cache (5 min, or 1 h). Fields this server cannot act on
//   (context_management, container, mcp_servers, service_tier, inference_geo, metadata) are
//   skipped and named in a Warning header; a field the API does not have is a 400. The model
//   name is echoed, whatever it is (one model is served).
// Writing: the Message object, or the SSE sequence message_start, (content_block_start,
// content_block_delta (thinking_delta, signature_delta, text_delta, input_json_delta),
// content_block_stop)*, message_delta (stop_reason end_turn / max_tokens / stop_sequence /
// tool_use, usage), message_stop, with ping while the prompt is computed. Usage follows the API:
// input_tokens excludes cached tokens; cache_read_input_tokens are the prefix cache's hit;
// cache_creation_input_tokens what was computed of a prompt the client marked. Errors:
// {"type": "error", "error": {"type", "message"}}; an overflowing prompt reads "prompt is too
// long: N tokens > M maximum" (what Claude Code compacts on).
#pragma once

#include "serve/front_door.h"

namespace radixlm::serve {

class MessagesDoor : public FrontDoor {
 public:
  // count: /v1/messages/count_tokens (no max_tokens, nothing generated).
  MessagesDoor(CompletionLimits limits, bool count) : limits_(std::move(limits)), count_(count) {}
  std::unique_ptr<Exchange> Parse(const HttpRequest& req, const nlohmann::ordered_json& body, ApiError* err) override;
  std::string ErrorBody(const ApiError& e) const override;
  bool counts_tokens() const { return count_; }

 private:
  CompletionLimits limits_;
  bool count_;
};

// The Anthropic error body of e: {"type": "error", "error": {"type": <by status>, "message"}}.
std::string AnthropicErrorBody(const ApiError& e);

}  // namespace radixlm::serve
