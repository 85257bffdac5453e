#include "serve/scoring_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "serve/http_common.h"

namespace radixlm::serve {
namespace {

using nlohmann::json;

// OpenAI's encoding_format "base64": the little-endian float32 bytes, base64-encoded. (No
// library we depend on ships an encoder; it is a dozen lines.)
std::string Base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = static_cast<uint8_t>(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? static_cast<uint8_t>(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? static_cast<uint8_t>(bytes[i + 2]) : 0;
    const uint32_t n = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// Why a job failed, as (HTTP status, message): too long -> 413, otherwise 422.
int StatusFor(const core::Status& st) {
  if (st.code() == core::StatusCode::kOutOfRange) return 413;
  if (st.code() == core::StatusCode::kResourceExhausted) return 503;
  if (st.code() == core::StatusCode::kUnimplemented) return 501;
  return 422;
}

std::optional<std::string> OptionalString(const json& body, const char* key, std::string* error) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_string()) {
    *error = std::string("'") + key + "' must be a string";
    return std::nullopt;
  }
  return body[key].get<std::string>();
}

bool OptionalBool(const json& body, const char* key, bool fallback, bool* out, std::string* error) {
  *out = fallback;
  if (!body.contains(key) || body[key].is_null()) return true;
  if (!body[key].is_boolean()) {
    *error = std::string("'") + key + "' must be a boolean";
    return false;
  }
  *out = body[key].get<bool>();
  return true;
}

ApiAnswer OpenAiError(const ApiError& e) { return {e.status, ErrorBody(e)}; }
ApiAnswer TeiError(int status, const std::string& message, const char* type = "Validation") {
  return {status, TeiErrorBody(message, type)};
}

// A failed TEI job: its status, "Unhealthy" when the service is out of resources.
ApiAnswer TeiJobError(const core::Status& st) {
  return TeiError(StatusFor(st), st.message(), st.code() == core::StatusCode::kResourceExhausted ? "Unhealthy" : "Validation");
}

}  // namespace

json TeiErrorBody(const std::string& message, const std::string& error_type) {
  return json({{"error", message}, {"error_type", error_type}});
}

ScoringApi::ScoringApi(const tokenizer::Tokenizer& tok, engine::ScoringService& scoring, ScoringApiConfig config)
    : tok_(tok), scoring_(scoring), config_(std::move(config)), rerank_format_(tokenizer::MakeRerankerFormat(tok)) {}

ApiAnswer ScoringApi::Call(ScoringRoute route, const json& body) const {
  ScoringCall call = Prepare(route, body);
  if (call.refused) return *call.refused;
  engine::ScoringJob job = call.job;
  return Answer(call, scoring_.Submit(std::move(job)).get());
}

core::StatusOr<std::vector<int32_t>> ScoringApi::EmbeddingInput(const std::string& instruction, const std::string& text,
                                                                 bool truncate) const {
  const bool last = config_.embed_pooling == engine::Pooling::kLastToken;
  return tokenizer::RenderEmbeddingInput(tok_, instruction, text, last, scoring_.max_input_tokens(), truncate);
}

// /v1/embeddings: OpenAI's request (input: a string, strings, token ids or lists of ids).
std::optional<ApiAnswer> ScoringApi::PrepareEmbeddings(const json& body, ScoringCall* call) const {
  std::string error;
  engine::ScoringJob& job = call->job;
  const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.embed_query_instruction);
  if (!error.empty()) return (OpenAiError({400, error, "invalid_request_error", "instruction", "invalid_type"}));
  call->encoding = OptionalString(body, "encoding_format", &error).value_or("float");
  if (!error.empty()) return (OpenAiError({400, error, "invalid_request_error", "encoding_format", "invalid_type"}));
  if (call->encoding != "float" && call->encoding != "base64")
    return (OpenAiError({400, "'encoding_format' must be 'float' or 'base64'", "invalid_request_error", "encoding_format", "invalid_value"}));
  if (!body.contains("input")) return (OpenAiError({400, "'input' is required", "invalid_request_error", "input", "missing"}));
  // input: a string, a list of strings, a list of token ids, or a list of lists of ids.
  const json& in = body["input"];
  if (in.is_array() && !IsTokenIdList(in) && static_cast<int64_t>(in.size()) > config_.max_inputs)
    return (OpenAiError({400, "'input' holds " + std::to_string(in.size()) + " inputs; the limit is " +
                                        std::to_string(config_.max_inputs) + " per request (--max-scoring-inputs)",
                               "invalid_request_error", "input", "too_many_inputs"}));
  std::optional<ApiAnswer> failed;
  auto add_text = [&](const std::string& text) -> bool {
    auto ids = EmbeddingInput(instruction, text, /*truncate=*/false);
    if (!ids.ok()) {
      failed = OpenAiError({400, "input " + std::to_string(job.inputs.size()) + ": " + ids.status().message(),
                            "invalid_request_error", "input", "context_length_exceeded"});
      return false;
    }
    job.inputs.push_back(std::move(*ids));
    return true;
  };
  if (in.is_string()) {
    if (!add_text(in.get<std::string>())) return (*failed);
  } else if (IsTokenIdList(in)) {
    job.inputs.push_back(in.get<std::vector<int32_t>>());
  } else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), [](const json& x) { return x.is_string(); })) {
    for (const json& x : in)
      if (!add_text(x.get<std::string>())) return (*failed);
  } else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), [](const json& x) { return IsTokenIdList(x); })) {
    for (const json& x : in) job.inputs.push_back(x.get<std::vector<int32_t>>());
  } else {
    return (OpenAiError({400, "'input' must be a non-empty string, list of strings, list of token ids or list of lists of ids",
                               "invalid_request_error", "input", "invalid_type"}));
  }
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    if (!body["dimensions"].is_number_integer() || body["dimensions"].get<int64_t>() < 1)
      return (OpenAiError({400, "'dimensions' must be a positive integer", "invalid_request_error", "dimensions", "invalid_value"}));
    call->dimensions = body["dimensions"].get<int64_t>();
  }
  return std::nullopt;
}

