// An offline job in the OpenAI Batch file format, planned on the whole job's prefix tree
// (BatchLLM) and run by prefix groups; `radixlm batch` is its command, journal.h makes it
// resumable.
//
// One completion line, end to end: ReadJobInput -> serve::ParseCompletionRequest + BuildPrompt
// (the server's own units) -> one engine item per sample (n, or best_of) ->
// scheduler::PlanBatch over every item's prompt -> this rank's groups (ShardGroups) ->
// engine::RunBatchGroups (prefix computed once, members together) -> CompletionText per item
// (stop strings) -> CompletionResponse -> BatchResponseLine. A scoring line (/v1/embeddings,
// /embed, /rerank): ScoringApi::Prepare -> lines grouped by the plan of their first inputs ->
// one merged scoring job per group (RadixMLP computes a shared query or document once) ->
// ScoringApi::Answer per line. A line that is not a request: BatchErrorLine.
//
// Ranks: a job split over N workers (MPI ranks) runs the same Job on every rank; each answers
// its share (Run(rank, N, ...)): rank 0 the lines answered without the model, every rank the
// groups ShardGroups gives it. Figures come back per rank for the caller to sum.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/scoring_service.h"
#include "scheduler/batch_plan.h"
#include "serve/batch_file.h"
#include "serve/completion_request.h"
#include "serve/output_plan.h"
#include "serve/scoring_api.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::batch {

// The input file's non-blank lines: each a request, or what is wrong with it.
struct JobInput {
  std::vector<std::optional<serve::BatchLine>> lines;
  std::vector<serve::BatchLineError> errors;  // per line: set where lines[i] is empty
  int64_t size() const { return static_cast<int64_t>(lines.size()); }
  int64_t invalid() const;
  const std::string& custom_id(int64_t i) const { return lines[i] ? lines[i]->custom_id : errors[i].custom_id; }
};

// `text` split into lines; two requests with one custom_id are an error naming both lines
// (`name`: the file, for the message).
core::StatusOr<JobInput> ReadJobInput(const std::string& text, const std::string& name);

struct JobOptions {
  std::string model_name;  // the responses' "model"
  int64_t created = 0;     // the responses' "created"
  std::string grouping = "exact";  // exact | paper | none (scheduler::Grouping)
  std::string order = "prefill";   // prefill | file (scheduler::GroupOrder)
  std::string schedule = "plan";   // plan | serve (every item at once in file order, no groups)
  double kv_budget = 0.9;
};

// What the job runs on (borrowed, but the chat template). The scoring service is made when the first scoring line
// needs it, so a job of completions never builds one.
struct JobRuntime {
  const tokenizer::Tokenizer* tok = nullptr;
  std::optional<tokenizer::ChatTemplate> chat_format;  // the job's (owned); none: completions only
  engine::Engine* engine = nullptr;
  std::vector<int32_t> stop_ids;  // the ids that end an output (EOS, end of turn)
  std::function<std::unique_ptr<engine::ScoringService>()> make_scoring;
};

// One rank's figures of one run; Add sums them over ranks (seconds: the slowest).
struct RunFigures {
  int64_t answered = 0;
  int64_t prompt_tokens = 0, computed_prompt_tokens = 0;  // this rank's completion items
  int64_t generated_tokens = 0, preemptions = 0, warm_requests = 0;
  int64_t scoring_rows = 0, scoring_computed_rows = 0;
  double seconds = 0;
};

// Where each answer goes: (input line index, its output line).
using WriteAnswer = std::function<void(int64_t, const nlohmann::json&)>;

class Job {
 public:
  // Prepares every line not in `done` (input line index -> its recorded output): completion
  // lines become engine items, scoring lines calls, refused requests their answers; then plans
  // completions by their items' prompts and scoring lines by their first inputs.
  Job(const JobInput& input, const std::map<int64_t, std::string>& done, JobRuntime runtime, JobOptions options);
  ~Job();

  // --plan-only: the groups (custom_ids), the predicted saving, the imbalance over 1-64 ranks.
  nlohmann::json PlanReport() const;
  std::string PlanText() const;  // one line for a person

  // This rank's share of the lines not done, each answer handed to `write` as it is made.
  RunFigures Run(int rank, int ranks, const WriteAnswer& write);

  // The run's summary from the figures summed over ranks.
  nlohmann::json Summary(const RunFigures& total, int ranks, int64_t answered_before) const;
  std::string SummaryText(const RunFigures& total, const std::string& output) const;

 private:
  struct CompletionLine;
  struct ItemState;
  struct ScoringLine;
  void PrepareCompletion(int64_t i, const serve::BatchLine& line, bool chat);
  void PrepareScoring(int64_t i, const serve::BatchLine& line);
  void Plan();
  void AnswerWithoutModel(const WriteAnswer& write);
  void RunScoring(int rank, int ranks, const WriteAnswer& write, RunFigures* figures);
  void RunScoringRun(const std::vector<int64_t>& members, size_t a, size_t b, const WriteAnswer& write);
  void RunCompletions(int rank, int ranks, const WriteAnswer& write, RunFigures* figures);
  std::pair<int, nlohmann::json> CompletionAnswer(const CompletionLine& cl) const;

  const JobInput& input_;
  const std::map<int64_t, std::string>& done_;
  JobRuntime rt_;
  JobOptions o_;
  std::optional<serve::OutputShaper> shaper_;
  std::vector<CompletionLine> completions_;
  std::vector<engine::RequestParams> items_;
  std::vector<ItemState> item_state_;
  std::map<int64_t, std::pair<int, nlohmann::json>> immediate_;  // line -> (status, body): refused requests
  std::unique_ptr<engine::ScoringService> scoring_;
  std::unique_ptr<serve::ScoringApi> scoring_api_;
  std::vector<ScoringLine> scoring_lines_;
  // The plans and their inputs.
  std::vector<std::vector<int32_t>> prompts_, scoring_first_;
  std::vector<int64_t> generate_, scoring_rest_;
  scheduler::BatchPlan plan_, scoring_plan_;
  scheduler::BatchPlanStats scoring_predicted_;
};

}  // namespace radixlm::batch
