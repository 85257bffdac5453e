// /v1/embeddings (OpenAI), /embed and /rerank (text-embeddings-inference) over HTTP: the
// server's part is the transport (the concurrency limit, the body as JSON, the status line);
// what each API computes and answers is serve::ScoringApi's.
#include <memory>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "serve/http_common.h"
#include "serve/scoring_api.h"
#include "serve/server.h"

namespace radixlm::serve {

void Server::ScoringRoutes() {
  std::shared_ptr<const ScoringApi> api;
  if (scoring_)
    api = std::make_shared<const ScoringApi>(
        tok_, *scoring_,
        ScoringApiConfig{config_.model_name, config_.rerank_instruction, config_.embed_query_instruction, config_.embed_pooling,
                         config_.max_scoring_inputs});
  // OpenAI errors for /v1, TEI errors for the others.
  auto route = [api, this](const char* path, bool openai, ApiAnswer (ScoringApi::*call)(const nlohmann::json&) const) {
    http_->Route("POST", path, [=, this](const HttpRequest& req, HttpResponse& res) {
      auto answer = [&](const ApiAnswer& a) {
        if (a.status >= 400) ++http_errors_;
        res.status = a.status;
        res.SetContent(core::JsonText(a.body), "application/json");
      };
      auto fail = [&](int status, const std::string& msg, const char* tei_type, const char* code) {
        answer(openai ? ApiAnswer{status, ErrorBody({status, msg, status == 429 ? "rate_limit_error" : "invalid_request_error", "", code})}
                      : ApiAnswer{status, TeiErrorBody(msg, tei_type)});
      };
      if (!api) return fail(501, "embedding and reranking are not enabled on this server", "Unhealthy", "unsupported");
      InFlight guard(in_flight_, config_.max_concurrent_requests);
      if (!guard.ok())
        return fail(429, openai ? "too many concurrent requests; retry later" : "Model is overloaded", "Overloaded", "rate_limit_exceeded");
      ApiError err;
      const std::optional<nlohmann::json> body = ParseBody(req.body, &err);
      if (!body) return fail(openai || err.status == 413 ? err.status : 422, err.message, "Validation", err.code.c_str());
      answer(((*api).*call)(*body));
    });
  };
  route("/v1/embeddings", true, &ScoringApi::Embeddings);
  route("/embed", false, &ScoringApi::Embed);
  route("/rerank", false, &ScoringApi::Rerank);
}

}  // namespace radixlm::serve
