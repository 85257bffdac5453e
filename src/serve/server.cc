#include "serve/server.h"

#include "core/json_text.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <cstring>
#include <cstdlib>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "serve/choice_output.h"
#include "serve/completion_request.h"
#include "serve/completion_stream.h"
#include "serve/http_common.h"
#include "serve/messages_api.h"
#include "serve/openai_api.h"
#include "serve/output_plan.h"
#include "serve/turn_memory.h"

namespace radixlm::serve {

using nlohmann::json;

// Engine events for one request, handed from the engine thread to the HTTP thread.
class Channel {
 public:
  void Push(const engine::TokenEvent& ev) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(ev);
    }
    cv_.notify_one();
  }
  // Waits for the next event (up to `timeout`); false on timeout.
  bool Pop(engine::TokenEvent* ev, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    *ev = events_.front();
    events_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<engine::TokenEvent> events_;
};

namespace {

int IndexOf(const std::vector<engine::RequestId>& ids, engine::RequestId id) {
  return static_cast<int>(std::find(ids.begin(), ids.end(), id) - ids.begin());
}

// What a refused submission answers: a prompt longer than the model's context or than the
// whole KV pool is context_length_exceeded (a client trims its history either way).
ApiError SubmitError(const core::Status& st, bool chat) {
  if (st.code() == core::StatusCode::kOutOfRange || st.code() == core::StatusCode::kResourceExhausted)
    return {400, st.message(), "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"};
  return {400, st.message(), "invalid_request_error", "prompt", "invalid_value"};
}

// Prometheus text exposition: # HELP, # TYPE and the sample of each metric.
struct PromText {
  std::ostringstream o;
  void Metric(const char* name, const char* type, const char* help, double value, const std::string& labels = "") {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << labels << " " << value << "\n";
  }
};

void WriteEngineMetrics(PromText& p, const engine::EngineMetrics& m, int64_t http_requests, int64_t http_errors) {
  p.Metric("radixlm_requests_total", "counter", "Requests accepted by the engine.", m.requests_submitted);
  p.Metric("radixlm_requests_finished_total", "counter", "Requests finished (any reason).", m.requests_finished);
  p.Metric("radixlm_requests_rejected_total", "counter", "Requests rejected at submission.", m.requests_rejected);
  p.Metric("radixlm_http_requests_total", "counter", "HTTP requests received.", http_requests);
  p.Metric("radixlm_http_errors_total", "counter", "HTTP requests answered with an error.", http_errors);
  p.Metric("radixlm_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", m.prompt_tokens);
  p.Metric("radixlm_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.", m.cached_prompt_tokens);
  p.Metric("radixlm_computed_tokens_total", "counter", "Tokens whose KV the model computed (prefill + decode).", m.computed_tokens);
  p.Metric("radixlm_deduplicated_tokens_total", "counter",
           "Prefill rows shared within a step and computed once (included in computed_tokens).", m.deduplicated_tokens);
  p.Metric("radixlm_generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  p.Metric("radixlm_cache_hit_rate", "gauge", "cache_hit_tokens_total / prompt_tokens_total.",
           m.prompt_tokens ? double(m.cached_prompt_tokens) / m.prompt_tokens : 0.0);
  p.Metric("radixlm_cache_tokens", "gauge", "Tokens held by the prefix cache.", m.tree_cached_tokens);
  p.Metric("radixlm_cache_evicted_tokens_total", "counter", "Tokens evicted from the prefix cache.", m.evicted_tokens);
  p.Metric("radixlm_queue_length", "gauge", "Requests waiting for admission.", m.waiting);
  p.Metric("radixlm_running_requests", "gauge", "Requests in the running batch.", m.running);
  p.Metric("radixlm_kv_blocks_in_use", "gauge", "KV blocks referenced by requests or the cache.", m.blocks_in_use);
  p.Metric("radixlm_kv_blocks_total", "gauge", "KV blocks in the pool.", m.blocks_total);
  p.Metric("radixlm_preemptions_total", "counter", "Requests preempted for lack of KV blocks.", m.preemptions);
  p.Metric("radixlm_steps_total", "counter", "Engine steps that computed tokens.", m.steps);
  p.Metric("radixlm_step_seconds_total", "counter", "Time spent in engine steps.", m.step_seconds_total);
}

// Per tier of the prefix cache (medium "cpu": the KV pool; then each medium under it: "disk",
// --cache-dir). One tier: the engine's own counts of tokens it served and of the time admissions
// waited; a stack: each medium's loaded blocks and load time.
void WriteTierMetrics(PromText& p, const engine::EngineMetrics& m, const cache::BlockTier* tier, int32_t block_tokens) {
  const std::vector<cache::TierReport> reports = tier ? tier->Reports() : std::vector<cache::TierReport>{};
  const bool one = reports.size() == 1;
  auto tiered = [&](const char* name, const char* type, const char* help, double cpu, auto of) {
    p.o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    if (cpu >= 0) p.o << name << "{medium=\"cpu\"} " << cpu << "\n";
    for (const cache::TierReport& r : reports) p.o << name << "{medium=\"" << r.medium << "\"} " << of(r) << "\n";
  };
  tiered("radixlm_cache_tier_blocks", "gauge", "Blocks held by each tier.", m.blocks_in_use,
         [](const cache::TierReport& r) { return static_cast<double>(r.blocks); });
  tiered("radixlm_cache_tier_hit_tokens_total", "counter", "Prompt tokens served from each tier.",
         m.cached_prompt_tokens - m.tier_hit_tokens, [&](const cache::TierReport& r) {
           return one ? static_cast<double>(m.tier_hit_tokens) : static_cast<double>(r.loaded_blocks) * block_tokens;
         });
  if (reports.empty()) return;
  auto field = [&](const char* name, const char* type, const char* help, int64_t cache::TierReport::*f) {
    tiered(name, type, help, -1, [f](const cache::TierReport& r) { return static_cast<double>(r.*f); });
  };
  field("radixlm_cache_tier_used_bytes", "gauge", "Bytes each tier holds.", &cache::TierReport::used_bytes);
  field("radixlm_cache_tier_capacity_bytes", "gauge", "Each tier's bound.", &cache::TierReport::capacity_bytes);
  field("radixlm_cache_tier_read_bytes_total", "counter", "Bytes loaded from each tier.", &cache::TierReport::bytes_read);
  field("radixlm_cache_tier_written_bytes_total", "counter", "Bytes written to each tier.", &cache::TierReport::bytes_written);
  field("radixlm_cache_tier_load_failures_total", "counter", "Loads that failed (missing, corrupt, I/O) and were recomputed.",
        &cache::TierReport::failed_loads);
  tiered("radixlm_cache_tier_load_seconds_total", "counter", "Wall time admissions waited for loads from each tier.", -1,
         [&](const cache::TierReport& r) { return one ? m.tier_load_seconds : r.load_seconds; });
  p.Metric("radixlm_cache_remote_waits_total", "counter", "Requests that waited for a prefix another replica was computing.",
           m.remote_waits);
  p.Metric("radixlm_cache_remote_wait_timeouts_total", "counter",
           "Of those, waits that ran out (computing the prefix here would have been as quick).", m.remote_wait_timeouts);
  p.Metric("radixlm_cache_remote_wait_seconds_total", "counter", "Time requests waited for another replica's blocks.",
           m.remote_wait_seconds);
  field("radixlm_cache_tier_skipped_stores_total", "counter", "Blocks a tier did not store (its write queue full; a remote medium refusing or unreachable).",
        &cache::TierReport::skipped_stores);
}

// Speculative decoding, by where drafts came from (engine::SpeculateConfig).
void WriteSpeculationMetrics(PromText& p, const engine::EngineMetrics& m) {
  auto by_origin = [&](const char* name, const char* help, auto field) {
    p.o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
    for (size_t i = 0; i < m.speculation.size(); ++i)
      p.o << name << "{origin=\"" << engine::SpeculationOrigin(i) << "\"} " << m.speculation[i].*field << "\n";
  };
  by_origin("radixlm_spec_verifications_total", "Decode steps of a request that verified a draft.", &engine::SpeculationCounts::steps);
  by_origin("radixlm_spec_draft_tokens_total", "Draft tokens computed.", &engine::SpeculationCounts::drafted);
  by_origin("radixlm_spec_accepted_tokens_total", "Draft tokens the model produced (kept).", &engine::SpeculationCounts::accepted);
  by_origin("radixlm_spec_recomputed_tokens_total", "Recurrent models: accepted tokens computed again after a rollback.",
            &engine::SpeculationCounts::recomputed);
  p.o << "# HELP radixlm_spec_acceptance_rate Accepted / drafted tokens.\n# TYPE radixlm_spec_acceptance_rate gauge\n";
  for (size_t i = 0; i < m.speculation.size(); ++i) {
    const engine::SpeculationCounts& c = m.speculation[i];
    p.o << "radixlm_spec_acceptance_rate{origin=\"" << engine::SpeculationOrigin(i) << "\"} "
        << (c.drafted ? double(c.accepted) / c.drafted : 0.0) << "\n";
  }
}

// The same figures under vLLM's names, which fleet routers and dashboards read (vLLM v1: gauges
// of requests and KV usage as a 0-1 fraction; prefix-cache counters in tokens). Unlike vLLM's,
// the usage fraction counts cached blocks that no request holds as used.
void WriteVllmMetrics(PromText& p, const engine::EngineMetrics& m, const std::string& model_name, bool speculate) {
  const std::string label = "{model_name=\"" + model_name + "\"}";
  auto vllm = [&](const char* name, const char* type, const char* help, double value) { p.Metric(name, type, help, value, label); };
  vllm("vllm:num_requests_running", "gauge", "Requests in the running batch.", m.running);
  vllm("vllm:num_requests_waiting", "gauge", "Requests waiting for admission.", m.waiting);
  vllm("vllm:kv_cache_usage_perc", "gauge", "KV blocks in use (requests or cache) / KV blocks, 0-1.",
       m.blocks_total ? double(m.blocks_in_use) / m.blocks_total : 0.0);
  vllm("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", m.prompt_tokens);
  vllm("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", m.cached_prompt_tokens);
  vllm("vllm:num_preemptions_total", "counter", "Requests preempted.", m.preemptions);
  vllm("vllm:prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", m.prompt_tokens);
  vllm("vllm:generation_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  if (!speculate) return;
  const engine::SpeculationCounts all = m.SpeculationTotal();
  vllm("vllm:spec_decode_num_drafts_total", "counter", "Drafts verified.", all.steps);
  vllm("vllm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.", all.drafted);
  vllm("vllm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", all.accepted);
}

void WriteScoringMetrics(PromText& p, const engine::ScoringStats& st) {
  p.Metric("radixlm_scoring_inputs_total", "counter", "Inputs embedded or reranked.", st.sequences);
  p.Metric("radixlm_scoring_tokens_total", "counter", "Tokens of embedded or reranked inputs.", st.original_rows);
  p.Metric("radixlm_scoring_computed_tokens_total", "counter", "Rows the scoring forwards computed (after intra-batch prefix dedup).",
           st.computed_rows);
  p.Metric("radixlm_scoring_forwards_total", "counter", "Scoring forwards.", st.forwards);
  p.Metric("radixlm_scoring_compacted_forwards_total", "counter", "Scoring forwards run compacted.", st.compacted_forwards);
  p.Metric("radixlm_scoring_batches_total", "counter", "Batches the scoring queue formed.", st.batches);
  p.Metric("radixlm_scoring_merged_requests_total", "counter", "Requests that shared a batch with another.", st.merged_jobs);
  p.Metric("radixlm_scoring_seconds_total", "counter", "Time spent in scoring forwards.", st.seconds);
}

// A request without the server's API key (when one is set; /health is always open): the 401 in
// the wire format of the API it asked (Anthropic's for /v1/messages), and true.
bool RefuseUnauthorized(const std::string& api_key, const HttpRequest& req, HttpResponse& res) {
  // Bearer (OpenAI's clients, Claude Code's ANTHROPIC_AUTH_TOKEN) or x-api-key (Anthropic's).
  if (!api_key.empty() && req.path != "/health" && req.Header("Authorization") != "Bearer " + api_key &&
      req.Header("x-api-key") != api_key) {
    const ApiError e{401, "Incorrect API key provided", "invalid_request_error", "", "invalid_api_key"};
    if (req.path.rfind("/v1/messages", 0) == 0) {
      res.status = e.status;
      res.SetContent(AnthropicErrorBody(e), "application/json");
    } else {
      SendError(res, e);
    }
    return true;
  }
  return false;
}

// /server_info: what a router needs to know of this replica (SGLang's /get_server_info, vLLM's
// /server_info): the KV block size its block hashes are over, the context, the limits.
json ServerInfo(const ServerConfig& config, const engine::Engine& engine, json cache_tiers, bool scoring, bool chat) {
  const engine::EngineConfig& ec = engine.config();
  return {
      {"engine", "radixlm"},
      {"model", config.model_name},
      {"max_model_len", engine.max_request_tokens()},
      {"block_size", ec.block_tokens},
      {"num_blocks", ec.num_blocks},
      {"prefix_cache", ec.prefix_cache},
      {"kv_events", config.kv_events_endpoint.empty()
                        ? json(nullptr)
                        : json({{"endpoint", config.kv_events_endpoint},
                                {"replay_endpoint", config.kv_events_replay_endpoint},
                                {"topic", config.kv_events_topic},
                                {"format", "vllm"},
                                {"block_hash", "sha256_cbor, last 8 bytes big-endian"},
                                {"snapshot", "/kv_cache/blocks"}})},
      {"cache_tiers", std::move(cache_tiers)},
      {"speculate", ec.speculate.on() ? json({{"source", ec.speculate.source},
                                               {"draft_max", ec.speculate.draft_max},
                                               {"max_step_rows", ec.speculate.max_step_rows}})
                                      : json(nullptr)},
      {"scoring", scoring},
      {"chat", chat},
      {"limits",
       {{"max_concurrent_requests", config.max_concurrent_requests},
        {"max_connections", config.max_connections},
        {"max_body_bytes", config.max_body_bytes},
        {"max_total_tokens", config.max_total_tokens},
        {"max_scoring_inputs", config.max_scoring_inputs}}}};
}

// /kv_cache/blocks: every full block the cache holds, by the keys the events use: a router's
// resync after it lost events beyond the replay buffer (computed on the engine loop).
void SendCachedBlocks(const ServerConfig& config, engine::Engine& engine, HttpResponse& res) {
  if (config.kv_events_endpoint.empty())
    return SendError(res, {404, "KV cache events are off (serve --kv-events ENDPOINT)", "invalid_request_error", "", "not_found"});
  const auto keys = engine.CachedBlockKeys(std::chrono::seconds(10));
  const auto states = engine.CachedStateKeys(std::chrono::seconds(10));
  if (!keys || !states) return SendError(res, {503, "the engine did not answer in time", "server_error", "", "busy"});
  json out = {{"block_size", engine.config().block_tokens}, {"block_hashes", *keys}};
  if (engine.publishes_ssm_checkpoints()) out["ssm_checkpoints"] = *states;
  res.SetContent(core::JsonText(out), "application/json");
}

}  // namespace

Server::Server(ServerConfig config, engine::Engine& engine, const tokenizer::Tokenizer& tok,
               std::optional<tokenizer::ChatTemplate> chat_format, engine::ScoringService* scoring)
    : config_(std::move(config)), engine_(engine), tok_(tok), chat_format_(std::move(chat_format)), scoring_(scoring),
      shaper_(std::make_unique<OutputShaper>(tok_, chat_format_ ? &*chat_format_ : nullptr, config_.stop_ids)) {
  chat_door_ = std::make_unique<OpenAiDoor>(true, Limits(), tok_);
  completion_door_ = std::make_unique<OpenAiDoor>(false, Limits(), tok_);
  messages_door_ = std::make_unique<MessagesDoor>(Limits(), /*count=*/false);
  responses_ = std::make_unique<ResponseStore>(
      ResponseStore::Config{.max_responses = config_.max_stored_responses, .max_bytes = config_.response_store_bytes});
  responses_door_ = std::make_unique<ResponsesDoor>(Limits(), tok_, *responses_);
  if (config_.turn_reuse) turns_ = std::make_unique<TurnMemory>(TurnMemory::Config{});
  count_door_ = std::make_unique<MessagesDoor>(Limits(), /*count=*/true);
  HttpLimits limits;
  limits.max_body_bytes = config_.max_body_bytes;
  limits.header_timeout_s = config_.header_timeout_s;
  limits.body_timeout_s = config_.body_timeout_s;
  limits.keep_alive_timeout_s = config_.keep_alive_timeout_s;
  limits.write_timeout_s = config_.write_timeout_s;
  limits.max_connections = config_.max_connections;
  limits.workers = config_.max_concurrent_requests + 8;  // headroom so 429s are answered at once
  // The transport's own refusals (400, 404, 413, 415, ...) read like the API's errors.
  http_ = std::make_unique<HttpServer>(limits, [this](int status, const std::string& message) {
    ++http_errors_;
    return TransportErrorBody(status, message);
  });
  Routes();
}

Server::~Server() { Stop(); }

CompletionLimits Server::Limits() const {
  return {.model_name = config_.model_name,
          .default_max_tokens = config_.default_max_tokens,
          .stop_ids = config_.stop_ids,
          .allow_special_in_content = config_.allow_special_in_content,
          .max_stop_strings = config_.max_stop_strings,
          .max_stop_bytes = config_.max_stop_bytes,
          .max_total_tokens = config_.max_total_tokens};
}

core::StatusOr<int> Server::Bind() { return http_->Bind(config_.host, config_.port); }

core::StatusOr<int> Server::BindToAnyPort() { return http_->Bind(config_.host, 0); }

void Server::ListenAfterBind() { http_->Serve(); }

void Server::Stop() {
  if (http_) http_->Stop();
}

void Server::Routes() {
  // Every request passes through here: counting and authentication. (Framing, sizes and
  // encodings are the transport's checks.)
  http_->SetPreRouting([this](const HttpRequest& req, HttpResponse& res) {
    ++http_requests_;
    if (!RefuseUnauthorized(config_.api_key, req, res)) return false;
    ++http_errors_;
    return true;
  });
  using Run = HttpServer::Run;
  http_->Route("GET", "/health", [](const HttpRequest&, HttpResponse& res) { res.SetContent(R"({"status":"ok"})", "application/json"); },
               Run::kInline);
  // The root: what is served here (clients probe it: Claude Code sends HEAD / first).
  http_->Route("GET", "/", [this](const HttpRequest&, HttpResponse& res) {
    res.SetContent(core::JsonText(json({{"engine", "radixlm"}, {"model", config_.model_name}, {"status", "ok"}})), "application/json");
  }, Run::kInline);
  http_->Route("GET", "/v1/models", [this](const HttpRequest&, HttpResponse& res) {
    json m = {{"id", config_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "radixlm"}};
    res.SetContent(core::JsonText(json({{"object", "list"}, {"data", {m}}})), "application/json");
  }, Run::kInline);
  http_->Route("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
    res.SetContent(MetricsText(), "text/plain; version=0.0.4");
  }, Run::kInline);
  http_->Route("GET", "/server_info", [this](const HttpRequest&, HttpResponse& res) {
    const json info = ServerInfo(config_, engine_, CacheTiers(), scoring_ != nullptr, chat_format_.has_value());
    res.SetContent(core::JsonText(info), "application/json");
  }, Run::kInline);
  http_->Route("GET", "/kv_cache/blocks",
               [this](const HttpRequest&, HttpResponse& res) { SendCachedBlocks(config_, engine_, res); });
  ScoringRoutes();
  // The completion path's front doors (serve/front_door.h): one per API wire format.
  for (auto& [path, door] : std::initializer_list<std::pair<const char*, FrontDoor*>>{
           {"/v1/chat/completions", chat_door_.get()}, {"/v1/completions", completion_door_.get()},
           {"/v1/messages", messages_door_.get()}, {"/v1/responses", responses_door_.get()}})
    http_->Route("POST", path, [this, door](const HttpRequest& req, HttpResponse& res) { Handle(req, res, *door); });
  http_->Route("POST", "/v1/messages/count_tokens",
               [this](const HttpRequest& req, HttpResponse& res) { CountTokens(req, res, *count_door_); });
  http_->Route("GET", "/v1/responses/*", [this](const HttpRequest& req, HttpResponse& res) { responses_door_->Get(req, res); },
               Run::kInline);
}

