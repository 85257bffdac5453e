#include "runner/speculate_bench.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_features.h"
#include "runner/model_executor.h"
#include "runner/serving_engine.h"

namespace radixlm::runner {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The forward time of r rows of one sequence after `prompt` (its KV computed once), r = 1 ..
// max_rows, each the median of `reps` runs with logits for every row, as a step verifying a
// draft of r - 1 tokens computes them. Returns seconds per r (index r - 1).
std::vector<double> VerificationCost(models::Transformer& model, core::ThreadPool& pool, const std::vector<int32_t>& prompt,
                                     int max_rows, core::DType kv_dtype, int reps) {
  const int32_t bt = 16;
  const int64_t tokens = static_cast<int64_t>(prompt.size()) + max_rows;
  const int32_t blocks = static_cast<int32_t>((tokens + bt - 1) / bt);
  models::KvStore kv(model.config(), {blocks, bt, kv_dtype});
  std::unique_ptr<models::SsmStateStore> states;
  if (model.config().n_ssm_layers() > 0) states = std::make_unique<models::SsmStateStore>(model.config(), 2);
  ModelExecutor exec(model, pool, kv, states.get());
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int32_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = b;
  std::vector<float> logits;
  engine::StepSequence s;
  s.tokens = prompt;
  s.block_table = table;
  s.logit_rows = 1;
  s.state_slot = states ? 0 : -1;
  s.reset_state = true;
  exec.Execute({}, std::span(&s, 1), &logits);
  if (states) exec.CopyState(0, 1);  // the state after the prompt, restored before every run
  std::vector<int32_t> rows(static_cast<size_t>(max_rows));
  for (int i = 0; i < max_rows; ++i) rows[static_cast<size_t>(i)] = prompt[static_cast<size_t>(i) % prompt.size()];
  std::vector<double> cost;
  for (int r = 1; r <= max_rows; ++r) {
    std::vector<double> runs;
    for (int k = 0; k < reps; ++k) {
      engine::StepSequence v;
      v.tokens = std::span<const int32_t>(rows.data(), static_cast<size_t>(r));
      v.start_position = static_cast<int32_t>(prompt.size());
      v.context = prompt;
      v.block_table = table;
      v.logit_rows = r;
      v.state_slot = states ? 0 : -1;
      v.restore_from = states ? 1 : -1;
      const auto t0 = Clock::now();
      exec.Execute({}, std::span(&v, 1), &logits);
      runs.push_back(SecondsSince(t0));
    }
    cost.push_back(MedianOf(runs));
  }
  return cost;
}

}  // namespace

core::StatusOr<SpeculativeRun> RunSpeculative(models::Transformer& model, core::ThreadPool& pool,
                                              const std::vector<int32_t>& prompt, const GenerateOptions& gen,
                                              const ServingOptions& options, core::DType kv_dtype,
                                              const std::function<void(int32_t)>& on_token) {
  ServingOptions eo = options;
  eo.kv_tokens = std::max<int64_t>(eo.kv_tokens, static_cast<int64_t>(prompt.size()) + gen.max_tokens + 64 * eo.block_tokens);
  auto serving = ServingEngine::Make(model, pool, eo, kv_dtype);
  RADIXLM_RETURN_IF_ERROR(serving.status());
  engine::Engine& eng = (*serving)->engine();
  engine::RequestParams p;
  p.prompt = prompt;
  p.max_tokens = gen.max_tokens;
  p.stop_ids = gen.stop_ids;
  p.sampling = gen.sampling;
  SpeculativeRun run;
  Clock::time_point first;
  int64_t steps_at_first = 0;
  bool done = false;
  std::string error;
  const auto t0 = Clock::now();
  auto id = eng.Submit(p, [&](const engine::TokenEvent& ev) {
    if (ev.token >= 0) {
      if (run.tokens.empty()) {
        first = Clock::now();
        run.prefill_seconds = std::chrono::duration<double>(first - t0).count();
        steps_at_first = eng.Metrics().steps + 1;  // (the metrics of this step are published after it)
      }
      run.tokens.push_back(ev.token);
      if (on_token) on_token(ev.token);
    }
    if (ev.finish != engine::FinishReason::kNone) {
      done = true;
      run.stopped = ev.finish == engine::FinishReason::kStop;
      if (ev.finish == engine::FinishReason::kError) error = ev.error;
    }
  });
  RADIXLM_RETURN_IF_ERROR(id.status());
  while (!done && eng.Step()) {
  }
  if (!error.empty()) return core::Status(core::StatusCode::kInternal, error);
  run.decode_seconds = run.tokens.size() > 1 ? SecondsSince(first) : 0;
  const engine::EngineMetrics m = eng.Metrics();
  run.decode_steps = m.steps - steps_at_first;
  run.by_origin = json::object();
  const engine::SpeculationCounts all = m.SpeculationTotal();
  run.verifications = all.steps;
  run.drafted = all.drafted;
  run.accepted = all.accepted;
  for (size_t i = 0; i < m.speculation.size(); ++i) {
    const engine::SpeculationCounts& c = m.speculation[i];
    if (c.drafted > 0)
      run.by_origin[engine::SpeculationOrigin(i)] = {
          {"verifications", c.steps}, {"drafted", c.drafted}, {"accepted", c.accepted}, {"recomputed", c.recomputed}};
  }
  return run;
}

