// radixlm replay: multi-turn workloads (replay/workload.h) replayed through the HTTP server by
// concurrent clients (replay/served.h), reporting token hit rate next to the oracle hit rate of
// an unbounded cache, TTFT percentiles and throughput; with --compare, the same run with the
// prefix cache off; with --recorded, what speculation accepts on recorded agent answers
// (replay/recorded.h).
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "core/json_text.h"
#include "replay/recorded.h"
#include "replay/served.h"
#include "replay/workload.h"
#include "sim/trace.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {

using nlohmann::json;

namespace {

struct Opts {
  ModelOptions model;
  EngineOptions engine;
  std::string workload = "swe-agent", data_dir, chat_template, trace_out, system_prompt;
  int clients = 4, max_tokens = 16, conversations = 1000, turns = 1000;
  bool compare = false, json_out = false, recorded = false;
};

struct Loaded {
  ModelAndTokenizer model;
  std::vector<replay::Conversation> convs;
  tokenizer::ChatTemplate format;
};

// --recorded: the recorded answers on one engine, no HTTP.
json RunRecorded(const Opts& o, const Loaded& in, core::ThreadPool& pool) {
  if (o.workload != "swe-agent") ExitIfError(core::InvalidArgument("--recorded replays the swe-agent workload's answers"));
  const tokenizer::Tokenizer& tok = *in.model.tokenizer;
  const auto serving = MakeServingEngineOrExit(*in.model.model, pool, o.engine, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  auto recorded = replay::RunRecorded(serving->engine(), in.convs, tok, in.format, o.max_tokens);
  ExitIfError(recorded.status());
  return {{"speculate", o.engine.speculate}, {"draft_max", o.engine.draft_max}, {"recorded", *recorded}};
}

// One replay through the server with the prefix cache on or off; --trace-out written from the
// cache-on run.
json RunServed(const Opts& o, const Loaded& in, core::ThreadPool& pool, bool cache_on) {
  const tokenizer::Tokenizer& tok = *in.model.tokenizer;
  EngineOptions eo = o.engine;
  eo.no_prefix_cache = !cache_on;
  const auto serving = MakeServingEngineOrExit(*in.model.model, pool, eo, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  json j;
  auto r = replay::ReplayInProcess(serving->engine(), in.convs, tok, in.format, {o.clients, o.max_tokens}, &j);
  ExitIfError(r.status());
  j["policy"] = serving->has_states() ? (cache_on && eo.checkpoint_slots != 0 ? eo.hybrid_policy : "off")
                                      : (cache_on ? "radix" : "off");
  if (cache_on && !o.trace_out.empty()) {
    std::ofstream out(o.trace_out);
    for (const sim::TraceRequest& t : r->trace) sim::WriteMarconiLine(out, t);
    if (!out) ExitIfError(core::IoError("cannot write " + o.trace_out));
  }
  if (!o.json_out) std::fprintf(stderr, "cache %s: %s\n", cache_on ? "on" : "off", core::JsonText(j).c_str());
  return j;
}

}  // namespace

void RegisterReplay(CLI::App& app) {
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
    auto convs = replay::LoadWorkload(o->workload, o->data_dir, o->conversations, o->turns);
    ExitIfError(convs.status());
    if (!o->system_prompt.empty()) replay::AddSystemPrompt(*convs, o->system_prompt);
    o->model.kv_tokens = o->engine.kv_tokens;  // refused up front when it cannot fit
    ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    auto format = tokenizer::ChatTemplate::ForTokenizer(*loaded.tokenizer, o->chat_template);
    ExitIfError(format.status());
    const Loaded in{std::move(loaded), std::move(*convs), std::move(*format)};
    core::ThreadPool pool(o->model.threads);
    json report = {{"model", in.model.model->config().name}, {"workload", o->workload}, {"conversations", in.convs.size()},
                   {"clients", o->clients}, {"max_tokens", o->max_tokens}, {"kv_tokens", o->engine.kv_tokens}};
    if (o->recorded) {
      report.update(RunRecorded(*o, in, pool));
    } else {
      for (const bool cache_on : {true, false})  // --compare runs both; otherwise the one --no-prefix-cache asks for
        if (o->compare || cache_on != o->engine.no_prefix_cache) report[cache_on ? "cache_on" : "cache_off"] = RunServed(*o, in, pool, cache_on);
    }
    if (o->compare && !o->recorded) {
      const double on = report["cache_on"]["seconds"].get<double>(), off = report["cache_off"]["seconds"].get<double>();
      report["throughput_ratio_on_over_off"] = on > 0 ? off / on : 0.0;
    }
    std::printf("%s\n", core::JsonText(report, o->json_out ? -1 : 2).c_str());
  });
}

}  // namespace radixlm::cli
