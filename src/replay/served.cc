#include "replay/served.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/json_text.h"
#include "core/progress.h"
#include "serve/server.h"

namespace radixlm::replay {

using nlohmann::json;

namespace {

// Unbounded token trie: the oracle cache.
class TokenTrie {
 public:
  void Insert(const std::vector<int32_t>& t, size_t n) {
    int32_t node = 0;
    for (size_t i = 0; i < n; ++i) {
      auto [it, added] = children_.try_emplace(Key(node, t[i]), next_);
      if (added) ++next_;
      node = it->second;
    }
  }
  int64_t Match(const std::vector<int32_t>& t, size_t limit) const {
    int32_t node = 0;
    size_t i = 0;
    for (; i < limit; ++i) {
      auto it = children_.find(Key(node, t[i]));
      if (it == children_.end()) break;
      node = it->second;
    }
    return static_cast<int64_t>(i);
  }

 private:
  static uint64_t Key(int32_t node, int32_t tok) { return (uint64_t(uint32_t(node)) << 32) | uint32_t(tok); }
  std::unordered_map<uint64_t, int32_t> children_;
  int32_t next_ = 1;
};

// One streamed chat completion as a client sees it: status (0: no response), the body or the
// stream's unread rest, usage, the answer's text and token ids, the time to its first token.
struct Streamed {
  int status = 0;
  std::string rest, answer;
  json usage;
  std::vector<int32_t> ids;
  double ttft = -1;
};

Streamed PostStreaming(httplib::Client& http, const json& body) {
  Streamed s;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = core::JsonText(body);
  req.set_header("Content-Type", "application/json");
  const double start = engine::NowSeconds();
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    s.rest.append(data, len);
    for (size_t nl; (nl = s.rest.find("\n\n")) != std::string::npos; s.rest.erase(0, nl + 2)) {
      const std::string line = s.rest.substr(0, nl);
      if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
      json chunk = json::parse(line.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage")) s.usage = chunk["usage"];
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      const json& c = chunk["choices"][0];
      if (c.contains("token_ids")) {
        if (s.ttft < 0) s.ttft = engine::NowSeconds() - start;
        for (const auto& x : c["token_ids"]) s.ids.push_back(x.get<int32_t>());
      }
      if (c.contains("delta") && c["delta"].contains("content")) s.answer += c["delta"]["content"].get<std::string>();
    }
    return true;
  };
  auto res = http.send(req);
  if (res) {
    s.status = res->status;
    if (s.rest.empty()) s.rest = res->body;
  }
  return s;
}

// A failed request counted by cause: "HTTP 400 code" (the error body's code), with its first message.
void CountError(const Streamed& s, RunResult* result) {
  ++result->errors;
  std::string cause = "no response", message;
  if (s.status != 0) {
    const json err = json::parse(s.rest, nullptr, false);
    const json* e = err.is_object() && err.contains("error") && err["error"].is_object() ? &err["error"] : nullptr;
    cause = "HTTP " + std::to_string(s.status);
    if (e && e->contains("code") && (*e)["code"].is_string()) cause += " " + (*e)["code"].get<std::string>();
    if (e && e->contains("message") && (*e)["message"].is_string()) message = (*e)["message"].get<std::string>();
    if (s.status == 200) cause = "HTTP 200 without usage";
  }
  auto& seen = result->errors_by_cause[cause];
  if (seen.first++ == 0) seen.second = message;
}

// A served request: its usage and TTFT, its trace line, and what the server now caches in the
// oracle (prompt + output minus the last token, whose KV is never computed).
void CountServed(const Streamed& s, const std::vector<int32_t>& ids, int64_t oracle_match, int64_t session, int64_t turn,
                 TokenTrie* oracle, RunResult* result) {
  result->oracle_tokens += oracle_match;
  oracle->Insert(ids, ids.size());
  result->prompt_tokens += s.usage["prompt_tokens"].get<int64_t>();
  result->cached_tokens += s.usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  result->completion_tokens += s.usage["completion_tokens"].get<int64_t>();
  if (s.ttft >= 0) result->ttft.push_back(s.ttft);
  sim::TraceRequest traced;
  traced.session_id = session;
  traced.turn_id = turn;
  traced.ts = static_cast<double>(result->trace.size());
  traced.input = ids;
  traced.output = s.ids;
  result->trace.push_back(std::move(traced));
  std::vector<int32_t> full = ids;
  full.insert(full.end(), s.ids.begin(), s.ids.end());
  if (!s.ids.empty()) oracle->Insert(full, full.size() - 1);
}

}  // namespace

json RunResult::ToJson() const {
  std::vector<double> t = ttft;
  std::sort(t.begin(), t.end());
  auto pct = [&](double p) { return t.empty() ? 0.0 : t[std::min(t.size() - 1, static_cast<size_t>(p * (t.size() - 1) + 0.5))]; };
  json causes = json::object();
  for (const auto& [cause, seen] : errors_by_cause) causes[cause] = {{"count", seen.first}, {"example", seen.second}};
  return {{"requests", requests}, {"errors", errors}, {"errors_by_cause", causes}, {"prompt_tokens", prompt_tokens}, {"cached_tokens", cached_tokens},
          {"token_hit_rate", prompt_tokens ? double(cached_tokens) / prompt_tokens : 0.0},
          {"oracle_hit_rate", prompt_tokens ? double(oracle_tokens) / prompt_tokens : 0.0},
          {"ttft_p50_s", pct(0.5)}, {"ttft_p95_s", pct(0.95)}, {"seconds", seconds},
          {"requests_per_s", seconds > 0 ? requests / seconds : 0.0},
          {"prompt_tokens_per_s", seconds > 0 ? prompt_tokens / seconds : 0.0},
          {"completion_tokens_per_s", seconds > 0 ? completion_tokens / seconds : 0.0}};
}

RunResult Replay(const std::string& host, int port, const std::string& model_name, const std::vector<Conversation>& convs,
                 const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format, const ClientOptions& o) {
  RunResult result;
  std::mutex mu;  // guards result and the oracle
  TokenTrie oracle;
  std::atomic<size_t> next{0};
  const double t0 = engine::NowSeconds();
  int64_t total_turns = 0;
  for (const Conversation& c : convs) total_turns += static_cast<int64_t>(c.turns.size());
  core::Progress progress("replay", total_turns);  // updated under mu
  auto client = [&]() {
    httplib::Client http(host, port);
    http.set_read_timeout(3600, 0);
    for (size_t ci; (ci = next++) < convs.size();) {
      const Conversation& conv = convs[ci];
      std::vector<tokenizer::ChatMessage> history;
      for (const Turn& turn : conv.turns) {
        if (conv.model_answers_in_history) history.insert(history.end(), turn.history.begin(), turn.history.end());
        else history = turn.history;
        auto text = format.RenderMessages(history, true);
        if (!text.ok()) continue;
        const std::vector<int32_t> ids = tok.Encode(*text);
        int64_t oracle_match = 0;  // counted, and the prompt cached by the oracle, only if it runs
        {
          std::lock_guard<std::mutex> lock(mu);
          oracle_match = oracle.Match(ids, ids.size() - 1);
        }
        json msgs = json::array();
        for (const auto& m : history) msgs.push_back({{"role", m.role}, {"content", m.content}});
        const Streamed s = PostStreaming(http, {{"model", model_name}, {"messages", msgs}, {"max_tokens", o.max_tokens}, {"temperature", 0},
                                                {"stream", true}, {"return_token_ids", true}});
        std::lock_guard<std::mutex> lock(mu);
        progress.Update(++result.requests);
        if (s.status != 200 || s.usage.is_null()) {
          CountError(s, &result);
          continue;
        }
        CountServed(s, ids, oracle_match, static_cast<int64_t>(ci), static_cast<int64_t>(&turn - conv.turns.data()), &oracle, &result);
        if (conv.model_answers_in_history) history.push_back({"assistant", s.answer});
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  progress.Done();
  result.seconds = engine::NowSeconds() - t0;
  return result;
}

core::StatusOr<RunResult> ReplayInProcess(engine::Engine& eng, const std::vector<Conversation>& convs,
                                          const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format,
                                          const ClientOptions& o, json* report) {
  serve::ServerConfig sc;
  sc.model_name = "replay";
  sc.stop_ids = {};  // fixed-length answers: every request generates max_tokens
  serve::Server server(sc, eng, tok, format);
  auto port = server.BindToAnyPort();
  RADIXLM_RETURN_IF_ERROR(port.status());
  std::thread listener([&] { server.ListenAfterBind(); });
  eng.Start();
  RunResult r = Replay(sc.host, *port, sc.model_name, convs, tok, format, o);
  server.Stop();
  listener.join();
  eng.Stop();
  json& j = *report;
  j = r.ToJson();
  j["engine_computed_tokens"] = eng.Metrics().computed_tokens;
  j["engine_deduplicated_tokens"] = eng.Metrics().deduplicated_tokens;  // of those, computed once for several
  if (const cache::RadixTree* tree = eng.tree(); tree && r.prompt_tokens > 0) {
    // What truncating matches to block boundaries would have served instead of
    // copy-on-write (first admissions only, as token_hit_rate).
    j["block_aligned_hit_rate"] = double(tree->stats().aligned_matched_tokens) / tree->stats().prompt_tokens;
    j["cow_copies"] = tree->stats().cow_copies;
  }
  j["preemptions"] = eng.Metrics().preemptions;
  return r;
}

}  // namespace radixlm::replay
