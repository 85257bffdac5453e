// radixlm replay: multi-turn workloads replayed through the HTTP server by concurrent
// clients, reporting token hit rate next to the oracle hit rate of an unbounded cache, TTFT
// percentiles and throughput; with --compare, the same run with the prefix cache off.
//
// Workloads (from ../shared/data): MT-Bench two-turn conversations (the model's own answer
// goes into the history) and SWE-agent trajectories (each assistant turn is requested with
// the trajectory's real history before it). Prompts are rendered with the server's chat
// template and tokenized client-side with the same tokenizer, so the oracle sees exactly
// the ids the server sees. Oracle: the longest prefix of a prompt (capped at all but its
// last token, as the engine caps matches) present in any earlier prompt or in any finished
// request's prompt + output (minus its last token, whose KV is never computed).
#include <httplib.h>

#include <memory>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "cli/progress.h"
#include "engine/engine.h"
#include "models/kv_store.h"
#include "runner/hybrid_cache_setup.h"
#include "sim/trace.h"
#include "runner/model_executor.h"
#include "serve/server.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Turn {
  std::vector<tokenizer::ChatMessage> history;  // for SWE-agent: the real history before the turn
  std::string recorded;                          // SWE-agent: the assistant message the trajectory recorded
};
struct Conversation {
  std::string name;
  std::vector<Turn> turns;
  bool model_answers_in_history = false;  // MT-Bench: the next turn includes the generated answer
};

std::string ContentText(const json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string s;
  if (c.is_array())
    for (const json& part : c)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) s += part["text"].get<std::string>();
  return s;
}

core::StatusOr<std::vector<Conversation>> LoadWorkload(const std::string& name, const std::string& data, int max_conv, int max_turns) {
  std::vector<Conversation> out;
  if (name == "mtbench") {
    const std::string path = data + "/chat/mt_bench_questions.jsonl";
    std::ifstream in(path);
    if (!in) return core::NotFound(path + ": cannot open");
    int line_no = 0;
    for (std::string line; std::getline(in, line) && static_cast<int>(out.size()) < max_conv;) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const json j = json::parse(line, nullptr, false);
      const bool ok = j.is_object() && j.contains("turns") && j["turns"].is_array() &&
                      std::all_of(j["turns"].begin(), j["turns"].end(), [](const json& t) { return t.is_string(); });
      if (!ok) return core::InvalidArgument(path + ":" + std::to_string(line_no) + ": expected {question_id, turns: [strings]}");
      const json& id = j.contains("question_id") ? j["question_id"] : json();
      Conversation c{"mtbench-" + (id.is_number_integer() ? std::to_string(id.get<int64_t>()) : std::to_string(line_no)), {}, true};
      for (const json& t : j["turns"])
        if (static_cast<int>(c.turns.size()) < max_turns) c.turns.push_back({{{"user", t.get<std::string>()}}});
      out.push_back(std::move(c));
    }
  } else if (name == "swe-agent") {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(fs::path(data) / "agents/swe_agent"))
      if (e.path().extension() == ".traj") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& p : files) {
      if (static_cast<int>(out.size()) >= max_conv) break;
      std::ifstream in(p);
      const json j = json::parse(in, nullptr, false);
      if (!j.is_object() || !j.contains("history") || !j["history"].is_array() ||
          !std::all_of(j["history"].begin(), j["history"].end(), [](const json& m) { return m.is_object(); }))
        return core::InvalidArgument(p.string() + ": not a SWE-agent trajectory (expected a 'history' list of messages)");
      Conversation c{p.stem().string(), {}, false};
      std::vector<tokenizer::ChatMessage> history;
      for (const json& m : j["history"]) {
        const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "user";
        if (role == "assistant" && !history.empty()) c.turns.push_back({history, ContentText(m.value("content", json()))});
        history.push_back({role == "system" || role == "user" || role == "assistant" ? role : "tool", ContentText(m.value("content", json()))});
      }
      if (static_cast<int>(c.turns.size()) > max_turns) c.turns.resize(max_turns);
      out.push_back(std::move(c));
    }
  } else {
    return core::InvalidArgument("unknown workload '" + name + "' (mtbench, swe-agent)");
  }
  return out;
}

