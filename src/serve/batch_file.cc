#include "serve/batch_file.h"

#include "core/json_text.h"

namespace radixlm::serve {

using nlohmann::json;

std::optional<BatchRoute> BatchRouteOf(std::string_view url) {
  if (url == "/v1/chat/completions") return BatchRoute::kChatCompletions;
  if (url == "/v1/completions") return BatchRoute::kCompletions;
  if (url == "/v1/embeddings") return BatchRoute::kEmbeddings;
  if (url == "/embed") return BatchRoute::kEmbed;
  if (url == "/rerank" || url == "/v1/rerank") return BatchRoute::kRerank;
  return std::nullopt;
}

bool ParseBatchLine(std::string_view text, int64_t index, int64_t line_number, BatchLine* out, BatchLineError* error) {
  const std::string where = "line " + std::to_string(line_number) + ": ";
  core::JsonParse parsed = core::ParseJsonBounded(text, {}, /*ordered=*/true);
  if (parsed.error == core::JsonParseError::kTooDeep || parsed.error == core::JsonParseError::kTooLarge) {
    *error = {"invalid_json", where + (parsed.error == core::JsonParseError::kTooDeep ? "nested more than " +
                                           std::to_string(core::JsonLimits{}.max_depth) + " deep" : "too many small values for its size"), ""};
    return false;
  }
  const nlohmann::ordered_json& j = parsed.ordered_value;
  if (parsed.error != core::JsonParseError::kNone || !j.is_object()) {
    *error = {"invalid_json", where + "not a JSON object", ""};
    return false;
  }
  if (!j.contains("custom_id") || !j["custom_id"].is_string() || j["custom_id"].get<std::string>().empty()) {
    *error = {"missing_custom_id", where + "'custom_id' must be a non-empty string", ""};
    return false;
  }
  const std::string id = j["custom_id"].get<std::string>();
  if (!j.contains("method") || j["method"] != "POST") {
    *error = {"invalid_method", where + "'method' must be \"POST\"", id};
    return false;
  }
  const auto route = j.contains("url") && j["url"].is_string() ? BatchRouteOf(j["url"].get<std::string>()) : std::nullopt;
  if (!route) {
    *error = {"invalid_url", where + "'url' must be one of /v1/chat/completions, /v1/completions, /v1/embeddings, /embed, /rerank", id};
    return false;
  }
  if (!j.contains("body") || !j["body"].is_object()) {
    *error = {"invalid_body", where + "'body' must be a JSON object", id};
    return false;
  }
  *out = {index, id, *route, j["body"]};
  return true;
}

json BatchResponseLine(int64_t index, const std::string& custom_id, int status, json body) {
  const std::string id = "batch_req_" + std::to_string(index);
  return {{"id", id}, {"custom_id", custom_id},
          {"response", {{"status_code", status}, {"request_id", "req_" + std::to_string(index)}, {"body", std::move(body)}}},
          {"error", nullptr}};
}

json BatchErrorLine(int64_t index, const BatchLineError& error) {
  return {{"id", "batch_req_" + std::to_string(index)},
          {"custom_id", error.custom_id.empty() ? json(nullptr) : json(error.custom_id)},
          {"response", nullptr},
          {"error", {{"code", error.code}, {"message", error.message}}}};
}

}  // namespace radixlm::serve