// /embed: TEI's request (inputs: a string or strings; normalize, truncate).
std::optional<ApiAnswer> ScoringApi::PrepareEmbed(const json& body, ScoringCall* call) const {
  std::string error;
  engine::ScoringJob& job = call->job;
  const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.embed_query_instruction);
  bool normalize = true, truncate = false;
  if (!error.empty() || !OptionalBool(body, "normalize", true, &normalize, &error) ||
      !OptionalBool(body, "truncate", false, &truncate, &error))
    return (TeiError(422, error));
  if (body.contains("prompt_name") && !body["prompt_name"].is_null())
    return (TeiError(422, "'prompt_name' is not supported; pass 'instruction' for queries"));
  if (!body.contains("inputs")) return (TeiError(422, "'inputs' is required"));
  const json& in = body["inputs"];
  if (in.is_array() && static_cast<int64_t>(in.size()) > config_.max_inputs)
    return (TeiError(413, "'inputs' holds " + std::to_string(in.size()) + " inputs; the limit is " +
                                    std::to_string(config_.max_inputs) + " per request (--max-scoring-inputs)"));
  std::vector<std::string> texts;
  if (in.is_string()) texts.push_back(in.get<std::string>());
  else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), [](const json& x) { return x.is_string(); }))
    for (const json& x : in) texts.push_back(x.get<std::string>());
  else return (TeiError(422, "'inputs' must be a string or a non-empty list of strings"));
  job.normalize = normalize;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = EmbeddingInput(instruction, texts[i], truncate);
    if (!ids.ok()) return (TeiError(413, "Input validation error: inputs " + std::to_string(i) + ": " + ids.status().message()));
    job.inputs.push_back(std::move(*ids));
  }
  return std::nullopt;
}