// A chat service's shared system prompt: the first message of every request, unless the
// conversation already starts with a system message of its own.
void AddSystemPrompt(std::vector<Conversation>& convs, const std::string& prompt) {
  auto prepend = [&](std::vector<tokenizer::ChatMessage>& history) {
    if (history.empty() || history.front().role != "system") history.insert(history.begin(), {"system", prompt});
  };
  for (Conversation& c : convs) {
    if (c.turns.empty()) continue;
    if (c.model_answers_in_history) prepend(c.turns.front().history);  // later turns extend the first
    else
      for (Turn& t : c.turns) prepend(t.history);
  }
}

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

struct RunResult {
  // Token counts are over the requests that ran (an error has no usage): the oracle's too, so
  // its hit rate is an upper bound of the server's on the same requests.
  int64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, oracle_tokens = 0, completion_tokens = 0, errors = 0;
  std::map<std::string, std::pair<int64_t, std::string>> errors_by_cause;  // "HTTP 400 code" -> (count, first message)
  std::vector<sim::TraceRequest> trace;  // requests as served, in completion order (Marconi schema)
  std::vector<double> ttft;
  double seconds = 0;
  json ToJson() const {
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

RunResult Replay(const std::string& host, int port, const std::string& model_name, const std::vector<Conversation>& convs,
                 const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format, int clients, int max_tokens) {
  RunResult result;
  std::mutex mu;  // guards result and the oracle
  TokenTrie oracle;
  std::atomic<size_t> next{0};
  const double t0 = engine::NowSeconds();
  int64_t total_turns = 0;
  for (const Conversation& c : convs) total_turns += static_cast<int64_t>(c.turns.size());
  Progress progress("replay", total_turns);  // updated under mu
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
        const Streamed s = PostStreaming(http, {{"model", model_name}, {"messages", msgs}, {"max_tokens", max_tokens}, {"temperature", 0},
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
  for (int i = 0; i < clients; ++i) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  progress.Done();
  result.seconds = engine::NowSeconds() - t0;
  return result;
}

json RecordedReport(const engine::EngineMetrics& m, int64_t requests, int64_t skipped, int64_t prompt_tokens,
                    int64_t completion, int64_t decode_steps, double decode_seconds, double seconds);

// --recorded: every SWE-agent turn's recorded answer replayed as the request's continuation
// (the engine computes its KV as if it had generated it, and checks drafts against it as
// against sampled tokens), one request at a time in trajectory order on one engine: what
// speculation would accept on real agent output, and what it saves in engine steps and time.
json RunRecorded(engine::Engine& eng, const std::vector<Conversation>& convs, const tokenizer::Tokenizer& tok,
                 const tokenizer::ChatTemplate& format, int max_tokens) {
  int64_t requests = 0, prompt_tokens = 0, completion = 0, decode_steps = 0, skipped = 0;
  double decode_seconds = 0;
  const double t0 = engine::NowSeconds();
  for (const Conversation& c : convs)
    for (const Turn& turn : c.turns) {
      auto text = format.RenderMessages(turn.history, true);
      if (!text.ok()) continue;
      engine::RequestParams p;
      p.prompt = tok.Encode(*text);
      std::vector<int32_t> answer = tok.Encode(turn.recorded);
      if (answer.size() > static_cast<size_t>(max_tokens)) answer.resize(static_cast<size_t>(max_tokens));
      if (answer.size() < 2 || static_cast<int64_t>(p.prompt.size() + answer.size()) > eng.max_request_tokens()) {
        ++skipped;
        continue;
      }
      p.continuation = answer;
      double first = 0;
      int64_t steps_at_first = 0;
      bool done = false;
      ExitIfError(eng.Submit(p, [&](const engine::TokenEvent& ev) {
                       if (ev.token >= 0 && first == 0) first = engine::NowSeconds(), steps_at_first = eng.Metrics().steps + 1;
                       if (ev.finish != engine::FinishReason::kNone) done = true;
                     }).status());
      while (!done && eng.Step()) {
      }
      decode_seconds += engine::NowSeconds() - first;
      decode_steps += eng.Metrics().steps - steps_at_first;
      ++requests;
      prompt_tokens += static_cast<int64_t>(p.prompt.size());
      completion += static_cast<int64_t>(answer.size());
    }
  return RecordedReport(eng.Metrics(), requests, skipped, prompt_tokens, completion, decode_steps, decode_seconds,
                        engine::NowSeconds() - t0);
}

json RecordedReport(const engine::EngineMetrics& m, int64_t requests, int64_t skipped, int64_t prompt_tokens,
                    int64_t completion, int64_t decode_steps, double decode_seconds, double seconds) {
  json origins = json::object();
  const engine::SpeculationCounts all = m.SpeculationTotal();
  for (size_t i = 0; i < m.speculation.size(); ++i) {
    const engine::SpeculationCounts& c = m.speculation[i];
    origins[engine::SpeculationOrigin(i)] = {
        {"verifications", c.steps}, {"drafted", c.drafted}, {"accepted", c.accepted}, {"recomputed", c.recomputed},
        {"acceptance_rate", c.drafted ? double(c.accepted) / c.drafted : 0.0},
        {"tokens_per_verification", c.steps ? double(c.steps + c.accepted) / c.steps : 0.0}};
  }
  const int64_t decode_tokens = completion - requests;  // each request's first token comes with its prefill
  return {{"requests", requests}, {"skipped", skipped}, {"prompt_tokens", prompt_tokens}, {"recorded_tokens", completion},
          {"cached_tokens", m.cached_prompt_tokens}, {"decode_steps", decode_steps},
          {"tokens_per_decode_step", decode_steps ? double(decode_tokens) / decode_steps : 0.0},
          {"decode_seconds", decode_seconds}, {"decode_tokens_per_s", decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0},
          {"seconds", seconds}, {"drafted", all.drafted}, {"accepted", all.accepted},
          {"acceptance_rate", all.drafted ? double(all.accepted) / all.drafted : 0.0},
          {"accepted_per_step", decode_steps ? double(all.accepted) / decode_steps : 0.0}, {"by_origin", origins}};
}

}  // namespace

void RegisterReplay(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    EngineOptions engine;
    std::string workload = "swe-agent", data_dir, chat_template, trace_out, system_prompt;
    int clients = 4, max_tokens = 16, conversations = 1000, turns = 1000;
    bool compare = false, json_out = false, recorded = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("replay", "replay multi-turn workloads through the HTTP server (in-process, loopback)");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  AddEngineOptions(cmd, &o->engine);
  cmd->add_option("--workload", o->workload, "mtbench | swe-agent")->capture_default_str();
  cmd->add_option("--data", o->data_dir, "data folder holding chat/mt_bench_questions.jsonl or agents/swe_agent/*.traj "
                                         "(e.g. the folder RADIXLM_SHARED_DATA names)")->required();
  cmd->add_option("--clients", o->clients, "concurrent clients")->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "tokens generated per request")->capture_default_str();
  cmd->add_option("--conversations", o->conversations, "at most this many conversations / trajectories")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--turns", o->turns, "at most this many turns per trajectory")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--chat-template", o->chat_template);
  cmd->add_option("--system-prompt", o->system_prompt,
                  "system message put first in every conversation that has none (a service's shared prompt)");
  cmd->add_option("--trace-out", o->trace_out, "write the requests as served (token ids) as a Marconi-schema trace for `simulate`");
  cmd->add_flag("--compare", o->compare, "run again with the prefix cache off and report both");
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  cmd->add_flag("--recorded", o->recorded,
                "swe-agent: replay each turn's recorded answer as the output (no HTTP; one request at a time), reporting "
                "what speculative decoding (--speculate) accepts; --max-tokens caps an answer");
  cmd->callback([o] {
    auto convs = LoadWorkload(o->workload, o->data_dir, o->conversations, o->turns);
    ExitIfError(convs.status());
    if (!o->system_prompt.empty()) AddSystemPrompt(*convs, o->system_prompt);
    o->model.kv_tokens = o->engine.kv_tokens;  // refused up front when it cannot fit
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    auto& model = *loaded.model;
    const tokenizer::Tokenizer& tok = *loaded.tokenizer;
    auto format = tokenizer::ChatTemplate::ForTokenizer(tok, o->chat_template);
    ExitIfError(format.status());
    core::ThreadPool pool(o->model.threads);
    json report = {{"model", model.config().name}, {"workload", o->workload}, {"conversations", convs->size()},
                   {"clients", o->clients}, {"max_tokens", o->max_tokens}, {"kv_tokens", o->engine.kv_tokens}};
    if (o->recorded) {
      if (o->workload != "swe-agent") ExitIfError(core::InvalidArgument("--recorded replays the swe-agent workload's answers"));
      ServingEngine serving(model, pool, o->engine, KvDtypeOf(o->model), &o->model, tok.vocab_size());
      report["speculate"] = o->engine.speculate;
      report["draft_max"] = o->engine.draft_max;
      report["recorded"] = RunRecorded(serving.engine(), *convs, tok, *format, o->max_tokens);
      std::printf("%s\n", core::JsonText(report, o->json_out ? -1 : 2).c_str());
      return;
    }
    for (const bool cache_on : {true, false}) {
      // --compare runs both; otherwise the one --no-prefix-cache asks for.
      if (!o->compare && cache_on == o->engine.no_prefix_cache) continue;
      EngineOptions eo = o->engine;
      eo.no_prefix_cache = !cache_on;
      ServingEngine serving(model, pool, eo, KvDtypeOf(o->model), &o->model, tok.vocab_size());
      engine::Engine& eng = serving.engine();
      serve::ServerConfig sc;
      sc.model_name = "replay";
      sc.stop_ids = {};  // fixed-length answers: every request generates max_tokens
      serve::Server server(sc, eng, tok, *format);
      auto port = server.BindToAnyPort();
      ExitIfError(port.status());
      std::thread listener([&] { server.ListenAfterBind(); });
      eng.Start();
      const RunResult r = Replay(sc.host, *port, sc.model_name, *convs, tok, *format, o->clients, o->max_tokens);
      server.Stop();
      listener.join();
      eng.Stop();
      json j = r.ToJson();
      j["engine_computed_tokens"] = eng.Metrics().computed_tokens;
      j["engine_deduplicated_tokens"] = eng.Metrics().deduplicated_tokens;  // of those, computed once for several
      j["policy"] = model.config().n_ssm_layers() > 0 ? (cache_on && eo.checkpoint_slots > 0 ? eo.hybrid_policy : "off")
                                                   : (cache_on ? "radix" : "off");
      if (const cache::RadixTree* tree = eng.tree(); tree && r.prompt_tokens > 0) {
        // What truncating matches to block boundaries would have served instead of
        // copy-on-write (first admissions only, as token_hit_rate).
        j["block_aligned_hit_rate"] = double(tree->stats().aligned_matched_tokens) / tree->stats().prompt_tokens;
        j["cow_copies"] = tree->stats().cow_copies;
      }
      j["preemptions"] = eng.Metrics().preemptions;
      if (cache_on && !o->trace_out.empty()) {
        std::ofstream out(o->trace_out);
        for (const sim::TraceRequest& t : r.trace) sim::WriteMarconiLine(out, t);
        if (!out) ExitIfError(core::IoError("cannot write " + o->trace_out));
      }
      report[cache_on ? "cache_on" : "cache_off"] = j;
      if (!o->json_out) std::fprintf(stderr, "cache %s: %s\n", cache_on ? "on" : "off", core::JsonText(j).c_str());
    }
    if (o->compare) {
      const double on = report["cache_on"]["seconds"].get<double>(), off = report["cache_off"]["seconds"].get<double>();
      report["throughput_ratio_on_over_off"] = on > 0 ? off / on : 0.0;
    }
    std::printf("%s\n", core::JsonText(report, o->json_out ? -1 : 2).c_str());
  });
}

}  // namespace radixlm::cli