// One request in flight: its engine requests (one per sample drawn), their events, and each
// choice's output pipeline.
struct Server::Running {
  std::string rendered;  // the chat prompt's text
  std::shared_ptr<Channel> channel = std::make_shared<Channel>();
  std::vector<engine::RequestId> ids;
  std::vector<std::unique_ptr<ChoiceOutput>> outputs;
  engine::Usage prompt_usage;  // runs > 1: the prompt's, counted once
};

// parse (the door) -> prompt -> output plan -> submit -> (engine events -> text, stop strings,
// reasoning, tool calls -> the door's JSON or SSE)
void Server::Handle(const HttpRequest& req, HttpResponse& res, FrontDoor& door) {
  auto fail = [&](const ApiError& e) {
    ++http_errors_;
    res.status = e.status;
    res.SetContent(door.ErrorBody(e), "application/json");
  };
  // Shared with the stream's content provider, which runs after this handler returns: a
  // streaming request counts against the limit until its stream ends.
  const auto guard = std::make_shared<InFlight>(in_flight_, config_.max_concurrent_requests);
  if (!guard->ok()) return fail({429, "too many concurrent requests; retry later", "rate_limit_error", "", "rate_limit_exceeded"});
  ApiError err;
  const std::optional<nlohmann::ordered_json> parsed = ParseOrderedBody(req.body, &err);
  if (!parsed) return fail(err);
  std::shared_ptr<Exchange> ex = door.Parse(req, *parsed, &err);
  if (!ex) return fail(err);
  auto running = std::make_shared<Running>();
  if (!Start(req, *ex, running.get(), &err)) return fail(err);
  if (!ex->ignored.empty()) {  // what a client sent that this server skips (docs/agents.md)
    std::string list;
    for (const std::string& f : ex->ignored) list += (list.empty() ? "" : ", ") + f;
    res.SetHeader("Warning", "299 radixlm \"ignored: " + list + "\"");
  }
  if (!ex->request.stream) return Respond(req, res, door, ex, running);
  Stream(req, res, ex, running, guard);
}

