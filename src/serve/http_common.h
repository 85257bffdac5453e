// What the server's routes share: the concurrency limit (InFlight), token-id lists in requests,
// and error responses in
// OpenAI style ({"error": {message, type,
// param, code}}) for the /v1 API, text-embeddings-inference style ({"error", "error_type"})
// for /embed and /rerank, so each API's clients parse the errors they expect.
#pragma once

#include "core/json_text.h"
#include "serve/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace radixlm::serve {

// Counts a request against the server's concurrency limit for as long as it lives.
class InFlight {
 public:
  InFlight(std::atomic<int>& n, int limit) : n_(n), ok_(++n <= limit) {}
  ~InFlight() { --n_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  bool ok() const { return ok_; }  // false: over the limit (answer 429)

 private:
  std::atomic<int>& n_;
  bool ok_;
};

// True when `v` is a JSON integer that T holds exactly. nlohmann's get<T>() narrows without a
// check (4294967296 as int32 is 0), so every integer a request gives is checked with this first.
template <typename T, typename Json = nlohmann::json>
bool IntegerFits(const Json& v) {
  if (v.is_number_unsigned()) return v.template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  return v.is_number_integer() && v.template get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         v.template get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
}

// True when `x` is a non-empty array of integers that fit int32_t, so get<std::vector<int32_t>>()
// returns exactly the ids sent. Whether they are in the vocabulary is the engine's check.
template <typename Json>
bool IsTokenIdList(const Json& x) {
  return x.is_array() && !x.empty() && std::all_of(x.begin(), x.end(), [](const Json& v) { return IntegerFits<int32_t>(v); });
}

struct ApiError {
  int status = 400;
  std::string message, type = "invalid_request_error", param, code;
};

// The OpenAI error object of `e`: {"error": {message, type, param, code}}.
inline nlohmann::json ErrorBody(const ApiError& e) {
  using nlohmann::json;
  json err = {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json({{"error", err}});
}

// A request body as JSON, or why not: not JSON (400 invalid_json), nested deeper than
// core::JsonLimits::max_depth (400 too_deep), or a document whose parse would hold too much
// memory for its size (413 request_too_large; core/json_text.h).
inline bool BodyError(const core::JsonParse& p, ApiError* err) {
  switch (p.error) {
    case core::JsonParseError::kNone: return false;
    case core::JsonParseError::kInvalid: *err = {400, "the request body is not valid JSON", "invalid_request_error", "", "invalid_json"}; break;
    case core::JsonParseError::kTooDeep:
      *err = {400, "the request body nests arrays and objects more than " + std::to_string(core::JsonLimits{}.max_depth) + " deep",
              "invalid_request_error", "", "invalid_json"};
      break;
    case core::JsonParseError::kTooLarge:
      *err = {413, "the request body's JSON would take over " + std::to_string(p.estimated_bytes >> 20) +
                       " MiB of memory to parse (too many small values for its size)", "invalid_request_error", "", "request_too_large"};
      break;
  }
  return true;
}

inline std::optional<nlohmann::json> ParseBody(std::string_view body, ApiError* err) {
  core::JsonParse p = core::ParseJsonBounded(body);
  if (BodyError(p, err)) return std::nullopt;
  return std::move(p.value);
}

// The same, keeping each object's key order (completion requests: messages, tools, schemas).
inline std::optional<nlohmann::ordered_json> ParseOrderedBody(std::string_view body, ApiError* err) {
  core::JsonParse p = core::ParseJsonBounded(body, {}, /*ordered=*/true);
  if (BodyError(p, err)) return std::nullopt;
  return std::move(p.ordered_value);
}

// The body of the transport's own refusals (400, 404, 408, 413, 415, 501, 503, ...), in the
// API's error format; `message` may quote client bytes (invalid UTF-8 is replaced).
inline std::string TransportErrorBody(int status, const std::string& message) {
  const char* code = status == 404 ? "not_found" : status == 413 ? "request_too_large" : status == 503 ? "server_busy" : "invalid_request";
  return core::JsonText(ErrorBody({status, message, status >= 500 && status != 501 ? "server_error" : "invalid_request_error", "", code}));
}

inline void SendError(HttpResponse& res, const ApiError& e) {
  res.status = e.status;
  res.SetContent(core::JsonText(ErrorBody(e)), "application/json");
}

// error_type: "Validation" (422 / 413), "Overloaded" (429), "Backend" (500), "Unhealthy" (503).
inline void SendTeiError(HttpResponse& res, int status, const std::string& message, const std::string& error_type) {
  res.status = status;
  res.SetContent(core::JsonText(nlohmann::json({{"error", message}, {"error_type", error_type}})), "application/json");
}

}  // namespace radixlm::serve
