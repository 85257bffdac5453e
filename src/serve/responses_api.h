// OpenAI's Responses API (POST /v1/responses, GET /v1/responses/{id}) as a front door
// (serve/front_door.h): what Codex CLI speaks (and openai-node's responses.create / .stream).
//
// Reading, field by field (the table in responses_api.cc, and docs/agents.md): input (a string,
// or items: message with input_text / output_text / refusal parts and roles system, developer,
// user, assistant; function_call; function_call_output; reasoning) and instructions become the
// chat form's messages (leading system / developer messages joined into one system message;
// later ones folded into the next user turn; a function_call_output for a call_id no earlier
// function_call has is a 400); function tools become chat tools, hosted tools (web_search,
// file_search, namespace, custom, ...) are skipped; tool_choice, parallel_tool_calls,
// max_output_tokens (absent: up to the context), temperature, top_p, text.format (json_object,
// json_schema), reasoning.effort; prompt_cache_key marks the prompt for the prefix cache;
// store (default true) and previous_response_id: the stored response's conversation continues,
// from its exact tokens (serve/response_store.h). Fields a local server cannot act on
// (include, client_metadata, reasoning.summary, text.verbosity, service_tier, ...) are skipped
// and named in a Warning header; background, conversation and prompt are 400s; an unknown
// field is a 400. Any model name is echoed.
// Writing: the Response object (output: a reasoning item, a message item, function_call
// items; status completed, or incomplete with reason max_output_tokens; usage with
// input_tokens_details.cached_tokens), or the SSE events response.created, response.in_progress
// (also as a keepalive during a long prefill), response.output_item.added / .done,
// response.content_part.added / .done, response.reasoning_text.delta / .done,
// response.output_text.delta / .done, response.function_call_arguments.delta / .done, then
// response.completed (or .incomplete, .failed), every event with its sequence_number.
#pragma once

#include <memory>

#include "serve/front_door.h"
#include "serve/response_store.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

class ResponsesDoor : public FrontDoor {
 public:
  // store: where stored responses live (borrowed); api_key_of: the scope of a request.
  ResponsesDoor(CompletionLimits limits, const tokenizer::Tokenizer& tok, ResponseStore& store)
      : limits_(std::move(limits)), tok_(tok), store_(store) {}
  std::unique_ptr<Exchange> Parse(const HttpRequest& req, const nlohmann::ordered_json& body, ApiError* err) override;
  std::string ErrorBody(const ApiError& e) const override;
  // GET /v1/responses/{id}: the stored Response object, or a 404.
  void Get(const HttpRequest& req, HttpResponse& res) const;

 private:
  CompletionLimits limits_;
  const tokenizer::Tokenizer& tok_;
  ResponseStore& store_;
};

// Whose stored responses a request may see: its API key (Bearer or x-api-key) and cache_salt.
std::string ResponseScope(const HttpRequest& req, const std::string& cache_salt);

}  // namespace radixlm::serve
