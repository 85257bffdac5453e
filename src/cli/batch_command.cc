// radixlm batch: an offline job in the OpenAI Batch file format, planned on the whole job's
// prefix tree (BatchLLM), run by prefix groups, resumable after a kill, and sharded over MPI
// ranks.
//
// One completion line, end to end: read -> serve::ParseBatchLine -> ParseCompletionRequest +
// BuildPrompt (the server's own units) -> one engine item per sample (n, or best_of) ->
// scheduler::PlanBatch over every item's prompt -> this rank's groups (ShardGroups) ->
// engine::RunBatchGroups (prefix computed once, members together) -> CompletionText per item
// (stop strings) -> CompletionResponse -> BatchResponseLine -> this rank's part file. A scoring
// line (/v1/embeddings, /embed, /rerank): ScoringApi::Prepare -> lines grouped by the plan of
// their first inputs -> one merged scoring job per group (RadixMLP computes a shared query or
// document once) -> ScoringApi::Answer per line. A line that is not a request: BatchErrorLine.
// When every line is answered, rank 0 writes the output in input order (cli/batch_journal.h).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "cli/batch_journal.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "cli/mpi_world.h"
#include "cli/progress.h"
#include "engine/batch_runner.h"
#include "runner/scoring.h"
#include "runner/scoring_queue.h"
#include "scheduler/batch_plan.h"
#include "serve/batch_file.h"
#include "serve/completion_request.h"
#include "serve/choice_output.h"
#include "serve/completion_stream.h"
#include "serve/http_common.h"
#include "serve/output_plan.h"
#include "serve/scoring_api.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

struct BatchOptions {
  ModelOptions model;
  EngineOptions engine;
  std::string input, output, grouping = "exact", order = "prefill", schedule = "plan", chat_template;
  double kv_budget = 0.9;
  bool plan_only = false, json_out = false;
  int64_t created = -1;
  int64_t scoring_batch_tokens = 8192;
};

// A completion line: its parsed request, how its output is shaped, and its engine items (one
// per sample).
struct CompletionLine {
  int64_t line = 0;
  serve::CompletionRequest request;
  serve::OutputPlan plan;
  std::vector<int64_t> items;
};

// Per engine item: its line, its output (stop strings, tool calls, logprobs), and how it ended.
struct ItemState {
  int64_t completion = 0;  // index into the completion lines
  std::unique_ptr<serve::ChoiceOutput> out;
  engine::FinishReason finish = engine::FinishReason::kNone;
  engine::Usage usage;
  std::string error;
};

scheduler::Grouping GroupingOf(const std::string& s) {
  return s == "paper" ? scheduler::Grouping::kPaper : s == "none" ? scheduler::Grouping::kNone : scheduler::Grouping::kExact;
}

json PlanJson(const scheduler::BatchPlanStats& s) {
  return {{"requests", s.prompts},          {"prompt_tokens", s.prompt_tokens},  {"planned_tokens", s.planned_tokens},
          {"ideal_tokens", s.ideal_tokens}, {"saving", s.saving()},              {"ideal_saving", s.ideal_saving()},
          {"groups", s.groups},             {"shared_groups", s.shared_groups}};
}

// The completion response of a line whose items all finished, as the server answers it; usage
// without prompt_tokens_details (cache hits depend on where a resumed job restarted, so the
// bytes of an output would too).
std::pair<int, json> CompletionAnswer(const CompletionLine& cl, const std::vector<ItemState>& items, const std::string& model,
                                      int64_t created) {
  for (int64_t i : cl.items)
    if (items[i].finish == engine::FinishReason::kError) {
      const serve::ApiError e{400, items[i].error, "invalid_request_error", "prompt", "invalid_value"};
      return {400, serve::ErrorBody(e)};
    }
  const serve::CompletionRequest& r = cl.request;
  const int runs = static_cast<int>(cl.items.size());
  std::vector<int> picked(r.n);
  std::iota(picked.begin(), picked.end(), 0);
  if (runs > r.n) {
    std::vector<double> logprobs;
    for (int64_t i : cl.items) logprobs.push_back(items[i].usage.cumulative_logprob);
    picked = serve::BestOf(logprobs, r.n);
  }
  std::vector<serve::CompletionChoice> choices;
  engine::Usage usage;
  usage.prompt_tokens = static_cast<int64_t>(r.params.prompt.size());
  for (int64_t i : cl.items) usage.completion_tokens += items[i].usage.completion_tokens;
  const std::string echo = r.echo ? r.prompt_text : "";
  for (int k : picked) {
    const ItemState& it = items[cl.items[k]];
    choices.push_back(it.out->ToChoice(it.finish, r.return_token_ids, echo));
  }
  const serve::CompletionMeta meta{std::string(r.chat ? "chatcmpl-" : "cmpl-") + "batch-" + std::to_string(cl.line), model,
                                   created, r.chat};
  json body = serve::CompletionResponse(meta, choices, usage);
  body["usage"].erase("prompt_tokens_details");
  return {200, body};
}