// A prompt's size without running it: the door's request rendered and tokenized as Handle would.
void Server::CountTokens(const HttpRequest& req, HttpResponse& res, FrontDoor& door) {
  ApiError err;
  auto fail = [&](const ApiError& e) {
    ++http_errors_;
    res.status = e.status;
    res.SetContent(door.ErrorBody(e), "application/json");
  };
  const std::optional<nlohmann::ordered_json> parsed = ParseOrderedBody(req.body, &err);
  if (!parsed) return fail(err);
  std::unique_ptr<Exchange> ex = door.Parse(req, *parsed, &err);
  if (!ex) return fail(err);
  std::string rendered;
  if (!BuildPrompt(ex->request, tok_, chat_format_, &ex->request.params.prompt, &err, &rendered)) return fail(err);
  ReuseTurns(ex->request, rendered);
  res.SetContent(core::JsonText(json({{"input_tokens", ex->request.params.prompt.size()}})), "application/json");
}

// A chat prompt that continues a turn this server generated: the generated tokens in place of
// the template's re-rendering (serve/turn_memory.h).
void Server::ReuseTurns(CompletionRequest& request, const std::string& rendered) const {
  if (!turns_ || !request.chat || !chat_format_) return;
  const nlohmann::ordered_json& messages = request.chat_vars["messages"];
  auto render = [&](const nlohmann::ordered_json& m) -> core::StatusOr<std::string> {
    nlohmann::ordered_json vars = request.chat_vars;
    vars["messages"] = m;
    vars["add_generation_prompt"] = false;
    return chat_format_->Render(std::move(vars));
  };
  auto encode = [&](const std::string& text) {
    return request.allow_special_in_content ? tok_.Encode(text)
                                            : tok_.Encode(text, false, tokenizer::LocateContents(text, request.literal_texts));
  };
  std::vector<std::string> end_texts;
  for (int32_t id : config_.stop_ids) end_texts.push_back(tok_.TokenBytes(id));
  if (auto spliced = SpliceRemembered(*turns_, request.params.cache_salt, rendered, messages, render, encode, end_texts))
    request.params.prompt = std::move(*spliced);
}