// /rerank: TEI's request (query, texts; raw_scores, return_text, truncate): yes / no logits.
std::optional<ApiAnswer> ScoringApi::PrepareRerank(const json& body, ScoringCall* call) const {
  std::string error;
  const int64_t limit = scoring_.max_input_tokens();
  engine::ScoringJob& job = call->job;
  const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.rerank_instruction);
  bool truncate = false;
  if (!error.empty() || !OptionalBool(body, "raw_scores", false, &call->raw_scores, &error) ||
      !OptionalBool(body, "return_text", false, &call->return_text, &error) ||
      !OptionalBool(body, "truncate", false, &truncate, &error))
    return (TeiError(422, error));
  if (!body.contains("query") || !body["query"].is_string()) return (TeiError(422, "'query' must be a string"));
  if (!body.contains("texts") || !body["texts"].is_array() || body["texts"].empty() ||
      !std::all_of(body["texts"].begin(), body["texts"].end(), [](const json& x) { return x.is_string(); }))
    return (TeiError(422, "'texts' must be a non-empty list of strings"));
  if (static_cast<int64_t>(body["texts"].size()) > config_.max_inputs)
    return (TeiError(413, "'texts' holds " + std::to_string(body["texts"].size()) + " texts; the limit is " +
                                    std::to_string(config_.max_inputs) + " per request (--max-scoring-inputs)"));
  if (!rerank_format_.ok()) return (TeiError(501, rerank_format_.status().message(), "Backend"));
  const tokenizer::RerankerFormat& format = *rerank_format_;
  const std::string query = body["query"].get<std::string>();
  job.kind = engine::ScoringJob::Kind::kYesNo;
  job.yes_id = format.yes_id;
  job.no_id = format.no_id;
  for (size_t i = 0; i < body["texts"].size(); ++i) {
    const std::string text = body["texts"][i].get<std::string>();
    // Render untruncated first: without "truncate" an over-long pair is refused, not cut.
    std::vector<int32_t> ids = tokenizer::RenderRerankPair(format, tok_, instruction, query, text, INT64_MAX);
    if (static_cast<int64_t>(ids.size()) > limit) {
      if (!truncate)
        return (TeiError(413, "Input validation error: texts " + std::to_string(i) + " gives " + std::to_string(ids.size()) +
                                        " tokens with the query and template; the limit is " + std::to_string(limit)));
      ids = tokenizer::RenderRerankPair(format, tok_, instruction, query, text, limit);
    }
    job.inputs.push_back(std::move(ids));
  }
  if (call->return_text) call->texts = body["texts"];
  return std::nullopt;
}

ScoringCall ScoringApi::Prepare(ScoringRoute route, const json& body) const {
  ScoringCall call;
  call.route = route;
  const bool openai = route == ScoringRoute::kEmbeddings;
  if (!body.is_object()) {
    call.refused = openai ? OpenAiError({400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_json"})
                          : TeiError(422, "the request body must be a JSON object");
    return call;
  }
  call.job.pooling = config_.embed_pooling;
  call.refused = route == ScoringRoute::kEmbeddings ? PrepareEmbeddings(body, &call)
                 : route == ScoringRoute::kEmbed    ? PrepareEmbed(body, &call)
                                                    : PrepareRerank(body, &call);
  if (!call.refused)
    for (const auto& x : call.job.inputs) call.tokens += static_cast<int64_t>(x.size());
  return call;
}

ApiAnswer ScoringApi::Answer(const ScoringCall& call, core::StatusOr<engine::ScoringResult> r) const {
  if (call.refused) return *call.refused;
  if (call.route == ScoringRoute::kEmbeddings) {
    if (!r.ok()) {
      const int status = StatusFor(r.status());
      return OpenAiError({status == 422 ? 400 : status, r.status().message(), "invalid_request_error", "input",
                          status == 413 ? "context_length_exceeded" : "invalid_value"});
    }
    json data = json::array();
    for (size_t i = 0; i < r->embeddings.size(); ++i) {
      std::vector<float>& e = r->embeddings[i];
      if (call.dimensions > 0) {
        if (call.dimensions > static_cast<int64_t>(e.size()))
          return OpenAiError({400, "'dimensions' exceeds the model's " + std::to_string(e.size()), "invalid_request_error",
                              "dimensions", "invalid_value"});
        // Matryoshka truncation: the leading dimensions, normalised again.
        e.resize(call.dimensions);
        double norm = 0;
        for (float x : e) norm += double(x) * x;
        if (norm > 0)
          for (float& x : e) x = static_cast<float>(x / std::sqrt(norm));
      }
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", call.encoding == "base64" ? json(Base64(e)) : json(e)}});
    }
    return {200, json({{"object", "list"}, {"data", data}, {"model", config_.model_name},
                       {"usage", {{"prompt_tokens", call.tokens}, {"total_tokens", call.tokens}}}})};
  }
  if (!r.ok()) return TeiJobError(r.status());
  if (call.route == ScoringRoute::kEmbed) return {200, json(r->embeddings)};
  std::vector<size_t> order(r->logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r->logits[a] > r->logits[b]; });
  json out = json::array();
  for (size_t i : order) {
    const double score = call.raw_scores ? r->logits[i] : 1.0 / (1.0 + std::exp(-r->logits[i]));
    json item = {{"index", i}, {"score", score}};
    if (call.return_text) item["text"] = call.texts[i];
    out.push_back(item);
  }
  return {200, out};
}

}  // namespace radixlm::serve
