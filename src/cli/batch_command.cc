// radixlm batch: an offline job in the OpenAI Batch file format (batch/job.h), resumable after
// a kill (batch/journal.h) and sharded over MPI ranks. Reads the flags, loads the model, runs
// this rank's share of the job, sums the figures over ranks; rank 0 merges the parts.
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "batch/job.h"
#include "batch/journal.h"
#include "core/json_text.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "cli/mpi_world.h"
#include "core/progress.h"
#include "runner/scoring.h"
#include "runner/scoring_queue.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

struct BatchOptions {
  ModelOptions model;
  EngineOptions engine;
  batch::JobOptions job;
  std::string input, output, chat_template;
  bool plan_only = false, json_out = false;
  int64_t created = -1;
  int64_t scoring_batch_tokens = 8192;
};

std::string ReadFileOrExit(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ExitIfError(core::Status(core::StatusCode::kNotFound, "cannot read " + path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

batch::RunFigures SumOverRanks(MpiWorld& world, const batch::RunFigures& f) {
  return {.answered = world.Sum(f.answered),
          .prompt_tokens = world.Sum(f.prompt_tokens),
          .computed_prompt_tokens = world.Sum(f.computed_prompt_tokens),
          .generated_tokens = world.Sum(f.generated_tokens),
          .preemptions = world.Sum(f.preemptions),
          .warm_requests = world.Sum(f.warm_requests),
          .scoring_rows = world.Sum(f.scoring_rows),
          .scoring_computed_rows = world.Sum(f.scoring_computed_rows),
          .seconds = world.Max(f.seconds)};
}

// What the job runs on: the model, its tokenizer and template, the engine, a scoring service.
struct Loaded {
  ModelAndTokenizer model;
  std::unique_ptr<core::ThreadPool> pool;
  std::unique_ptr<runner::ServingEngine> serving;
};

batch::JobRuntime RuntimeOf(BatchOptions& o, bool max_running_given, Loaded* l) {
  ModelOptions model_options = o.model;
  model_options.kv_tokens = o.engine.kv_tokens;  // refused up front when it cannot fit
  l->model = LoadModelAndTokenizerOrExit(model_options);
  models::Transformer& model = *l->model.model;
  const tokenizer::Tokenizer& tok = *l->model.tokenizer;
  l->pool = std::make_unique<core::ThreadPool>(o.model.threads);
  // Memory-centric batching: no request cap unless asked; the KV pool decides admissions.
  if (o.job.schedule == "plan" && !max_running_given) o.engine.max_running = 256;
  l->serving = MakeServingEngineOrExit(model, *l->pool, o.engine, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  batch::JobRuntime rt{.tok = &tok, .engine = &l->serving->engine(), .stop_ids = EndOfTurnIds(tok)};
  if (auto f = tokenizer::ChatTemplate::ForTokenizer(tok, o.chat_template); f.ok()) rt.chat_format = std::move(*f);
  else if (!o.chat_template.empty()) ExitIfError(f.status());
  const runner::ScoringConfig config{.max_batch_tokens = o.scoring_batch_tokens, .kv_dtype = KvDtypeOf(o.model)};
  core::ThreadPool* pool = l->pool.get();
  const int64_t max_tokens = std::min<int64_t>(o.scoring_batch_tokens, model.config().max_context);
  rt.make_scoring = [&model, pool, config, max_tokens]() -> std::unique_ptr<engine::ScoringService> {
    return std::make_unique<runner::ScoringQueue>(
        [&model, pool, config] { return std::make_unique<runner::ScoringRunner>(model, *pool, config); }, max_tokens);
  };
  return rt;
}

void PrintPlan(const batch::Job& job, bool json_out) {
  if (json_out) std::printf("%s\n", core::JsonText(job.PlanReport()).c_str());
  else std::printf("%s\n", job.PlanText().c_str());
}

// Runs this rank's share into its part; returns its figures.
batch::RunFigures RunShare(batch::Job& job, const MpiWorld& world, const std::string& output, const batch::BatchJobId& id,
                           int64_t to_answer) {
  auto part = batch::BatchPart::Open(output, world.rank(), id);
  ExitIfError(part.status());
  const bool lead = world.rank() == 0;
  core::Progress progress(world.size() > 1 ? "batch (rank 0)" : "batch", lead ? to_answer : 0);
  int64_t answered = 0;
  const batch::RunFigures figures = job.Run(world.rank(), world.size(), [&](int64_t index, const json& line) {
    ExitIfError((*part)->Append(index, core::JsonText(line)));
    if (lead) progress.Update(++answered);
  });
  progress.Done();
  return figures;  // the part is flushed and closed here, before the merge reads it
}

void RunBatch(BatchOptions& o, bool max_running_given) {
  MpiWorld world;
  ExitIfError(world.status());
  const bool lead = world.rank() == 0;
  const std::string text = ReadFileOrExit(o.input);
  auto input = batch::ReadJobInput(text, o.input);
  ExitIfError(input.status());
  batch::BatchJobId id{batch::Sha256Hex(text), o.created >= 0 ? o.created : static_cast<int64_t>(std::time(nullptr)), {}};
  for (int64_t i = 0; i < input->size(); ++i) id.custom_ids.push_back(input->custom_id(i));
  batch::Resume resume;
  if (!o.plan_only) {  // every rank reads the parts before any rank appends
    auto r = batch::ResumeJob(o.output, &id);
    ExitIfError(r.status());
    resume = std::move(*r);
    if (resume.finished) {
      if (lead && o.json_out) std::printf("%s\n", core::JsonText(json({{"lines", input->size()}, {"already_complete", true}})).c_str());
      else if (lead) std::fprintf(stderr, "radixlm batch: %s already answers all %lld lines\n", o.output.c_str(), static_cast<long long>(input->size()));
      return;
    }
    world.Barrier();
  }
  Loaded loaded;
  o.job.model_name = o.model.model;
  o.job.created = id.created;
  batch::Job job(*input, resume.done, RuntimeOf(o, max_running_given, &loaded), o.job);
  if (o.plan_only) {
    if (lead) PrintPlan(job, o.json_out);
    return;
  }
  const int64_t before = static_cast<int64_t>(resume.done.size());
  const batch::RunFigures total = SumOverRanks(world, RunShare(job, world, o.output, id, input->size() - before));
  world.Barrier();
  if (!lead) return;
  ExitIfError(batch::MergeParts(o.output, id));
  if (o.json_out) std::printf("%s\n", core::JsonText(job.Summary(total, world.size(), before)).c_str());
  else std::fprintf(stderr, "radixlm batch: %s\n", job.SummaryText(total, o.output).c_str());
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
  AddChecked(cmd, "--grouping", o->job.grouping,
             "exact (optimal one-level groups) | paper (BatchLLM Algorithm 1) | none", CLI::IsMember({"exact", "paper", "none"}));
  AddChecked(cmd, "--order", o->job.order,
             "prefill (Eq. 3: ascending prefill tokens per group) | file", CLI::IsMember({"prefill", "file"}));
  AddChecked(cmd, "--schedule", o->job.schedule,
             "plan (groups, prefixes once) | serve (the whole file submitted at once in file order, as a server would get it)",
             CLI::IsMember({"plan", "serve"}));
  AddChecked(cmd, "--kv-budget", o->job.kv_budget,
             "fraction of the KV pool the groups in flight may project to fill", CLI::Range(0.05, 1.0));
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