// A finished chat turn, for the next request of its conversation (serve/turn_memory.h): only
// one that ended on an end-of-turn token (the glue to the next message is then known).
void Server::RememberTurn(const CompletionRequest& request, const std::string& rendered, const ChoiceEnd& end) const {
  if (!turns_ || !request.chat || request.best_of != 1 || end.reason != engine::FinishReason::kStop) return;
  const std::vector<int32_t>& ids = end.output->ids();
  if (ids.empty() || std::find(config_.stop_ids.begin(), config_.stop_ids.end(), ids.back()) == config_.stop_ids.end()) return;
  // The conversation without the generation prompt: what a re-sent history starts with.
  nlohmann::ordered_json vars = request.chat_vars;
  vars["add_generation_prompt"] = false;
  auto base = chat_format_->Render(std::move(vars));
  if (!base.ok() || rendered.compare(0, base->size(), *base) != 0) return;
  auto turn = std::make_shared<RememberedTurn>();
  turn->scope = request.params.cache_salt;
  turn->base_text = std::move(*base);
  turn->prompt_tokens = request.params.prompt;
  turn->generated.assign(ids.begin(), ids.end() - 1);  // the end-of-turn token: the template's marker takes its place
  turn->messages = request.chat_vars["messages"].size();
  turn->reply = AssistantMessage(end.output->Final(), /*arguments_as_objects=*/true);  // as a client's copy reaches the template
  turns_->Remember(std::move(turn));
}

