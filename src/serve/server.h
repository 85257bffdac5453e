// OpenAI-compatible HTTP server (over serve::HttpServer): /v1/completions and /v1/chat/completions
// (streaming as server-sent events or not), /v1/models, /health, /metrics (Prometheus text);
// with a scoring service, /v1/embeddings (OpenAI) and /embed, /rerank (text-embeddings-
// inference's API) on the Qwen3-Embedding / Qwen3-Reranker formats (serve/scoring_routes.cc).
// The server sees the engine and the tokenizer only: it validates and tokenizes a request,
// submits it, and turns the engine's token events into JSON or SSE chunks. Usage reports
// prompt_tokens_details.cached_tokens as OpenAI does. Errors are OpenAI-style JSON
// ({"error": {"message", "type", "param", "code"}}) with the matching HTTP status.
// A client that disconnects cancels its request, streaming or not. Chat requests render the
// model's own template with the tools; output is shaped by serve/output_plan.h (tool calls,
// reasoning_content, response_format / grammar constraints, logprobs).
// Threading: the transport's worker threads block on per-request channels fed by the engine
// thread; /health, /v1/models and /metrics answer on its I/O thread, however busy they are.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/scoring_service.h"
#include "serve/choice_output.h"
#include "serve/completion_request.h"
#include "serve/completion_stream.h"
#include "serve/front_door.h"
#include "serve/response_store.h"
#include "serve/responses_api.h"
#include "serve/turn_memory.h"
#include "serve/http_common.h"
#include "serve/http_server.h"
#include "serve/output_plan.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

class Channel;  // engine events of one request (server.cc)

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model_name = "radixlm";
  std::string api_key;                  // empty: no authentication
  size_t max_body_bytes = 8u << 20;
  // Transport deadlines and limits (serve::HttpLimits): a slow or idle client costs a socket.
  double header_timeout_s = 10, body_timeout_s = 60, keep_alive_timeout_s = 5, write_timeout_s = 30;
  int max_connections = 512;
  int max_concurrent_requests = 64;     // beyond this: 429
  int default_max_tokens = 256;
  // > 0: every request's max_tokens is cut to this (finish reason length), as llama-server's
  // --n-predict; agent clients ask for 32K tokens per step.
  int max_output_tokens = 0;
  // serve --logit-bias (llama.cpp's option): added to every request's own logit_bias.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> stop_ids;        // always end generation (EOS, end-of-turn tokens)
  bool allow_special_in_content = false;  // chat content may spell special tokens (turn markers)
  int max_stop_strings = 4;
  size_t max_stop_bytes = 1024;
  int64_t max_total_tokens = 131072;  // prompt + best_of x max_tokens
  // Embedding / reranking defaults (requests may override the instructions).
  std::string rerank_instruction = "Given a web search query, retrieve relevant passages that answer the query";
  std::string embed_query_instruction;  // empty: inputs are embedded as documents (bare text)
  engine::Pooling embed_pooling = engine::Pooling::kLastToken;
  int64_t max_scoring_inputs = 2048;  // inputs per /v1/embeddings, /embed or /rerank request
  // The Responses API's stored responses (serve/response_store.h): at most this many, and bytes.
  size_t max_stored_responses = 1000;
  size_t response_store_bytes = size_t{256} << 20;
  // A history turn this server generated is prompted with the generated tokens (serve/turn_memory.h).
  bool turn_reuse = true;
  // KV cache events (serve/kv_events_publisher.h), announced in /server_info; empty: off.
  std::string kv_events_endpoint, kv_events_replay_endpoint, kv_events_topic;
};

class Server {
 public:
  // chat_format: nullopt when the model has no chat template (chat requests then get a 400).
  // scoring: serves /v1/embeddings, /embed and /rerank when non-null (borrowed).
  Server(ServerConfig config, engine::Engine& engine, const tokenizer::Tokenizer& tok,
         std::optional<tokenizer::ChatTemplate> chat_format, engine::ScoringService* scoring = nullptr);
  ~Server();
  // Binds the configured host:port (an error if it is in use; port 0: any free one) and returns
  // the port bound; then ListenAfterBind() serves.
  core::StatusOr<int> Bind();
  // Binds to the configured host on a free port (tests); returns the port or an error.
  core::StatusOr<int> BindToAnyPort();
  void ListenAfterBind();
  void Stop();

 private:
  void Routes();
  CompletionLimits Limits() const;
  // The one completion path, behind every front door (serve/front_door.h): parse, then Start
  // (prompt, output plan, submit), then the non-streamed answer or the stream.
  struct Running;
  void Handle(const HttpRequest& req, HttpResponse& res, FrontDoor& door);
  void CountTokens(const HttpRequest& req, HttpResponse& res, FrontDoor& door);
  void ReuseTurns(CompletionRequest& request, const std::string& rendered) const;
  void RememberTurn(const CompletionRequest& request, const std::string& rendered, const ChoiceEnd& end) const;
  bool Start(const HttpRequest& req, Exchange& ex, Running* run, ApiError* err);
  bool ScorePrompt(const CompletionRequest& request, std::vector<engine::TokenLogprob>* out, ApiError* err);
  void FitParams(const Exchange& ex, CompletionRequest& request) const;
  bool WarmPrompt(const HttpRequest& req, const CompletionRequest& request, Running* run, ApiError* err);
  bool SubmitRuns(const CompletionRequest& request, const OutputPlan& plan, const std::vector<engine::TokenLogprob>& prompt_logprobs,
                  Running* run, ApiError* err);
  void Respond(const HttpRequest& req, HttpResponse& res, const FrontDoor& door, const std::shared_ptr<Exchange>& ex,
               const std::shared_ptr<Running>& run);
  void Stream(const HttpRequest& req, HttpResponse& res, const std::shared_ptr<Exchange>& ex,
              const std::shared_ptr<Running>& run, const std::shared_ptr<InFlight>& guard);
  static engine::Usage TotalUsage(const std::vector<engine::Usage>& finals, int runs, const engine::Usage& prompt_usage);
  void ScoringRoutes();  // serve/scoring_routes.cc
  std::string MetricsText() const;
  nlohmann::json CacheTiers() const;  // /server_info cache_tiers: the pool ("cpu") and the disk tier

  ServerConfig config_;
  engine::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  std::optional<tokenizer::ChatTemplate> chat_format_;
  engine::ScoringService* scoring_ = nullptr;
  std::unique_ptr<OutputShaper> shaper_;  // tool calls, reasoning, grammars of completions
  std::unique_ptr<ResponseStore> responses_;
  std::unique_ptr<TurnMemory> turns_;  // null: --no-turn-reuse
  std::unique_ptr<FrontDoor> chat_door_, completion_door_, messages_door_, count_door_;
  std::unique_ptr<ResponsesDoor> responses_door_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> http_requests_{0}, http_errors_{0};
};

}  // namespace radixlm::serve
