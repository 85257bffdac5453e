#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "serve/http_common.h"

namespace radixlm::serve {
namespace {

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

// The parsed, validated parameters of a completion request.
struct Parsed {
  std::vector<int32_t> prompt;
  engine::RequestParams params;
  std::vector<std::string> stop_strings;
  bool stream = false, return_token_ids = false, include_usage = true;
  bool default_max_tokens = false;  // max_tokens not given: cut to the room the request has
};

// Reads an optional field of type T. Strict, because nlohmann converts freely (true -> 1,
// 2.9 -> 2, 4294967297 -> 1 for an int): a value of another JSON type, or an integer outside
// T's range, is a 400, never a silently different request.
template <typename T>
bool Field(const json& body, const char* name, T* out, ApiError* err) {
  if (!body.contains(name) || body[name].is_null()) return true;
  const json& v = body[name];
  bool fits;
  if constexpr (std::is_same_v<T, bool>) {
    fits = v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    fits = IntegerFits<T>(v);
    if (!fits && v.is_number_integer()) {
      *err = {400, std::string("'") + name + "' is out of range", "invalid_request_error", name, "invalid_value"};
      return false;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    fits = v.is_number();
  } else {
    fits = true;
  }
  if (fits) {
    *out = v.get<T>();
    return true;
  }
  *err = {400, std::string("'") + name + "' has the wrong type", "invalid_request_error", name, "invalid_type"};
  return false;
}

bool ParseCommon(const json& body, const ServerConfig& cfg, Parsed* p, ApiError* err) {
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) {
      *err = {400, "'model' must be a string", "invalid_request_error", "model", "invalid_type"};
      return false;
    }
    if (body["model"].get<std::string>() != cfg.model_name) {
      *err = {404, "The model '" + body["model"].get<std::string>() + "' does not exist; this server serves '" + cfg.model_name + "'",
              "invalid_request_error", "model", "model_not_found"};
      return false;
    }
  }
  int max_tokens = cfg.default_max_tokens;
  if (!Field(body, "max_tokens", &max_tokens, err)) return false;
  if (!Field(body, "max_completion_tokens", &max_tokens, err)) return false;
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  p->default_max_tokens = !given("max_tokens") && !given("max_completion_tokens");
  if (max_tokens < 1) {
    *err = {400, "'max_tokens' must be at least 1", "invalid_request_error", "max_tokens", "invalid_value"};
    return false;
  }
  p->params.max_tokens = max_tokens;
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0, n = 1;
  // No seed means a fresh one (OpenAI's meaning); a seed makes sampling reproducible.
  int64_t seed = static_cast<int64_t>(std::random_device{}() >> 1);
  if (!Field(body, "temperature", &temperature, err) || !Field(body, "top_p", &top_p, err) ||
      !Field(body, "top_k", &top_k, err) || !Field(body, "seed", &seed, err) || !Field(body, "n", &n, err) ||
      !Field(body, "stream", &p->stream, err) || !Field(body, "return_token_ids", &p->return_token_ids, err))
    return false;
  if (temperature < 0 || temperature > 2 || top_p <= 0 || top_p > 1) {
    *err = {400, "'temperature' must be in [0, 2] and 'top_p' in (0, 1]", "invalid_request_error", "temperature", "invalid_value"};
    return false;
  }
  if (n != 1) {
    *err = {400, "only n = 1 is supported", "invalid_request_error", "n", "unsupported_value"};
    return false;
  }
  // Options this server does not implement are refused rather than ignored, so a client never
  // takes an answer without them for one with them. Their "off" values pass.
  for (const char* name : {"logprobs", "top_logprobs", "echo", "best_of", "logit_bias", "suffix", "tools", "response_format"}) {
    if (!body.contains(name)) continue;
    const json& v = body[name];
    const std::string key = name;
    const bool off = v.is_null() || v == false || (v.is_number_integer() && v == (key == "best_of" ? 1 : 0) && key != "logprobs") ||
                     ((v.is_object() || v.is_array()) && v.empty()) || (v.is_string() && v.get<std::string>().empty()) ||
                     (key == "response_format" && v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text");
    if (!off) {
      *err = {400, "'" + key + "' is not supported by this server", "invalid_request_error", key, "unsupported_parameter"};
      return false;
    }
  }
  p->params.sampling = {temperature, top_k, top_p, static_cast<uint64_t>(seed)};
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      p->stop_strings.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 4 && std::all_of(s.begin(), s.end(), [](const json& x) { return x.is_string(); })) {
      for (const auto& x : s) p->stop_strings.push_back(x.get<std::string>());
    } else {
      *err = {400, "'stop' must be a string or a list of up to 4 strings", "invalid_request_error", "stop", "invalid_type"};
      return false;
    }
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) {
      *err = {400, "'stream_options' must be an object", "invalid_request_error", "stream_options", "invalid_type"};
      return false;
    }
    if (!Field(body["stream_options"], "include_usage", &p->include_usage, err)) return false;
  }
  p->params.stop_ids = cfg.stop_ids;
  return true;
}