// echo with logprobs: the prompt's log-probabilities, scored by the scoring service (one forward
// over the prompt, logits of every position).
bool Server::ScorePrompt(const CompletionRequest& request, std::vector<engine::TokenLogprob>* out, ApiError* err) {
  if (!scoring_) {
    *err = {400, "'echo' with 'logprobs' needs the scoring service (serve without --no-scoring)", "invalid_request_error",
            "echo", "unsupported_parameter"};
    return false;
  }
  engine::ScoringJob job;
  job.kind = engine::ScoringJob::Kind::kPromptLogprobs;
  job.top_k = request.top_logprobs;
  job.inputs = {request.params.prompt};
  auto scored = scoring_->Submit(std::move(job)).get();
  if (!scored.ok()) {
    *err = {400, "scoring the prompt: " + scored.status().message(), "invalid_request_error", "prompt", "invalid_value"};
    return false;
  }
  *out = std::move(scored->prompt_logprobs[0]);
  return true;
}

// What the server adds to a request's parameters: max_tokens cut to what the context leaves
// (a length the client left open, or asked beyond it: the answer then ends with finish reason
// length, as llama-server cuts it) and to --max-output-tokens, --logit-bias, the cache mark.
void Server::FitParams(const Exchange& ex, CompletionRequest& request) const {
  const int64_t left = engine_.max_request_tokens() - static_cast<int64_t>(request.params.prompt.size());
  if (left >= 1 && left < request.params.max_tokens) request.params.max_tokens = static_cast<int>(left);
  if (config_.max_output_tokens > 0 && request.params.max_tokens > config_.max_output_tokens)
    request.params.max_tokens = config_.max_output_tokens;
  for (const auto& [id, bias] : config_.logit_bias)
    if (id < tok_.vocab_size()) request.params.logit_bias.emplace_back(id, bias);
  request.params.top_logprobs = request.top_logprobs;
  if (ex.cache_mark_tokens == 0) return;
  request.params.cache_mark.tokens = ex.cache_mark_tokens == Exchange::kWholePrompt
                                         ? static_cast<int64_t>(request.params.prompt.size())
                                         : std::min<int64_t>(ex.cache_mark_tokens, request.params.prompt.size());
  request.params.cache_mark.ttl_seconds = ex.cache_mark_ttl_seconds;
}