void RunBatch(BatchOptions& o, bool max_running_given) {
  MpiWorld world;
  ExitIfError(world.status());
  const bool lead = world.rank() == 0;
  std::ifstream in(o.input, std::ios::binary);
  if (!in) ExitIfError(core::Status(core::StatusCode::kNotFound, "cannot read " + o.input));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string input = ss.str();

  // Lines: requests, or what is wrong with them.
  std::vector<std::optional<serve::BatchLine>> lines;
  std::vector<serve::BatchLineError> line_errors;
  {
    std::istringstream is(input);
    std::string text;
    int64_t line_number = 0;
    std::map<std::string, int64_t> seen;
    while (std::getline(is, text)) {
      ++line_number;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      serve::BatchLine bl;
      serve::BatchLineError err;
      const int64_t index = static_cast<int64_t>(lines.size());
      if (serve::ParseBatchLine(text, index, line_number, &bl, &err)) {
        if (auto [it, fresh] = seen.emplace(bl.custom_id, line_number); !fresh)
          ExitIfError(core::InvalidArgument(o.input + ": custom_id '" + bl.custom_id + "' appears on lines " +
                                                     std::to_string(it->second) + " and " + std::to_string(line_number) +
                                                     "; each request needs its own"));
        lines.push_back(std::move(bl));
        line_errors.emplace_back();
      } else {
        lines.push_back(std::nullopt);
        line_errors.push_back(err);
      }
    }
  }
  const int64_t n_lines = static_cast<int64_t>(lines.size());

  // Resume: what earlier runs answered. Every rank reads the parts before any rank appends.
  BatchJobId job{Sha256Hex(input), o.created >= 0 ? o.created : static_cast<int64_t>(std::time(nullptr)), {}};
  for (int64_t i = 0; i < n_lines; ++i) job.custom_ids.push_back(lines[i] ? lines[i]->custom_id : line_errors[i].custom_id);
  std::map<int64_t, std::string> done;
  if (!o.plan_only) {
    if (!HasBatchParts(o.output) && std::filesystem::exists(o.output)) {
      // A finished job leaves only its output and journal: trusted when they check out.
      ExitIfError(CheckFinishedOutput(o.output, job));
      if (lead && o.json_out) std::printf("%s\n", core::JsonText(json({{"lines", n_lines}, {"already_complete", true}})).c_str());
      else if (lead) std::fprintf(stderr, "radixlm batch: %s already answers all %lld lines\n", o.output.c_str(), static_cast<long long>(n_lines));
      return;
    }
    auto parts = ReadBatchParts(o.output, &job);
    ExitIfError(parts.status());
    done = std::move(*parts);
    world.Barrier();
  }

  ModelOptions model_options = o.model;
  model_options.kv_tokens = o.engine.kv_tokens;  // refused up front when it cannot fit
  const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(model_options);
  auto& model = *loaded.model;
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;
  std::optional<tokenizer::ChatTemplate> chat_format;
  if (auto f = tokenizer::ChatTemplate::ForTokenizer(tok, o.chat_template); f.ok()) chat_format = std::move(*f);
  else if (!o.chat_template.empty()) ExitIfError(f.status());
  serve::OutputShaper shaper(tok, chat_format ? &*chat_format : nullptr, EndOfTurnIds(tok));
  const std::string model_name = o.model.model;
  core::ThreadPool pool(o.model.threads);
  // Memory-centric batching: no request cap unless asked; the KV pool decides admissions.
  if (o.schedule == "plan" && !max_running_given) o.engine.max_running = 256;
  ServingEngine serving(model, pool, o.engine, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  engine::Engine& eng = serving.engine();

  // Completion lines -> items; scoring lines -> prepared calls; refusals answered at once.
  std::vector<CompletionLine> completions;
  std::vector<engine::RequestParams> items;
  std::vector<ItemState> item_state;
  std::map<int64_t, std::pair<int, json>> immediate;  // line -> (status, body): refused requests
  const runner::ScoringConfig scoring_config{.max_batch_tokens = o.scoring_batch_tokens, .kv_dtype = KvDtypeOf(o.model)};
  std::unique_ptr<runner::ScoringQueue> scoring_queue;
  std::unique_ptr<serve::ScoringApi> scoring_api;
  std::vector<std::pair<int64_t, serve::ScoringCall>> scoring_calls;  // (line, call)
  const serve::CompletionLimits limits{model_name, 256, EndOfTurnIds(tok)};
  for (int64_t i = 0; i < n_lines; ++i) {
    if (!lines[i] || done.count(i)) continue;
    const serve::BatchLine& bl = *lines[i];
    const bool chat = bl.route == serve::BatchRoute::kChatCompletions;
    if (chat || bl.route == serve::BatchRoute::kCompletions) {
      CompletionLine cl;
      cl.line = i;
      serve::ApiError err;
      std::string rendered;
      if (!serve::ParseCompletionRequest(bl.body, chat, limits, &cl.request, &err) ||
          !serve::BuildPrompt(cl.request, tok, chat_format, &cl.request.params.prompt, &err, &rendered) ||
          !shaper.Plan(cl.request, rendered, &cl.plan, &err)) {
        immediate[i] = {err.status, serve::ErrorBody(err)};
        continue;
      }
      serve::CompletionRequest& r = cl.request;
      if (r.stream) {
        immediate[i] = {400, serve::ErrorBody({400, "'stream' is not supported in a batch job", "invalid_request_error", "stream", "invalid_value"})};
        continue;
      }
      const int64_t prompt = static_cast<int64_t>(r.params.prompt.size());
      if (r.default_max_tokens) {  // no length asked: never more than fits
        const int64_t left = eng.max_request_tokens() - prompt;
        if (left >= 1 && left < r.params.max_tokens) r.params.max_tokens = static_cast<int>(left);
      }
      if (prompt + r.params.max_tokens > eng.max_request_tokens()) {
        immediate[i] = {400, serve::ErrorBody({400, "the prompt (" + std::to_string(prompt) + " tokens) and max_tokens (" +
                                                        std::to_string(r.params.max_tokens) + ") exceed the " +
                                                        std::to_string(eng.max_request_tokens()) + "-token limit",
                                                    "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"})};
        continue;
      }
      for (int k = 0; k < r.best_of; ++k) {
        engine::RequestParams p = r.params;
        p.sampling.seed = r.params.sampling.seed + static_cast<uint64_t>(k);
        p.cumulative_logprob = r.best_of > r.n;
        p.top_logprobs = r.top_logprobs;
        p.constraint = cl.plan.NewConstraint();
        cl.items.push_back(static_cast<int64_t>(items.size()));
        items.push_back(std::move(p));
        ItemState st;
        st.completion = static_cast<int64_t>(completions.size());
        serve::ChoiceSetup setup = cl.plan.setup;
        setup.id_seed = r.params.sampling.seed * 31 + static_cast<uint64_t>(k) + 1;
        st.out = std::make_unique<serve::ChoiceOutput>(tok, std::move(setup));
        item_state.push_back(std::move(st));
      }
      completions.push_back(std::move(cl));
      continue;
    }
    if (!scoring_api) {
      scoring_queue = std::make_unique<runner::ScoringQueue>(
          [&model, &pool, scoring_config] { return std::make_unique<runner::ScoringRunner>(model, pool, scoring_config); },
          std::min<int64_t>(o.scoring_batch_tokens, model.config().max_context));
      scoring_api = std::make_unique<serve::ScoringApi>(tok, *scoring_queue, serve::ScoringApiConfig{model_name});
    }
    const serve::ScoringRoute route = bl.route == serve::BatchRoute::kEmbeddings ? serve::ScoringRoute::kEmbeddings
                                      : bl.route == serve::BatchRoute::kEmbed    ? serve::ScoringRoute::kEmbed
                                                                                 : serve::ScoringRoute::kRerank;
    serve::ScoringCall call = scoring_api->Prepare(route, nlohmann::json(bl.body));
    if (call.refused) {
      immediate[i] = {call.refused->status, call.refused->body};
      continue;
    }
    scoring_calls.emplace_back(i, std::move(call));
  }

  // The plans: completion items by their prompts; scoring lines by their first inputs (their
  // other inputs count as cost), and every scoring input for the predicted saving.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> generate;
  for (const auto& p : items) {
    prompts.push_back(p.prompt);
    generate.push_back(p.max_tokens);
  }
  const scheduler::GroupOrder order = o.order == "file" ? scheduler::GroupOrder::kFile : scheduler::GroupOrder::kPrefill;
  const scheduler::Grouping grouping = o.schedule == "serve" ? scheduler::Grouping::kNone : GroupingOf(o.grouping);
  const scheduler::BatchPlan plan =
      scheduler::PlanBatch(prompts, grouping, o.schedule == "serve" ? scheduler::GroupOrder::kFile : order);
  std::vector<std::vector<int32_t>> scoring_first, scoring_inputs;
  std::vector<int64_t> scoring_rest;
  for (const auto& [line, call] : scoring_calls) {
    scoring_first.push_back(call.job.inputs[0]);
    scoring_rest.push_back(call.tokens - static_cast<int64_t>(call.job.inputs[0].size()));
    for (const auto& x : call.job.inputs) scoring_inputs.push_back(x);
  }
  const scheduler::BatchPlan scoring_plan = scheduler::PlanBatch(scoring_first, grouping, order);
  const scheduler::BatchPlanStats scoring_predicted = scheduler::PlanBatch(scoring_inputs, GroupingOf(o.grouping)).stats;

  if (o.plan_only) {
    if (!lead) return;
    json groups = json::array();
    for (const auto& g : plan.groups) {
      json members = json::array();
      for (int64_t m : g.members) members.push_back(lines[completions[item_state[m].completion].line]->custom_id);
      groups.push_back({{"prefix_tokens", g.prefix_tokens}, {"custom_ids", members}});
    }
    // Over N ranks: groups larger than a rank's share split (each piece computes its prefix
    // again), then whole groups balanced; the imbalance (max / mean predicted cost) and the
    // saving left.
    json imbalance = json::object(), sharded_saving = json::object(), scoring_imbalance = json::object();
    for (int ranks : {1, 2, 4, 8, 16, 32, 64}) {
      const scheduler::BatchPlan split = scheduler::SplitLargeGroups(plan, prompts, generate, ranks);
      imbalance[std::to_string(ranks)] = scheduler::ShardImbalance(split, prompts, generate, ranks);
      sharded_saving[std::to_string(ranks)] = split.stats.saving();
      const scheduler::BatchPlan s_split = scheduler::SplitLargeGroups(scoring_plan, scoring_first, scoring_rest, ranks);
      scoring_imbalance[std::to_string(ranks)] = scheduler::ShardImbalance(s_split, scoring_first, scoring_rest, ranks);
    }
    const json j = {{"lines", n_lines},
                    {"invalid_lines", std::count_if(lines.begin(), lines.end(), [](const auto& l) { return !l; })},
                    {"grouping", o.grouping},
                    {"completions", PlanJson(plan.stats)},
                    {"scoring", PlanJson(scoring_predicted)},
                    {"predicted_imbalance", imbalance},
                    {"saving_over_ranks", sharded_saving},
                    {"scoring_predicted_imbalance", scoring_imbalance},
                    {"groups", groups}};
    if (o.json_out) {
      std::printf("%s\n", core::JsonText(j).c_str());
    } else {
      std::printf("%lld lines; completions: %lld requests, %lld prompt tokens, %lld planned (saving %.1f%%, ideal %.1f%%) in %lld groups "
                  "(%lld shared); scoring inputs: saving %.1f%% (ideal %.1f%%)\n",
                  static_cast<long long>(n_lines), static_cast<long long>(plan.stats.prompts),
                  static_cast<long long>(plan.stats.prompt_tokens), static_cast<long long>(plan.stats.planned_tokens),
                  100 * plan.stats.saving(), 100 * plan.stats.ideal_saving(), static_cast<long long>(plan.stats.groups),
                  static_cast<long long>(plan.stats.shared_groups), 100 * scoring_predicted.saving(),
                  100 * scoring_predicted.ideal_saving());
    }
    return;
  }

  auto part = BatchPart::Open(o.output, world.rank(), job);
  ExitIfError(part.status());
  int64_t answered_now = 0;
  const int64_t to_answer = n_lines - static_cast<int64_t>(done.size());
  Progress progress(world.size() > 1 ? "batch (rank 0)" : "batch", lead ? to_answer : 0);
  auto write = [&](int64_t index, const json& line) {
    ExitIfError((*part)->Append(index, core::JsonText(line)));
    ++answered_now;
    if (lead) progress.Update(answered_now);
  };
  const auto t0 = std::chrono::steady_clock::now();

  // Lines that are not requests and refused requests: rank 0 answers them.
  if (lead)
    for (int64_t i = 0; i < n_lines; ++i) {
      if (done.count(i)) continue;
      if (!lines[i]) write(i, serve::BatchErrorLine(i, line_errors[i]));
      else if (auto it = immediate.find(i); it != immediate.end())
        write(i, serve::BatchResponseLine(i, lines[i]->custom_id, it->second.first, it->second.second));
    }

  // Scoring lines, by planned groups: one merged job per group (and per job kind), each line
  // answered from its part; a merged job that fails is retried line by line to say which.
  const scheduler::BatchPlan scoring_sharded = scheduler::SplitLargeGroups(scoring_plan, scoring_first, scoring_rest, world.size());
  const std::vector<int> scoring_rank = scheduler::ShardGroups(scoring_sharded, scoring_first, scoring_rest, world.size());
  int64_t scoring_rows = 0, scoring_computed = 0;
  const engine::ScoringStats scoring_before = scoring_queue ? scoring_queue->stats() : engine::ScoringStats{};
  for (size_t g = 0; g < scoring_sharded.groups.size(); ++g) {
    if (scoring_rank[g] != world.rank()) continue;
    const std::vector<int64_t>& members = scoring_sharded.groups[g].members;
    for (size_t a = 0; a < members.size();) {
      const engine::ScoringJob& first = scoring_calls[members[a]].second.job;
      engine::ScoringJob merged = first;
      merged.inputs.clear();
      size_t b = a;
      while (b < members.size()) {
        const engine::ScoringJob& j = scoring_calls[members[b]].second.job;
        if (j.kind != first.kind || j.pooling != first.pooling || j.normalize != first.normalize || j.yes_id != first.yes_id ||
            j.no_id != first.no_id || (b > a && merged.inputs.size() + j.inputs.size() > 1024))
          break;
        merged.inputs.insert(merged.inputs.end(), j.inputs.begin(), j.inputs.end());
        ++b;
      }
      auto result = scoring_queue->Submit(std::move(merged)).get();
      size_t offset = 0;
      for (size_t k = a; k < b; ++k) {
        const auto& [line, call] = scoring_calls[members[k]];
        serve::ApiAnswer answer;
        if (result.ok()) {
          engine::ScoringResult part_result;
          const size_t n = call.job.inputs.size();
          if (!result->embeddings.empty())
            part_result.embeddings.assign(result->embeddings.begin() + offset, result->embeddings.begin() + offset + n);
          if (!result->logits.empty())
            part_result.logits.assign(result->logits.begin() + offset, result->logits.begin() + offset + n);
          offset += n;
          answer = scoring_api->Answer(call, std::move(part_result));
        } else {
          engine::ScoringJob alone = call.job;
          answer = scoring_api->Answer(call, scoring_queue->Submit(std::move(alone)).get());
        }
        write(line, serve::BatchResponseLine(line, lines[line]->custom_id, answer.status, answer.body));
      }
      a = b;
    }
  }
  if (scoring_queue) {
    const engine::ScoringStats s = scoring_queue->stats();
    scoring_rows = s.original_rows - scoring_before.original_rows;
    scoring_computed = s.computed_rows - scoring_before.computed_rows;
  }

  // Completion lines, by planned groups on the engine.
  const scheduler::BatchPlan sharded = scheduler::SplitLargeGroups(plan, prompts, generate, world.size());
  const std::vector<int> rank_of_group = scheduler::ShardGroups(sharded, prompts, generate, world.size());
  std::vector<scheduler::PrefixGroup> mine;
  int64_t my_prompt_tokens = 0;
  for (size_t g = 0; g < sharded.groups.size(); ++g)
    if (rank_of_group[g] == world.rank()) {
      mine.push_back(sharded.groups[g]);
      for (int64_t m : sharded.groups[g].members) my_prompt_tokens += static_cast<int64_t>(prompts[m].size());
    }
  std::vector<int64_t> open_items(completions.size());
  for (size_t c = 0; c < completions.size(); ++c) open_items[c] = static_cast<int64_t>(completions[c].items.size());
  const engine::EngineMetrics before = eng.Metrics();
  const engine::BatchRunStats run_stats = engine::RunBatchGroups(
      eng, items, mine, {.kv_budget = o.kv_budget, .submit_all = o.schedule == "serve"},
      [&](int64_t item, const engine::TokenEvent& ev) {
        ItemState& st = item_state[item];
        st.out->Push(ev);
        if (ev.finish == engine::FinishReason::kNone) return !st.out->stopped();
        st.finish = ev.finish;
        st.usage = ev.usage;
        st.error = ev.error;
        if (--open_items[st.completion] == 0) {
          const CompletionLine& cl = completions[st.completion];
          const auto [status, body] = CompletionAnswer(cl, item_state, model_name, job.created);
          write(cl.line, serve::BatchResponseLine(cl.line, lines[cl.line]->custom_id, status, body));
        }
        return true;
      });
  const engine::EngineMetrics after = eng.Metrics();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.Done();
  part->reset();  // flushed and closed before the merge reads it

  // Totals over ranks; rank 0 writes the output once every line is answered.
  const int64_t computed = world.Sum((after.prompt_tokens - after.cached_prompt_tokens) - (before.prompt_tokens - before.cached_prompt_tokens));
  const int64_t generated = world.Sum(after.generated_tokens - before.generated_tokens);
  const int64_t preemptions = world.Sum(after.preemptions - before.preemptions);
  const int64_t warm = world.Sum(run_stats.warm_requests);
  const int64_t logical = world.Sum(my_prompt_tokens);
  const int64_t answered = world.Sum(answered_now);
  const int64_t s_rows = world.Sum(scoring_rows), s_computed = world.Sum(scoring_computed);
  const double max_seconds = world.Max(seconds);
  world.Barrier();
  if (!lead) return;
  BatchJobId check = job;
  auto all = ReadBatchParts(o.output, &check);
  ExitIfError(all.status());
  std::vector<std::string> out_lines;
  int64_t missing = 0;
  for (int64_t i = 0; i < n_lines; ++i) {
    auto it = all->find(i);
    if (it == all->end()) ++missing;
    else out_lines.push_back(it->second);
  }
  if (missing > 0)
    ExitIfError(core::Status(core::StatusCode::kInternal, std::to_string(missing) + " lines have no answer yet; rerun the same command to finish them"));
  ExitIfError(FinishBatchOutput(o.output, out_lines, check));
  const json summary = {{"lines", n_lines},
                        {"answered_this_run", answered},
                        {"answered_before", static_cast<int64_t>(done.size())},
                        {"ranks", world.size()},
                        {"seconds", max_seconds},
                        {"requests_per_s", answered / std::max(max_seconds, 1e-9)},
                        {"schedule", o.schedule},
                        {"grouping", o.grouping},
                        {"prompt_tokens", logical},
                        {"computed_prompt_tokens", computed},
                        {"saving", logical ? 1.0 - double(computed) / double(logical) : 0.0},
                        {"planned", PlanJson(plan.stats)},
                        {"generated_tokens", generated},
                        {"generated_tokens_per_s", generated / std::max(max_seconds, 1e-9)},
                        {"warm_requests", warm},
                        {"preemptions", preemptions},
                        {"scoring_tokens", s_rows},
                        {"scoring_computed_tokens", s_computed},
                        {"scoring_saving", s_rows ? 1.0 - double(s_computed) / double(s_rows) : 0.0},
                        {"scoring_planned", PlanJson(scoring_predicted)}};
  if (o.json_out) {
    std::printf("%s\n", core::JsonText(summary).c_str());
  } else {
    std::fprintf(stderr,
                 "radixlm batch: %lld lines answered in %s (%lld this run, %.1f s, %.2f req/s); prompt tokens %lld, computed %lld "
                 "(saving %.1f%%, planned %.1f%%, ideal %.1f%%), %lld generated (%.1f tok/s), %lld preemptions\n",
                 static_cast<long long>(n_lines), o.output.c_str(), static_cast<long long>(answered), max_seconds,
                 answered / std::max(max_seconds, 1e-9), static_cast<long long>(logical), static_cast<long long>(computed),
                 logical ? 100.0 * (1.0 - double(computed) / double(logical)) : 0.0, 100 * plan.stats.saving(),
                 100 * plan.stats.ideal_saving(), static_cast<long long>(generated), generated / std::max(max_seconds, 1e-9),
                 static_cast<long long>(preemptions));
  }
}

}  // namespace

