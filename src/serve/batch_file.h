// The OpenAI Batch file format, as vLLM's run-batch reads and writes it: one request per input
// line {"custom_id", "method": "POST", "url", "body"}; one output line per request
// {"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}. A line that
// is not a request (bad JSON, no custom_id, an unknown url) gets an output line with "error"
// set and "response" null; a request the API refuses gets its 4xx status and error body, as the
// HTTP route would answer it. Pure formatting: `radixlm batch` runs the requests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace radixlm::serve {

enum class BatchRoute { kChatCompletions, kCompletions, kEmbeddings, kEmbed, kRerank };

// /v1/chat/completions, /v1/completions, /v1/embeddings, /embed, /rerank (also /v1/rerank).
std::optional<BatchRoute> BatchRouteOf(std::string_view url);

struct BatchLine {
  int64_t index = 0;  // 0-based line number among the file's non-blank lines
  std::string custom_id;
  BatchRoute route = BatchRoute::kCompletions;
  nlohmann::ordered_json body;  // key order kept (schemas, tools)
};

struct BatchLineError {
  std::string code;     // "invalid_json", "missing_custom_id", "invalid_method", "invalid_url", "invalid_body"
  std::string message;  // names the line (1-based, as an editor shows it)
  std::string custom_id;  // when the line has a readable one
};

// One input line. `line_number`: 1-based, for messages.
bool ParseBatchLine(std::string_view text, int64_t index, int64_t line_number, BatchLine* out, BatchLineError* error);

// The output line of a request the API answered (any status): response set, error null.
nlohmann::json BatchResponseLine(int64_t index, const std::string& custom_id, int status, nlohmann::json body);
// The output line of a line that is not a request: response null, error {code, message}.
nlohmann::json BatchErrorLine(int64_t index, const BatchLineError& error);

}  // namespace radixlm::serve