// Parallel sampling: the prompt is prefilled once (a prompt-only request puts it in the radix
// cache), then the samples find it there and share its blocks, so they decode as one cascade
// group. The prompt's usage, or why it could not run.
bool Server::WarmPrompt(const HttpRequest& req, const CompletionRequest& request, Running* run, ApiError* err) {
  engine::RequestParams prefill = request.params;
  prefill.continuation = std::vector<int32_t>{};
  auto warm = std::make_shared<Channel>();
  auto wid = engine_.Submit(prefill, [warm](const engine::TokenEvent& ev) { warm->Push(ev); });
  if (!wid.ok()) {
    *err = SubmitError(wid.status(), request.chat);
    return false;
  }
  engine::TokenEvent ev;
  bool cancelled = false;
  while (!warm->Pop(&ev, std::chrono::milliseconds(200)) || ev.finish == engine::FinishReason::kNone) {
    if (!cancelled && req.ClientGone()) {
      cancelled = true;
      engine_.Cancel(*wid);
    }
  }
  if (cancelled) {
    *err = {499, "the client closed the connection", "invalid_request_error", "", "client_closed"};
    return false;
  }
  run->prompt_usage = ev.usage;
  return true;
}

// One engine request per sample drawn (n, or best_of), all reporting into one channel, and each
// one's output pipeline.
bool Server::SubmitRuns(const CompletionRequest& request, const OutputPlan& plan,
                        const std::vector<engine::TokenLogprob>& prompt_logprobs, Running* run, ApiError* err) {
  const int runs = request.best_of;
  for (int i = 0; i < runs; ++i) {
    engine::RequestParams params = request.params;
    params.sampling.seed = request.params.sampling.seed + static_cast<uint64_t>(i);
    params.cumulative_logprob = runs > request.n;
    params.constraint = plan.NewConstraint();  // each sample its own matcher
    auto channel = run->channel;
    auto id = engine_.Submit(std::move(params), [channel](const engine::TokenEvent& ev) { channel->Push(ev); });
    if (!id.ok()) {
      for (engine::RequestId done : run->ids) engine_.Cancel(done);  // their events go unread
      *err = SubmitError(id.status(), request.chat);
      return false;
    }
    run->ids.push_back(*id);
  }
  for (int i = 0; i < runs; ++i) {
    ChoiceSetup setup = plan.setup;
    setup.id_seed = request.params.sampling.seed * 31 + static_cast<uint64_t>(i) + 1;
    run->outputs.push_back(std::make_unique<ChoiceOutput>(tok_, std::move(setup)));
    if (request.echo && request.top_logprobs >= 0) run->outputs.back()->SetPromptLogprobs(request.params.prompt, prompt_logprobs);
  }
  return true;
}