void RegisterBatch(CLI::App& app) {
  auto o = std::make_shared<BatchOptions>();
  auto* cmd = app.add_subcommand("batch",
                                 "run an offline job (OpenAI Batch JSONL) planned on its whole prefix tree (BatchLLM); resumable; "
                                 "mpirun -np N shards it");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  AddEngineOptions(cmd, &o->engine);
  cmd->add_option("--input,-i", o->input, "JSONL: {custom_id, method: POST, url, body} per line")->required();
  cmd->add_option("--output,-o", o->output, "JSONL: {id, custom_id, response: {status_code, body}, error} per line, input order");
  cmd->add_option("--grouping", o->grouping, "exact (optimal one-level groups) | paper (BatchLLM Algorithm 1) | none")
      ->check(CLI::IsMember({"exact", "paper", "none"}))
      ->capture_default_str();
  cmd->add_option("--order", o->order, "prefill (Eq. 3: ascending prefill tokens per group) | file")
      ->check(CLI::IsMember({"prefill", "file"}))
      ->capture_default_str();
  cmd->add_option("--schedule", o->schedule,
                  "plan (groups, prefixes once) | serve (the whole file submitted at once in file order, as a server would get it)")
      ->check(CLI::IsMember({"plan", "serve"}))
      ->capture_default_str();
  cmd->add_option("--kv-budget", o->kv_budget, "fraction of the KV pool the groups in flight may project to fill")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str();
  cmd->add_option("--created", o->created, "the responses' 'created' time (default: the job's first start, kept on resume)");
  cmd->add_option("--chat-template", o->chat_template, "chatml|llama3|llama2 (default: the model's)");
  cmd->add_option("--scoring-batch-tokens", o->scoring_batch_tokens, "tokens per scoring forward")->capture_default_str();
  cmd->add_flag("--plan-only", o->plan_only, "print the plan (groups, predicted saving, imbalance over 1-64 ranks) and stop");
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  CLI::Option* max_running = cmd->get_option("--max-running");
  cmd->callback([o, max_running] {
    if (!o->plan_only && o->output.empty()) ExitIfError(core::InvalidArgument("--output is required (or --plan-only)"));
    RunBatch(*o, max_running->count() > 0);
  });
}

}  // namespace radixlm::cli
