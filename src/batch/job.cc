#include "batch/job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "engine/batch_runner.h"
#include "serve/choice_output.h"
#include "serve/completion_stream.h"
#include "serve/http_common.h"

namespace radixlm::batch {
namespace {

using nlohmann::json;

scheduler::Grouping GroupingOf(const std::string& s) {
  return s == "paper" ? scheduler::Grouping::kPaper : s == "none" ? scheduler::Grouping::kNone : scheduler::Grouping::kExact;
}

json PlanJson(const scheduler::BatchPlanStats& s) {
  return {{"requests", s.prompts},          {"prompt_tokens", s.prompt_tokens},  {"planned_tokens", s.planned_tokens},
          {"ideal_tokens", s.ideal_tokens}, {"saving", s.saving()},              {"ideal_saving", s.ideal_saving()},
          {"groups", s.groups},             {"shared_groups", s.shared_groups}};
}

serve::ScoringRoute ScoringRouteOf(serve::BatchRoute r) {
  return r == serve::BatchRoute::kEmbeddings ? serve::ScoringRoute::kEmbeddings
         : r == serve::BatchRoute::kEmbed    ? serve::ScoringRoute::kEmbed
                                             : serve::ScoringRoute::kRerank;
}

// Whether scoring job `j` can join a merged job that starts with `first` (already `inputs`
// rows): the same kind of job, at most 1024 rows together.
bool Joins(const engine::ScoringJob& first, const engine::ScoringJob& j, size_t inputs, bool empty) {
  return j.kind == first.kind && j.pooling == first.pooling && j.normalize == first.normalize && j.yes_id == first.yes_id &&
         j.no_id == first.no_id && (empty || inputs + j.inputs.size() <= 1024);
}

double PerSecond(double x, double seconds) { return x / std::max(seconds, 1e-9); }

}  // namespace

// A completion line: its parsed request, how its output is shaped, and its engine items (one
// per sample).
struct Job::CompletionLine {
  int64_t line = 0;
  serve::CompletionRequest request;
  serve::OutputPlan plan;
  std::vector<int64_t> items;
};

// Per engine item: its line, its output (stop strings, tool calls, logprobs), and how it ended.
struct Job::ItemState {
  int64_t completion = 0;  // index into the completion lines
  std::unique_ptr<serve::ChoiceOutput> out;
  engine::FinishReason finish = engine::FinishReason::kNone;
  engine::Usage usage;
  std::string error;
};

struct Job::ScoringLine {
  int64_t line = 0;
  serve::ScoringCall call;
};

int64_t JobInput::invalid() const {
  return std::count_if(lines.begin(), lines.end(), [](const auto& l) { return !l; });
}

core::StatusOr<JobInput> ReadJobInput(const std::string& text, const std::string& name) {
  JobInput in;
  std::istringstream is(text);
  std::string line;
  int64_t line_number = 0;
  std::map<std::string, int64_t> seen;
  while (std::getline(is, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    serve::BatchLine bl;
    serve::BatchLineError err;
    if (!serve::ParseBatchLine(line, in.size(), line_number, &bl, &err)) {
      in.lines.push_back(std::nullopt);
      in.errors.push_back(err);
      continue;
    }
    if (auto [it, fresh] = seen.emplace(bl.custom_id, line_number); !fresh)
      return core::InvalidArgument(name + ": custom_id '" + bl.custom_id + "' appears on lines " + std::to_string(it->second) +
                                   " and " + std::to_string(line_number) + "; each request needs its own");
    in.lines.push_back(std::move(bl));
    in.errors.emplace_back();
  }
  return in;
}

Job::Job(const JobInput& input, const std::map<int64_t, std::string>& done, JobRuntime runtime, JobOptions options)
    : input_(input), done_(done), rt_(std::move(runtime)), o_(std::move(options)) {
  shaper_.emplace(*rt_.tok, rt_.chat_format ? &*rt_.chat_format : nullptr, rt_.stop_ids);
  for (int64_t i = 0; i < input_.size(); ++i) {
    if (!input_.lines[i] || done_.count(i)) continue;
    const serve::BatchLine& bl = *input_.lines[i];
    const bool chat = bl.route == serve::BatchRoute::kChatCompletions;
    if (chat || bl.route == serve::BatchRoute::kCompletions) PrepareCompletion(i, bl, chat);
    else PrepareScoring(i, bl);
  }
  Plan();
}

Job::~Job() = default;

void Job::PrepareCompletion(int64_t i, const serve::BatchLine& bl, bool chat) {
  const serve::CompletionLimits limits{o_.model_name, 256, rt_.stop_ids};
  CompletionLine cl;
  cl.line = i;
  serve::ApiError err;
  std::string rendered;
  serve::CompletionRequest& r = cl.request;
  if (!serve::ParseCompletionRequest(bl.body, chat, limits, &r, &err) ||
      !serve::BuildPrompt(r, *rt_.tok, rt_.chat_format, &r.params.prompt, &err, &rendered) || !shaper_->Plan(r, rendered, &cl.plan, &err)) {
    immediate_[i] = {err.status, serve::ErrorBody(err)};
    return;
  }
  if (r.stream) {
    immediate_[i] = {400, serve::ErrorBody({400, "'stream' is not supported in a batch job", "invalid_request_error", "stream", "invalid_value"})};
    return;
  }
  const int64_t prompt = static_cast<int64_t>(r.params.prompt.size()), limit = rt_.engine->max_request_tokens();
  if (r.default_max_tokens && limit - prompt >= 1 && limit - prompt < r.params.max_tokens)
    r.params.max_tokens = static_cast<int>(limit - prompt);  // no length asked: never more than fits
  if (prompt + r.params.max_tokens > limit) {
    immediate_[i] = {400, serve::ErrorBody({400, "the prompt (" + std::to_string(prompt) + " tokens) and max_tokens (" +
                                                     std::to_string(r.params.max_tokens) + ") exceed the " + std::to_string(limit) +
                                                     "-token limit",
                                                 "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"})};
    return;
  }
  for (int k = 0; k < r.best_of; ++k) {
    engine::RequestParams p = r.params;
    p.sampling.seed = r.params.sampling.seed + static_cast<uint64_t>(k);
    p.cumulative_logprob = r.best_of > r.n;
    p.top_logprobs = r.top_logprobs;
    p.constraint = cl.plan.NewConstraint();
    cl.items.push_back(static_cast<int64_t>(items_.size()));
    items_.push_back(std::move(p));
    ItemState st;
    st.completion = static_cast<int64_t>(completions_.size());
    serve::ChoiceSetup setup = cl.plan.setup;
    setup.id_seed = r.params.sampling.seed * 31 + static_cast<uint64_t>(k) + 1;
    st.out = std::make_unique<serve::ChoiceOutput>(*rt_.tok, std::move(setup));
    item_state_.push_back(std::move(st));
  }
  completions_.push_back(std::move(cl));
}

void Job::PrepareScoring(int64_t i, const serve::BatchLine& bl) {
  if (!scoring_api_) {
    scoring_ = rt_.make_scoring();
    scoring_api_ = std::make_unique<serve::ScoringApi>(*rt_.tok, *scoring_, serve::ScoringApiConfig{o_.model_name});
  }
  serve::ScoringCall call = scoring_api_->Prepare(ScoringRouteOf(bl.route), json(bl.body));
  if (call.refused) {
    immediate_[i] = {call.refused->status, call.refused->body};
    return;
  }
  scoring_lines_.push_back({i, std::move(call)});
}

// Completion items by their prompts; scoring lines by their first inputs (their other inputs
// count as cost), and every scoring input for the predicted saving.
void Job::Plan() {
  for (const auto& p : items_) {
    prompts_.push_back(p.prompt);
    generate_.push_back(p.max_tokens);
  }
  const bool serve_order = o_.schedule == "serve";
  const scheduler::GroupOrder order = o_.order == "file" ? scheduler::GroupOrder::kFile : scheduler::GroupOrder::kPrefill;
  const scheduler::Grouping grouping = serve_order ? scheduler::Grouping::kNone : GroupingOf(o_.grouping);
  plan_ = scheduler::PlanBatch(prompts_, grouping, serve_order ? scheduler::GroupOrder::kFile : order);
  std::vector<std::vector<int32_t>> scoring_inputs;
  for (const auto& s : scoring_lines_) {
    scoring_first_.push_back(s.call.job.inputs[0]);
    scoring_rest_.push_back(s.call.tokens - static_cast<int64_t>(s.call.job.inputs[0].size()));
    for (const auto& x : s.call.job.inputs) scoring_inputs.push_back(x);
  }
  scoring_plan_ = scheduler::PlanBatch(scoring_first_, grouping, order);
  scoring_predicted_ = scheduler::PlanBatch(scoring_inputs, GroupingOf(o_.grouping)).stats;
}

json Job::PlanReport() const {
  json groups = json::array();
  for (const auto& g : plan_.groups) {
    json members = json::array();
    for (int64_t m : g.members) members.push_back(input_.lines[completions_[item_state_[m].completion].line]->custom_id);
    groups.push_back({{"prefix_tokens", g.prefix_tokens}, {"custom_ids", members}});
  }
  // Over N ranks: groups larger than a rank's share split (each piece computes its prefix
  // again), then whole groups balanced; the imbalance (max / mean predicted cost) and the
  // saving left.
  json imbalance = json::object(), sharded_saving = json::object(), scoring_imbalance = json::object();
  for (int ranks : {1, 2, 4, 8, 16, 32, 64}) {
    const scheduler::BatchPlan split = scheduler::SplitLargeGroups(plan_, prompts_, generate_, ranks);
    imbalance[std::to_string(ranks)] = scheduler::ShardImbalance(split, prompts_, generate_, ranks);
    sharded_saving[std::to_string(ranks)] = split.stats.saving();
    const scheduler::BatchPlan s_split = scheduler::SplitLargeGroups(scoring_plan_, scoring_first_, scoring_rest_, ranks);
    scoring_imbalance[std::to_string(ranks)] = scheduler::ShardImbalance(s_split, scoring_first_, scoring_rest_, ranks);
  }
  return {{"lines", input_.size()},
          {"invalid_lines", input_.invalid()},
          {"grouping", o_.grouping},
          {"completions", PlanJson(plan_.stats)},
          {"scoring", PlanJson(scoring_predicted_)},
          {"predicted_imbalance", imbalance},
          {"saving_over_ranks", sharded_saving},
          {"scoring_predicted_imbalance", scoring_imbalance},
          {"groups", groups}};
}

std::string Job::PlanText() const {
  const scheduler::BatchPlanStats& s = plan_.stats;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%lld lines; completions: %lld requests, %lld prompt tokens, %lld planned (saving %.1f%%, ideal %.1f%%) in %lld groups "
                "(%lld shared); scoring inputs: saving %.1f%% (ideal %.1f%%)",
                static_cast<long long>(input_.size()), static_cast<long long>(s.prompts), static_cast<long long>(s.prompt_tokens),
                static_cast<long long>(s.planned_tokens), 100 * s.saving(), 100 * s.ideal_saving(), static_cast<long long>(s.groups),
                static_cast<long long>(s.shared_groups), 100 * scoring_predicted_.saving(), 100 * scoring_predicted_.ideal_saving());
  return buf;
}

RunFigures Job::Run(int rank, int ranks, const WriteAnswer& write) {
  RunFigures figures;
  const WriteAnswer counted = [&](int64_t index, const json& line) {
    ++figures.answered;
    write(index, line);
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (rank == 0) AnswerWithoutModel(counted);
  RunScoring(rank, ranks, counted, &figures);
  RunCompletions(rank, ranks, counted, &figures);
  figures.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return figures;
}

// Lines that are not requests and refused requests.
void Job::AnswerWithoutModel(const WriteAnswer& write) {
  for (int64_t i = 0; i < input_.size(); ++i) {
    if (done_.count(i)) continue;
    if (!input_.lines[i]) write(i, serve::BatchErrorLine(i, input_.errors[i]));
    else if (auto it = immediate_.find(i); it != immediate_.end())
      write(i, serve::BatchResponseLine(i, input_.lines[i]->custom_id, it->second.first, it->second.second));
  }
}

// Scoring lines, by planned groups: one merged job per run of like lines in a group, each line
// answered from its part.
void Job::RunScoring(int rank, int ranks, const WriteAnswer& write, RunFigures* figures) {
  const scheduler::BatchPlan sharded = scheduler::SplitLargeGroups(scoring_plan_, scoring_first_, scoring_rest_, ranks);
  const std::vector<int> rank_of = scheduler::ShardGroups(sharded, scoring_first_, scoring_rest_, ranks);
  const engine::ScoringStats before = scoring_ ? scoring_->stats() : engine::ScoringStats{};
  for (size_t g = 0; g < sharded.groups.size(); ++g) {
    if (rank_of[g] != rank) continue;
    const std::vector<int64_t>& members = sharded.groups[g].members;
    for (size_t a = 0; a < members.size();) {
      const engine::ScoringJob& first = scoring_lines_[members[a]].call.job;
      size_t b = a, inputs = 0;
      while (b < members.size() && Joins(first, scoring_lines_[members[b]].call.job, inputs, b == a))
        inputs += scoring_lines_[members[b++]].call.job.inputs.size();
      RunScoringRun(members, a, b, write);
      a = b;
    }
  }
  if (scoring_) {
    const engine::ScoringStats s = scoring_->stats();
    figures->scoring_rows = s.original_rows - before.original_rows;
    figures->scoring_computed_rows = s.computed_rows - before.computed_rows;
  }
}

// Lines members[a, b) as one merged job; when it fails, each line alone, to say which.
void Job::RunScoringRun(const std::vector<int64_t>& members, size_t a, size_t b, const WriteAnswer& write) {
  engine::ScoringJob merged = scoring_lines_[members[a]].call.job;
  merged.inputs.clear();
  for (size_t k = a; k < b; ++k) {
    const auto& in = scoring_lines_[members[k]].call.job.inputs;
    merged.inputs.insert(merged.inputs.end(), in.begin(), in.end());
  }
  auto result = scoring_->Submit(std::move(merged)).get();
  size_t offset = 0;
  for (size_t k = a; k < b; ++k) {
    const auto& [line, call] = scoring_lines_[members[k]];
    serve::ApiAnswer answer;
    if (result.ok()) {
      engine::ScoringResult part;
      const size_t n = call.job.inputs.size();
      if (!result->embeddings.empty()) part.embeddings.assign(result->embeddings.begin() + offset, result->embeddings.begin() + offset + n);
      if (!result->logits.empty()) part.logits.assign(result->logits.begin() + offset, result->logits.begin() + offset + n);
      offset += n;
      answer = scoring_api_->Answer(call, std::move(part));
    } else {
      engine::ScoringJob alone = call.job;
      answer = scoring_api_->Answer(call, scoring_->Submit(std::move(alone)).get());
    }
    write(line, serve::BatchResponseLine(line, input_.lines[line]->custom_id, answer.status, answer.body));
  }
}

// Completion lines, by planned groups on the engine; a line is answered when its last item ends.
void Job::RunCompletions(int rank, int ranks, const WriteAnswer& write, RunFigures* figures) {
  const scheduler::BatchPlan sharded = scheduler::SplitLargeGroups(plan_, prompts_, generate_, ranks);
  const std::vector<int> rank_of = scheduler::ShardGroups(sharded, prompts_, generate_, ranks);
  std::vector<scheduler::PrefixGroup> mine;
  for (size_t g = 0; g < sharded.groups.size(); ++g)
    if (rank_of[g] == rank) {
      mine.push_back(sharded.groups[g]);
      for (int64_t m : sharded.groups[g].members) figures->prompt_tokens += static_cast<int64_t>(prompts_[m].size());
    }
  std::vector<int64_t> open_items(completions_.size());
  for (size_t c = 0; c < completions_.size(); ++c) open_items[c] = static_cast<int64_t>(completions_[c].items.size());
  engine::Engine& eng = *rt_.engine;
  const engine::EngineMetrics before = eng.Metrics();
  const engine::BatchRunStats stats = engine::RunBatchGroups(
      eng, items_, mine, {.kv_budget = o_.kv_budget, .submit_all = o_.schedule == "serve"},
      [&](int64_t item, const engine::TokenEvent& ev) {
        ItemState& st = item_state_[item];
        st.out->Push(ev);
        if (ev.finish == engine::FinishReason::kNone) return !st.out->stopped();
        st.finish = ev.finish;
        st.usage = ev.usage;
        st.error = ev.error;
        if (--open_items[st.completion] == 0) {
          const CompletionLine& cl = completions_[st.completion];
          const auto [status, body] = CompletionAnswer(cl);
          write(cl.line, serve::BatchResponseLine(cl.line, input_.lines[cl.line]->custom_id, status, body));
        }
        return true;
      });
  const engine::EngineMetrics after = eng.Metrics();
  figures->computed_prompt_tokens =
      (after.prompt_tokens - after.cached_prompt_tokens) - (before.prompt_tokens - before.cached_prompt_tokens);
  figures->generated_tokens = after.generated_tokens - before.generated_tokens;
  figures->preemptions = after.preemptions - before.preemptions;
  figures->warm_requests = stats.warm_requests;
}

// The completion response of a line whose items all finished, as the server answers it; usage
// without prompt_tokens_details (cache hits depend on where a resumed job restarted, so the
// bytes of an output would too).
std::pair<int, json> Job::CompletionAnswer(const CompletionLine& cl) const {
  for (int64_t i : cl.items)
    if (item_state_[i].finish == engine::FinishReason::kError) {
      const serve::ApiError e{400, item_state_[i].error, "invalid_request_error", "prompt", "invalid_value"};
      return {400, serve::ErrorBody(e)};
    }
  const serve::CompletionRequest& r = cl.request;
  std::vector<int> picked(r.n);
  std::iota(picked.begin(), picked.end(), 0);
  if (static_cast<int>(cl.items.size()) > r.n) {
    std::vector<double> logprobs;
    for (int64_t i : cl.items) logprobs.push_back(item_state_[i].usage.cumulative_logprob);
    picked = serve::BestOf(logprobs, r.n);
  }
  engine::Usage usage;
  usage.prompt_tokens = static_cast<int64_t>(r.params.prompt.size());
  for (int64_t i : cl.items) usage.completion_tokens += item_state_[i].usage.completion_tokens;
  std::vector<serve::CompletionChoice> choices;
  for (int k : picked) {
    const ItemState& it = item_state_[cl.items[k]];
    choices.push_back(it.out->ToChoice(it.finish, r.return_token_ids, r.echo ? r.prompt_text : ""));
  }
  const serve::CompletionMeta meta{std::string(r.chat ? "chatcmpl-" : "cmpl-") + "batch-" + std::to_string(cl.line), o_.model_name,
                                   o_.created, r.chat};
  json body = serve::CompletionResponse(meta, choices, usage);
  body["usage"].erase("prompt_tokens_details");
  return {200, body};
}

namespace {

// The share of `total` rows or tokens that sharing saved computing.
double Saving(int64_t computed, int64_t total) { return total ? 1.0 - double(computed) / double(total) : 0.0; }

}  // namespace

json Job::Summary(const RunFigures& t, int ranks, int64_t answered_before) const {
  const double s = t.seconds;
  const double saving = Saving(t.computed_prompt_tokens, t.prompt_tokens);
  const double scoring_saving = Saving(t.scoring_computed_rows, t.scoring_rows);
  return {{"lines", input_.size()},
          {"answered_this_run", t.answered},
          {"answered_before", answered_before},
          {"ranks", ranks},
          {"seconds", s},
          {"requests_per_s", PerSecond(double(t.answered), s)},
          {"schedule", o_.schedule},
          {"grouping", o_.grouping},
          {"prompt_tokens", t.prompt_tokens},
          {"computed_prompt_tokens", t.computed_prompt_tokens},
          {"saving", saving},
          {"planned", PlanJson(plan_.stats)},
          {"generated_tokens", t.generated_tokens},
          {"generated_tokens_per_s", PerSecond(double(t.generated_tokens), s)},
          {"warm_requests", t.warm_requests},
          {"preemptions", t.preemptions},
          {"scoring_tokens", t.scoring_rows},
          {"scoring_computed_tokens", t.scoring_computed_rows},
          {"scoring_saving", scoring_saving},
          {"scoring_planned", PlanJson(scoring_predicted_)}};
}

std::string Job::SummaryText(const RunFigures& t, const std::string& output) const {
  const double computed_share = Saving(t.computed_prompt_tokens, t.prompt_tokens);
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "%lld lines answered in %s (%lld this run, %.1f s, %.2f req/s); prompt tokens %lld, computed %lld "
                "(saving %.1f%%, planned %.1f%%, ideal %.1f%%), %lld generated (%.1f tok/s), %lld preemptions",
                static_cast<long long>(input_.size()), output.c_str(), static_cast<long long>(t.answered), t.seconds,
                PerSecond(double(t.answered), t.seconds), static_cast<long long>(t.prompt_tokens),
                static_cast<long long>(t.computed_prompt_tokens), 100.0 * computed_share, 100 * plan_.stats.saving(),
                100 * plan_.stats.ideal_saving(), static_cast<long long>(t.generated_tokens),
                PerSecond(double(t.generated_tokens), t.seconds), static_cast<long long>(t.preemptions));
  return buf;
}

}  // namespace radixlm::batch