bool Server::Start(const HttpRequest& req, Exchange& ex, Running* run, ApiError* err) {
  CompletionRequest& request = ex.request;
  std::string& rendered = run->rendered;
  if (!BuildPrompt(request, tok_, chat_format_, &request.params.prompt, err, &rendered)) return false;
  ReuseTurns(request, rendered);
  // (Anthropic's wording, which Claude Code compacts its history on; an error of every API.)
  if (static_cast<int64_t>(request.params.prompt.size()) >= engine_.max_request_tokens()) {
    *err = {400, "prompt is too long: " + std::to_string(request.params.prompt.size()) + " tokens > " +
                     std::to_string(engine_.max_request_tokens() - 1) + " maximum",
            "invalid_request_error", request.chat ? "messages" : "prompt", "context_length_exceeded"};
    return false;
  }
  std::vector<engine::TokenLogprob> prompt_logprobs;
  if (request.echo && request.top_logprobs >= 0 && !ScorePrompt(request, &prompt_logprobs, err)) return false;
  FitParams(ex, request);
  // (A prompt longer than the context gets the engine's context_length_exceeded at Submit.)
  const bool fits_context = static_cast<int64_t>(request.params.prompt.size()) + request.params.max_tokens <= engine_.max_request_tokens();
  if (fits_context && !CheckRequestSize(request, Limits(), err)) return false;
  auto plan = std::make_shared<OutputPlan>();
  if (!shaper_->Plan(request, rendered, plan.get(), err)) return false;
  if (request.best_of > 1 && !WarmPrompt(req, request, run, err)) return false;
  return SubmitRuns(request, *plan, prompt_logprobs, run, err);
}

// The usage of a response: the prompt once, every choice's completion.
engine::Usage Server::TotalUsage(const std::vector<engine::Usage>& finals, int runs, const engine::Usage& prompt_usage) {
  engine::Usage u = finals[0];
  if (runs > 1) {
    u.cached_tokens = prompt_usage.cached_tokens;
    u.completion_tokens = 0;
    for (const engine::Usage& f : finals) u.completion_tokens += f.completion_tokens;
  }
  return u;
}

void Server::Respond(const HttpRequest& req, HttpResponse& res, const FrontDoor& door, const std::shared_ptr<Exchange>& ex,
                     const std::shared_ptr<Running>& run) {
  const CompletionRequest& request = ex->request;
  const int runs = static_cast<int>(run->ids.size()), n = request.n;
  std::vector<ChoiceEnd> ends(runs);
  std::vector<std::string> errors(runs);
  int open = runs;
  bool gone = false;
  engine::TokenEvent ev;
  while (open > 0) {
    if (!gone && req.ClientGone()) {  // the client left: stop its work, drain the final events
      gone = true;
      for (engine::RequestId id : run->ids) engine_.Cancel(id);
    }
    if (!run->channel->Pop(&ev, std::chrono::milliseconds(200))) continue;
    const int i = IndexOf(run->ids, ev.id);
    ChoiceOutput& out = *run->outputs[i];
    const bool was_stopped = out.stopped();
    out.Push(ev);
    if (out.stopped() && !was_stopped) engine_.EndEarly(run->ids[i]);
    if (ev.finish != engine::FinishReason::kNone) {
      ends[i] = {&out, ev.finish, ev.usage};
      errors[i] = ev.error;
      --open;
    }
  }
  if (gone) return;  // nobody to answer
  for (int i = 0; i < runs; ++i)
    if (ends[i].reason == engine::FinishReason::kError) {
      ++http_errors_;
      const ApiError e{500, "generation failed: " + errors[i], "server_error", "", "generation_error"};
      res.status = e.status;
      return res.SetContent(door.ErrorBody(e), "application/json");
    }
  std::vector<int> picked(n);
  std::iota(picked.begin(), picked.end(), 0);
  std::vector<engine::Usage> finals;
  for (const ChoiceEnd& e : ends) finals.push_back(e.usage);
  if (runs > n) {
    std::vector<double> logprobs;
    for (const engine::Usage& f : finals) logprobs.push_back(f.cumulative_logprob);
    picked = BestOf(logprobs, n);
  }
  std::vector<ChoiceEnd> returned;
  for (int i : picked) returned.push_back(ends[i]);
  const engine::Usage usage = TotalUsage(finals, runs, run->prompt_usage);
  res.SetContent(ex->Whole(returned, usage), "application/json");
  ex->Finished(request.params.prompt, returned, usage);
  if (runs == 1) RememberTurn(request, run->rendered, returned[0]);
}