core::StatusOr<json> BenchSpeculativeDecode(models::Transformer& model, core::ThreadPool& pool,
                                            const std::vector<int32_t>& prompt, int gen_tokens,
                                            const sampling::SamplingParams& sampling, const ServingOptions& eo,
                                            core::DType kv_dtype, int repeats) {
  if (gen_tokens < 2) return core::InvalidArgument("--gen-tokens must be at least 2");
  if (static_cast<int64_t>(prompt.size()) + gen_tokens > model.config().max_context)
    return core::InvalidArgument("prompt of " + std::to_string(prompt.size()) + " tokens plus --gen-tokens " +
                                 std::to_string(gen_tokens) + " exceeds the model's context of " +
                                 std::to_string(model.config().max_context));
  GenerateOptions gen;
  gen.max_tokens = gen_tokens;  // no stop: every run decodes gen_tokens
  gen.sampling = sampling;
  std::vector<double> rates;
  SpeculativeRun run;
  for (int r = 0; r < repeats; ++r) {
    gen.sampling.seed = sampling.seed + static_cast<uint64_t>(r);
    auto one = RunSpeculative(model, pool, prompt, gen, eo, kv_dtype);
    RADIXLM_RETURN_IF_ERROR(one.status());
    run = std::move(one).value();
    rates.push_back(run.decode_seconds > 0 ? (run.tokens.size() - 1) / run.decode_seconds : 0);
  }
  const std::vector<double> cost = VerificationCost(model, pool, prompt, eo.draft_max + 1, kv_dtype, 7);
  json cost_ratio = json::array();
  for (double c : cost) cost_ratio.push_back(c / cost[0]);
  const double tokens_per_step = run.decode_steps > 0 ? double(run.tokens.size() - 1) / run.decode_steps : 0;
  // What the acceptance implies on its own: tokens per step over the cost of the step's rows
  // (1 + the mean draft, interpolated in the measured costs) relative to one row.
  const double rows = run.verifications > 0 && run.decode_steps > 0 ? 1.0 + double(run.drafted) / run.decode_steps : 1.0;
  const size_t lo = std::min(cost.size() - 1, static_cast<size_t>(rows) - 1);
  const size_t hi = std::min(cost.size() - 1, lo + 1);
  const double step_cost = (cost[lo] + (rows - 1 - static_cast<double>(lo)) * (cost[hi] - cost[lo])) / cost[0];
  return json{{"model", model.config().name},
                  {"threads", pool.size()},
                  {"isa", core::IsaName(core::ActiveIsa())},
                  {"speculate", eo.speculate},
                  {"draft_max", eo.draft_max},
                  {"prompt_tokens", prompt.size()},
                  {"gen_tokens", gen_tokens},
                  {"temperature", sampling.temperature},
                  {"repeats", repeats},
                  {"decode_tokens_per_s", MedianOf(rates)},
                  {"decode_tokens_per_s_runs", rates},
                  {"decode_steps", run.decode_steps},
                  {"tokens_per_step", tokens_per_step},
                  {"verifications", run.verifications},
                  {"drafted", run.drafted},
                  {"accepted", run.accepted},
                  {"accepted_per_step", run.decode_steps > 0 ? double(run.accepted) / run.decode_steps : 0.0},
                  {"acceptance_rate", run.drafted > 0 ? double(run.accepted) / run.drafted : 0.0},
                  {"by_origin", run.by_origin},
                  {"verify_seconds_1_row", cost[0]},
                  {"verify_cost_ratio", cost_ratio},
                  {"mean_rows_per_step", rows},
                  {"implied_speedup", tokens_per_step / step_cost},
                  {"tokens", run.tokens}};
}

}  // namespace radixlm::runner