json UsageJson(const engine::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string NewId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" +
         std::to_string(counter++);
}

int64_t Now() { return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

Server::Server(ServerConfig config, engine::Engine& engine, const tokenizer::Tokenizer& tok,
               std::optional<tokenizer::ChatFormat> chat_format, engine::ScoringService* scoring)
    : config_(std::move(config)), engine_(engine), tok_(tok), chat_format_(chat_format), scoring_(scoring),
      http_(std::make_unique<httplib::Server>()) {
  const int workers = config_.max_concurrent_requests + 8;  // headroom so 429s and /metrics still answer
  http_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http_->set_payload_max_length(config_.max_body_bytes);
  Routes();
}

Server::~Server() { Stop(); }

core::Status Server::Listen() {
  if (!http_->bind_to_port(config_.host.c_str(), config_.port))
    return core::IoError("cannot listen on " + config_.host + ":" + std::to_string(config_.port));
  http_->listen_after_bind();
  return core::Status::Ok();
}

core::StatusOr<int> Server::BindToAnyPort() {
  const int port = http_->bind_to_any_port(config_.host.c_str());
  if (port <= 0) return core::IoError("cannot bind to " + config_.host);
  return port;
}

void Server::ListenAfterBind() { http_->listen_after_bind(); }

void Server::Stop() {
  if (http_) http_->stop();
}

void Server::Routes() {
  auto& s = *http_;
  // Every route passes through here: authentication, counting, and the concurrency limit.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++http_requests_;
    if (!config_.api_key.empty() && req.path != "/health") {
      if (req.get_header_value("Authorization") != "Bearer " + config_.api_key) {
        SendError(res, {401, "Incorrect API key provided", "invalid_request_error", "", "invalid_api_key"});
        ++http_errors_;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    ++http_errors_;
    if (res.status == 413) SendError(res, {413, "request body exceeds " + std::to_string(config_.max_body_bytes) + " bytes"});
    else if (res.status == 404) SendError(res, {404, "no such route", "invalid_request_error", "", "not_found"});
    else SendError(res, {res.status, "request failed"});
  });
  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    ++http_errors_;
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, {500, what, "server_error"});
  });
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", config_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "radixlm"}};
    res.set_content(json({{"object", "list"}, {"data", {m}}}).dump(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsText(), "text/plain; version=0.0.4");
  });
  ScoringRoutes();
  for (const bool chat : {false, true}) {
    s.Post(chat ? "/v1/chat/completions" : "/v1/completions", [this, chat](const httplib::Request& req, httplib::Response& res) {
      auto fail = [&](const ApiError& e) {
        ++http_errors_;
        SendError(res, e);
      };
      // Shared with the stream's content provider, which runs after this handler returns: a
      // streaming request counts against the limit until its stream ends.
      const auto guard = std::make_shared<InFlight>(in_flight_, config_.max_concurrent_requests);
      if (!guard->ok()) return fail({429, "too many concurrent requests; retry later", "rate_limit_error", "", "rate_limit_exceeded"});
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded()) return fail({400, "the request body is not valid JSON", "invalid_request_error", "", "invalid_json"});
      if (!body.is_object()) return fail({400, "the request body must be a JSON object"});
      auto parsed = std::make_shared<Parsed>();
      ApiError err;
      if (!ParseCommon(body, config_, parsed.get(), &err)) return fail(err);
      if (chat) {
        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
          return fail({400, "'messages' must be a non-empty list", "invalid_request_error", "messages", "invalid_type"});
        std::vector<tokenizer::ChatMessage> msgs;
        for (const json& m : body["messages"]) {
          if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
            return fail({400, "each message needs a string 'role'", "invalid_request_error", "messages", "invalid_type"});
          std::string content;
          if (m.contains("content") && m["content"].is_string()) {
            content = m["content"].get<std::string>();
          } else if (m.contains("content") && m["content"].is_array()) {  // [{type: text, text}, ...]
            for (const json& part : m["content"]) {
              if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
                  !part["text"].is_string())
                return fail({400, "content parts must be {\"type\": \"text\", \"text\": string}; this model reads text only",
                             "invalid_request_error", "messages", "invalid_type"});
              content += part["text"].get<std::string>();
            }
          } else if (!(m.contains("content") && m["content"].is_null())) {
            return fail({400, "each message needs 'content' (a string or a list of text parts)", "invalid_request_error", "messages", "invalid_type"});
          }
          msgs.push_back({m["role"].get<std::string>(), content});
        }
        if (!chat_format_)
          return fail({400, "this model has no chat template; use /v1/completions", "invalid_request_error", "messages", "unsupported"});
        auto text = tokenizer::RenderChat(*chat_format_, msgs, /*add_generation_prompt=*/true);
        if (!text.ok()) return fail({400, text.status().message(), "invalid_request_error", "messages", "invalid_value"});
        parsed->prompt = tok_.Encode(*text);
      } else {
        if (!body.contains("prompt")) return fail({400, "'prompt' is required", "invalid_request_error", "prompt", "missing"});
        const json& pr = body["prompt"];
        if (pr.is_string()) {
          parsed->prompt = tok_.Encode(pr.get<std::string>(), /*add_special=*/true);
        } else if (IsTokenIdList(pr)) {
          parsed->prompt = pr.get<std::vector<int32_t>>();
        } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
          parsed->prompt = tok_.Encode(pr[0].get<std::string>(), true);
        } else {
          return fail({400, "'prompt' must be a string or a list of token ids", "invalid_request_error", "prompt", "invalid_type"});
        }
      }
      parsed->params.prompt = parsed->prompt;
      if (parsed->default_max_tokens) {  // the client asked for no length: never ask more than fits for it
        const int64_t left = engine_.max_request_tokens() - static_cast<int64_t>(parsed->prompt.size());
        if (left >= 1 && left < parsed->params.max_tokens) parsed->params.max_tokens = static_cast<int>(left);
      }
      auto channel = std::make_shared<Channel>();
      auto id = engine_.Submit(parsed->params, [channel](const engine::TokenEvent& ev) { channel->Push(ev); });
      if (!id.ok()) {
        const auto code = id.status().code();
        if (code == core::StatusCode::kOutOfRange)
          return fail({400, id.status().message(), "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"});
        return fail({400, id.status().message(), "invalid_request_error", "prompt", "invalid_value"});
      }
      const std::string rid = NewId(chat ? "chatcmpl-" : "cmpl-");
      const int64_t created = Now();
      const engine::RequestId engine_id = *id;
      // Turns engine events into text deltas, applying stop strings (which cancel the request).
      struct Decoder {
        tokenizer::StreamDecoder stream;
        std::string text;       // emitted so far
        std::string held;       // text that might be the start of a stop string
        std::vector<int32_t> ids;
        bool stopped_by_string = false;
      };
      auto dec = std::make_shared<Decoder>(Decoder{tokenizer::StreamDecoder(tok_), "", "", {}, false});
      auto advance = [this, parsed, dec, engine_id](const engine::TokenEvent& ev) -> std::string {
        if (dec->stopped_by_string) return "";
        if (ev.token >= 0) dec->ids.push_back(ev.token);
        std::string piece = ev.token >= 0 ? dec->stream.Push(ev.token) : "";
        if (ev.finish != engine::FinishReason::kNone) piece += dec->stream.Finish();
        dec->held += piece;
        for (const std::string& stop : parsed->stop_strings) {
          const size_t at = stop.empty() ? std::string::npos : dec->held.find(stop);
          if (at != std::string::npos) {
            dec->held.resize(at);
            dec->stopped_by_string = true;
            engine_.Cancel(engine_id);
          }
        }
        // Hold back a tail that could still grow into a stop string.
        size_t keep = 0;
        if (!dec->stopped_by_string && ev.finish == engine::FinishReason::kNone)
          for (const std::string& stop : parsed->stop_strings)
            for (size_t k = std::min(stop.size() - 1, dec->held.size()); k > keep; --k)
              if (dec->held.compare(dec->held.size() - k, k, stop, 0, k) == 0) { keep = k; break; }
        std::string out = dec->held.substr(0, dec->held.size() - keep);
        dec->held.erase(0, dec->held.size() - keep);
        dec->text += out;
        return out;
      };
      auto finish_reason = [dec](const engine::TokenEvent& ev) -> std::string {
        if (dec->stopped_by_string || ev.finish == engine::FinishReason::kStop) return "stop";
        if (ev.finish == engine::FinishReason::kLength) return "length";
        return "stop";
      };
      const std::string object = chat ? "chat.completion" : "text_completion";
      if (!parsed->stream) {
        engine::TokenEvent ev;
        while (true) {
          // cpp-httplib 0.11 cannot tell a non-streaming handler that its client left; such a
          // request runs to completion (streaming requests are cancelled on disconnect).
          if (!channel->Pop(&ev, std::chrono::milliseconds(200))) continue;
          advance(ev);
          if (ev.finish != engine::FinishReason::kNone) break;
        }
        json choice = {{"index", 0}, {"finish_reason", finish_reason(ev)}, {"logprobs", nullptr}};
        if (chat) choice["message"] = {{"role", "assistant"}, {"content", dec->text}};
        else choice["text"] = dec->text;
        if (parsed->return_token_ids) choice["token_ids"] = dec->ids;
        json out = {{"id", rid}, {"object", object}, {"created", created}, {"model", config_.model_name},
                    {"choices", {choice}}, {"usage", UsageJson(ev.usage)}};
        res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
        return;
      }
      // Streaming: server-sent events, one chunk per text delta; the final chunk carries the
      // finish reason, then a usage chunk, then [DONE].
      const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
      res.set_chunked_content_provider("text/event-stream", [=, this](size_t, httplib::DataSink& sink) {
        (void)guard;  // held until the stream ends
        auto send = [&](const json& j) {
          const std::string line = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        auto chunk = [&](const std::string& delta, const json& reason, bool first) {
          json choice = {{"index", 0}, {"finish_reason", reason}, {"logprobs", nullptr}};
          if (chat) {
            choice["delta"] = json::object();
            if (first) choice["delta"]["role"] = "assistant";
            if (!delta.empty() || first) choice["delta"]["content"] = delta;
          } else {
            choice["text"] = delta;
          }
          return json({{"id", rid}, {"object", chunk_object}, {"created", created}, {"model", config_.model_name}, {"choices", {choice}}});
        };
        bool first = true;
        size_t ids_sent = 0;  // a chunk carries every id since the last one (some tokens add no text)
        auto attach_ids = [&](json& c) {
          if (!parsed->return_token_ids) return;
          c["choices"][0]["token_ids"] = std::vector<int32_t>(dec->ids.begin() + ids_sent, dec->ids.end());
          ids_sent = dec->ids.size();
        };
        engine::TokenEvent ev;
        while (true) {
          if (!channel->Pop(&ev, std::chrono::milliseconds(200))) {
            if (!sink.is_writable()) {  // client went away: cancel and drain
              engine_.Cancel(engine_id);
              while (!channel->Pop(&ev, std::chrono::milliseconds(200)) || ev.finish == engine::FinishReason::kNone) {
              }
              return false;
            }
            continue;
          }
          const std::string delta = advance(ev);
          const bool done = ev.finish != engine::FinishReason::kNone;
          if ((!delta.empty() || first) && !done) {
            json c = chunk(delta, nullptr, first);
            attach_ids(c);
            if (!send(c)) {
              engine_.Cancel(engine_id);
              continue;  // keep draining until the final event
            }
            first = false;
          }
          if (done) {
            json c = chunk(delta, finish_reason(ev), first);
            attach_ids(c);
            send(c);
            if (parsed->include_usage) {
              send({{"id", rid}, {"object", chunk_object}, {"created", created}, {"model", config_.model_name},
                    {"choices", json::array()}, {"usage", UsageJson(ev.usage)}});
            }
            const std::string done_line = "data: [DONE]\n\n";
            sink.write(done_line.data(), done_line.size());
            sink.done();
            return true;
          }
        }
      });
    });
  }
}