void Server::Stream(const HttpRequest& req, HttpResponse& res, const std::shared_ptr<Exchange>& ex,
                    const std::shared_ptr<Running>& run, const std::shared_ptr<InFlight>& guard) {
  const auto req_gone = req.gone;  // the request object ends with this handler; its flag lives on
  res.Stream("text/event-stream", [=, this](StreamSink& sink) {
    (void)guard;  // held until the stream ends
    const int n = static_cast<int>(run->ids.size());
    std::vector<ChoiceEnd> ends(n);
    int open = n;
    bool gone = false;
    auto cancel = [&] {
      gone = true;
      for (engine::RequestId id : run->ids) engine_.Cancel(id);
    };
    auto send = [&](const std::string& bytes) {
      if (gone || bytes.empty()) return;
      if (!sink.Write(bytes)) cancel();  // keep draining until every final event
    };
    send(ex->StreamStart({static_cast<int64_t>(ex->request.params.prompt.size()), n}));
    auto quiet_since = std::chrono::steady_clock::now();
    engine::TokenEvent ev;
    while (open > 0) {
      if (!run->channel->Pop(&ev, std::chrono::milliseconds(200))) {
        if (!gone && (sink.Gone() || req_gone->load())) cancel();  // client went away: drain the final events
        // A long prefill sends nothing for minutes: a keepalive every 5 s holds the client's
        // idle timers (Codex's and the SDKs') off.
        if (!gone && std::chrono::steady_clock::now() - quiet_since > std::chrono::seconds(5)) {
          send(ex->StreamKeepalive());
          quiet_since = std::chrono::steady_clock::now();
        }
        continue;
      }
      quiet_since = std::chrono::steady_clock::now();
      const int i = IndexOf(run->ids, ev.id);
      ChoiceOutput& out = *run->outputs[i];
      const bool was_stopped = out.stopped();
      ChoiceDelta delta = out.Push(ev);
      if (out.stopped() && !was_stopped) engine_.EndEarly(run->ids[i]);
      if (ev.finish == engine::FinishReason::kNone) {
        send(ex->StreamDelta(i, out, delta));
        continue;
      }
      ends[i] = {&out, ev.finish, ev.usage};
      --open;
      if (ev.finish == engine::FinishReason::kError)
        send(ex->StreamError({500, "generation failed: " + ev.error, "server_error", "", "generation_error"}));
      else
        send(ex->StreamChoiceEnd(i, delta, ends[i]));
    }
    if (gone) return;
    std::vector<engine::Usage> finals;
    for (const ChoiceEnd& e : ends) finals.push_back(e.usage);
    const engine::Usage usage = TotalUsage(finals, n, {});
    send(ex->StreamEnd(usage));
    ex->Finished(ex->request.params.prompt, ends, usage);
    if (n == 1) RememberTurn(ex->request, run->rendered, ends[0]);
  });
}

json Server::CacheTiers() const {
  const engine::EngineMetrics m = engine_.Metrics();
  const engine::EngineConfig& ec = engine_.config();
  json tiers = json::array();
  tiers.push_back({{"medium", "cpu"},
                   {"blocks", m.blocks_in_use},
                   {"capacity_blocks", ec.num_blocks},
                   {"cached_tokens", m.tree_cached_tokens},
                   {"hit_tokens", m.cached_prompt_tokens - m.tier_hit_tokens},
                   {"evicted_tokens", m.evicted_tokens}});
  const std::vector<cache::TierReport> reports = engine_.tier() ? engine_.tier()->Reports() : std::vector<cache::TierReport>{};
  for (const cache::TierReport& r : reports) {
    // One tier: the engine's own count of tokens it served and time admissions waited for it;
    // a stack: each medium's blocks (and its own load time).
    const bool one = reports.size() == 1;
    tiers.push_back({{"medium", r.medium},
                     {"path", r.path},
                     {"fingerprint", r.fingerprint},
                     {"io", r.io},
                     {"shared", r.shared},
                     {"blocks", r.blocks},
                     {"used_bytes", r.used_bytes},
                     {"capacity_bytes", r.capacity_bytes},
                     {"hit_tokens", one ? m.tier_hit_tokens : r.loaded_blocks * ec.block_tokens},
                     {"loaded_blocks", r.loaded_blocks},
                     {"bytes_read", r.bytes_read},
                     {"written_blocks", r.written_blocks},
                     {"bytes_written", r.bytes_written},
                     {"failed_loads", r.failed_loads},
                     {"skipped_stores", r.skipped_stores},
                     {"evicted_blocks", r.evicted_blocks},
                     {"load_seconds", one ? m.tier_load_seconds : r.load_seconds}});
  }
  return tiers;
}

std::string Server::MetricsText() const {
  const engine::EngineMetrics m = engine_.Metrics();
  PromText p;
  WriteEngineMetrics(p, m, http_requests_.load(), http_errors_.load());
  WriteTierMetrics(p, m, engine_.tier(), engine_.config().block_tokens);
  if (engine_.config().speculate.on()) WriteSpeculationMetrics(p, m);
  WriteVllmMetrics(p, m, config_.model_name, engine_.config().speculate.on());
  if (scoring_) WriteScoringMetrics(p, scoring_->stats());
  return p.o.str();
}

}  // namespace radixlm::serve
