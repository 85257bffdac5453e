// /v1/embeddings (OpenAI), /embed and /rerank (text-embeddings-inference): validate and
// tokenize with the Qwen3-Embedding / Qwen3-Reranker formats, submit one job per request to
// the scoring service (which merges concurrent requests into batches and dedups shared
// prefixes), and shape the answer as each API does.
//   /v1/embeddings {input: str | [str] | [int] | [[int]], encoding_format?: float|base64,
//                   dimensions?: n (leading dimensions, re-normalised), instruction?: str}
//   /embed  {inputs: str | [str], normalize?: true, truncate?: false, instruction?: str} -> [[f]]
//   /rerank {query, texts: [str], raw_scores?: false, return_text?: false, truncate?: false,
//            instruction?: str} -> [{index, score[, text]}] by descending score
// ("instruction" is radixlm's extension: the query instruction of the two formats.)
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "serve/http_common.h"
#include "serve/server.h"
#include "tokenizer/scoring_format.h"

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

}  // namespace

void Server::ScoringRoutes() {
  auto& s = *http_;
  // Shared by the three routes: the body as a JSON object, the concurrency limit, the wait.
  auto unavailable = [this]() -> std::optional<std::string> {
    if (!scoring_) return "embedding and reranking are not enabled on this server";
    return std::nullopt;
  };
  auto run = [this](engine::ScoringJob job) { return scoring_->Submit(std::move(job)).get(); };
  auto parse_body = [](const httplib::Request& req, json* body) -> std::string {
    *body = json::parse(req.body, nullptr, false);
    if (body->is_discarded()) return "the request body is not valid JSON";
    if (!body->is_object()) return "the request body must be a JSON object";
    return "";
  };

  // The TEI routes' common start (enabled, under the concurrency limit, a JSON object body)
  // and end (a failed job); each answers the error itself and returns null / nullopt.
  auto tei_fail = [this](httplib::Response& res, int status, const std::string& msg, const char* type = "Validation") {
    ++http_errors_;
    SendTeiError(res, status, msg, type);
  };
  auto tei_start = [=, this](const httplib::Request& req, httplib::Response& res,
                             json* body) -> std::unique_ptr<InFlight> {
    if (auto why = unavailable()) {
      tei_fail(res, 501, *why, "Unhealthy");
      return nullptr;
    }
    auto guard = std::make_unique<InFlight>(in_flight_, config_.max_concurrent_requests);
    if (!guard->ok()) {
      tei_fail(res, 429, "Model is overloaded", "Overloaded");
      return nullptr;
    }
    if (std::string e = parse_body(req, body); !e.empty()) {
      tei_fail(res, 422, e);
      return nullptr;
    }
    return guard;
  };
  auto tei_run = [=](httplib::Response& res, engine::ScoringJob job) -> std::optional<engine::ScoringResult> {
    auto r = run(std::move(job));
    if (r.ok()) return std::move(*r);
    tei_fail(res, StatusFor(r.status()), r.status().message(),
             r.status().code() == core::StatusCode::kResourceExhausted ? "Unhealthy" : "Validation");
    return std::nullopt;
  };

  // The reranker template and yes/no ids: tokenized once (an error here is answered per request).
  const auto rerank_format = std::make_shared<const core::StatusOr<tokenizer::RerankerFormat>>(
      tokenizer::MakeRerankerFormat(tok_));

  s.Post("/v1/embeddings", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto fail = [&](const ApiError& e) {
      ++http_errors_;
      SendError(res, e);
    };
    if (auto why = unavailable()) return fail({501, *why, "invalid_request_error", "", "unsupported"});
    InFlight guard(in_flight_, config_.max_concurrent_requests);
    if (!guard.ok()) return fail({429, "too many concurrent requests; retry later", "rate_limit_error", "", "rate_limit_exceeded"});
    json body;
    if (std::string e = parse_body(req, &body); !e.empty()) return fail({400, e, "invalid_request_error", "", "invalid_json"});
    std::string error;
    const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.embed_query_instruction);
    if (!error.empty()) return fail({400, error, "invalid_request_error", "instruction", "invalid_type"});
    const std::string encoding = OptionalString(body, "encoding_format", &error).value_or("float");
    if (!error.empty()) return fail({400, error, "invalid_request_error", "encoding_format", "invalid_type"});
    if (encoding != "float" && encoding != "base64")
      return fail({400, "'encoding_format' must be 'float' or 'base64'", "invalid_request_error", "encoding_format", "invalid_value"});
    if (!body.contains("input")) return fail({400, "'input' is required", "invalid_request_error", "input", "missing"});
    // input: a string, a list of strings, a list of token ids, or a list of lists of ids.
    const json& in = body["input"];
    const bool last = config_.embed_pooling == engine::Pooling::kLastToken;
    const int64_t limit = scoring_->max_input_tokens();
    engine::ScoringJob job;
    job.pooling = config_.embed_pooling;
    auto add_text = [&](const std::string& text) -> bool {
      auto ids = tokenizer::RenderEmbeddingInput(tok_, instruction, text, last, limit, /*truncate=*/false);
      if (!ids.ok()) {
        fail({400, "input " + std::to_string(job.inputs.size()) + ": " + ids.status().message(), "invalid_request_error",
              "input", "context_length_exceeded"});
        return false;
      }
      job.inputs.push_back(std::move(*ids));
      return true;
    };
    if (in.is_string()) {
      if (!add_text(in.get<std::string>())) return;
    } else if (IsTokenIdList(in)) {
      job.inputs.push_back(in.get<std::vector<int32_t>>());
    } else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), [](const json& x) { return x.is_string(); })) {
      for (const json& x : in)
        if (!add_text(x.get<std::string>())) return;
    } else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), IsTokenIdList)) {
      for (const json& x : in) job.inputs.push_back(x.get<std::vector<int32_t>>());
    } else {
      return fail({400, "'input' must be a non-empty string, list of strings, list of token ids or list of lists of ids",
                   "invalid_request_error", "input", "invalid_type"});
    }
    int64_t dims = 0;
    if (body.contains("dimensions") && !body["dimensions"].is_null()) {
      if (!body["dimensions"].is_number_integer() || body["dimensions"].get<int64_t>() < 1)
        return fail({400, "'dimensions' must be a positive integer", "invalid_request_error", "dimensions", "invalid_value"});
      dims = body["dimensions"].get<int64_t>();
    }
    int64_t tokens = 0;
    for (const auto& x : job.inputs) tokens += static_cast<int64_t>(x.size());
    auto r = run(std::move(job));
    if (!r.ok()) {
      const int status = StatusFor(r.status());
      return fail({status == 422 ? 400 : status, r.status().message(), "invalid_request_error", "input",
                   status == 413 ? "context_length_exceeded" : "invalid_value"});
    }
    json data = json::array();
    for (size_t i = 0; i < r->embeddings.size(); ++i) {
      std::vector<float>& e = r->embeddings[i];
      if (dims > 0) {
        if (dims > static_cast<int64_t>(e.size()))
          return fail({400, "'dimensions' exceeds the model's " + std::to_string(e.size()), "invalid_request_error",
                       "dimensions", "invalid_value"});
        // Matryoshka truncation: the leading dimensions, normalised again.
        e.resize(dims);
        double norm = 0;
        for (float x : e) norm += double(x) * x;
        if (norm > 0)
          for (float& x : e) x = static_cast<float>(x / std::sqrt(norm));
      }
      data.push_back({{"object", "embedding"}, {"index", i},
                      {"embedding", encoding == "base64" ? json(Base64(e)) : json(e)}});
    }
    res.set_content(json({{"object", "list"}, {"data", data}, {"model", config_.model_name},
                          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}})
                        .dump(),
                    "application/json");
  });

  s.Post("/embed", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto fail = [&](int status, const std::string& msg) { tei_fail(res, status, msg); };
    json body;
    const auto guard = tei_start(req, res, &body);
    if (!guard) return;
    std::string error;
    const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.embed_query_instruction);
    bool normalize = true, truncate = false;
    if (!error.empty() || !OptionalBool(body, "normalize", true, &normalize, &error) ||
        !OptionalBool(body, "truncate", false, &truncate, &error))
      return fail(422, error);
    if (body.contains("prompt_name") && !body["prompt_name"].is_null())
      return fail(422, "'prompt_name' is not supported; pass 'instruction' for queries");
    if (!body.contains("inputs")) return fail(422, "'inputs' is required");
    const json& in = body["inputs"];
    std::vector<std::string> texts;
    if (in.is_string()) texts.push_back(in.get<std::string>());
    else if (in.is_array() && !in.empty() && std::all_of(in.begin(), in.end(), [](const json& x) { return x.is_string(); }))
      for (const json& x : in) texts.push_back(x.get<std::string>());
    else return fail(422, "'inputs' must be a string or a non-empty list of strings");
    engine::ScoringJob job;
    job.pooling = config_.embed_pooling;
    job.normalize = normalize;
    const bool last = config_.embed_pooling == engine::Pooling::kLastToken;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tokenizer::RenderEmbeddingInput(tok_, instruction, texts[i], last, scoring_->max_input_tokens(), truncate);
      if (!ids.ok()) return fail(413, "Input validation error: inputs " + std::to_string(i) + ": " + ids.status().message());
      job.inputs.push_back(std::move(*ids));
    }
    const auto r = tei_run(res, std::move(job));
    if (!r) return;
    res.set_content(json(r->embeddings).dump(), "application/json");
  });

  s.Post("/rerank", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto fail = [&](int status, const std::string& msg) { tei_fail(res, status, msg); };
    json body;
    const auto guard = tei_start(req, res, &body);
    if (!guard) return;
    std::string error;
    const std::string instruction = OptionalString(body, "instruction", &error).value_or(config_.rerank_instruction);
    bool raw = false, return_text = false, truncate = false;
    if (!error.empty() || !OptionalBool(body, "raw_scores", false, &raw, &error) ||
        !OptionalBool(body, "return_text", false, &return_text, &error) ||
        !OptionalBool(body, "truncate", false, &truncate, &error))
      return fail(422, error);
    if (!body.contains("query") || !body["query"].is_string()) return fail(422, "'query' must be a string");
    if (!body.contains("texts") || !body["texts"].is_array() || body["texts"].empty() ||
        !std::all_of(body["texts"].begin(), body["texts"].end(), [](const json& x) { return x.is_string(); }))
      return fail(422, "'texts' must be a non-empty list of strings");
    const auto& format = *rerank_format;
    if (!format.ok()) return tei_fail(res, 501, format.status().message(), "Backend");
    const std::string query = body["query"].get<std::string>();
    const int64_t limit = scoring_->max_input_tokens();
    engine::ScoringJob job;
    job.kind = engine::ScoringJob::Kind::kYesNo;
    job.yes_id = format->yes_id;
    job.no_id = format->no_id;
    for (size_t i = 0; i < body["texts"].size(); ++i) {
      const std::string text = body["texts"][i].get<std::string>();
      // Render untruncated first: without "truncate" an over-long pair is refused, not cut.
      std::vector<int32_t> ids = tokenizer::RenderRerankPair(*format, tok_, instruction, query, text, INT64_MAX);
      if (static_cast<int64_t>(ids.size()) > limit) {
        if (!truncate)
          return fail(413, "Input validation error: texts " + std::to_string(i) + " gives " + std::to_string(ids.size()) +
                               " tokens with the query and template; the limit is " + std::to_string(limit));
        ids = tokenizer::RenderRerankPair(*format, tok_, instruction, query, text, limit);
      }
      job.inputs.push_back(std::move(ids));
    }
    const auto r = tei_run(res, std::move(job));
    if (!r) return;
    std::vector<size_t> order(r->logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r->logits[a] > r->logits[b]; });
    json out = json::array();
    for (size_t i : order) {
      const double score = raw ? r->logits[i] : 1.0 / (1.0 + std::exp(-r->logits[i]));
      json item = {{"index", i}, {"score", score}};
      if (return_text) item["text"] = body["texts"][i];
      out.push_back(item);
    }
    res.set_content(out.dump(), "application/json");
  });
}

}  // namespace radixlm::serve