std::string Server::MetricsText() const {
  const engine::EngineMetrics m = engine_.Metrics();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
  };
  metric("radixlm_requests_total", "counter", "Requests accepted by the engine.", m.requests_submitted);
  metric("radixlm_requests_finished_total", "counter", "Requests finished (any reason).", m.requests_finished);
  metric("radixlm_requests_rejected_total", "counter", "Requests rejected at submission.", m.requests_rejected);
  metric("radixlm_http_requests_total", "counter", "HTTP requests received.", http_requests_.load());
  metric("radixlm_http_errors_total", "counter", "HTTP requests answered with an error.", http_errors_.load());
  metric("radixlm_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", m.prompt_tokens);
  metric("radixlm_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache.", m.cached_prompt_tokens);
  metric("radixlm_computed_tokens_total", "counter", "Tokens whose KV the model computed (prefill + decode).", m.computed_tokens);
  metric("radixlm_deduplicated_tokens_total", "counter",
         "Prefill rows shared within a step and computed once (included in computed_tokens).", m.deduplicated_tokens);
  metric("radixlm_generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  metric("radixlm_cache_hit_rate", "gauge", "cache_hit_tokens_total / prompt_tokens_total.",
         m.prompt_tokens ? double(m.cached_prompt_tokens) / m.prompt_tokens : 0.0);
  metric("radixlm_cache_tokens", "gauge", "Tokens held by the prefix cache.", m.tree_cached_tokens);
  metric("radixlm_cache_evicted_tokens_total", "counter", "Tokens evicted from the prefix cache.", m.evicted_tokens);
  metric("radixlm_queue_length", "gauge", "Requests waiting for admission.", m.waiting);
  metric("radixlm_running_requests", "gauge", "Requests in the running batch.", m.running);
  metric("radixlm_kv_blocks_in_use", "gauge", "KV blocks referenced by requests or the cache.", m.blocks_in_use);
  metric("radixlm_kv_blocks_total", "gauge", "KV blocks in the pool.", m.blocks_total);
  metric("radixlm_preemptions_total", "counter", "Requests preempted for lack of KV blocks.", m.preemptions);
  metric("radixlm_steps_total", "counter", "Engine steps that computed tokens.", m.steps);
  metric("radixlm_step_seconds_total", "counter", "Time spent in engine steps.", m.step_seconds_total);
  if (scoring_) {
    const engine::ScoringStats st = scoring_->stats();
    metric("radixlm_scoring_inputs_total", "counter", "Inputs embedded or reranked.", st.sequences);
    metric("radixlm_scoring_tokens_total", "counter", "Tokens of embedded or reranked inputs.", st.original_rows);
    metric("radixlm_scoring_computed_tokens_total", "counter",
           "Rows the scoring forwards computed (after intra-batch prefix dedup).", st.computed_rows);
    metric("radixlm_scoring_forwards_total", "counter", "Scoring forwards.", st.forwards);
    metric("radixlm_scoring_compacted_forwards_total", "counter", "Scoring forwards run compacted.", st.compacted_forwards);
    metric("radixlm_scoring_batches_total", "counter", "Batches the scoring queue formed.", st.batches);
    metric("radixlm_scoring_merged_requests_total", "counter", "Requests that shared a batch with another.", st.merged_jobs);
    metric("radixlm_scoring_seconds_total", "counter", "Time spent in scoring forwards.", st.seconds);
  }
  return o.str();
}

}  // namespace radixlm::serve
