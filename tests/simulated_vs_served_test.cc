// The simulator predicts what serving does: multi-turn conversations are served by the engine
// on a real (tiny random) model, the requests as served are written down as a trace (inputs and
// the outputs the model generated), and the trace is simulated with the same engine
// configuration (--memory engine, arrivals at their timestamps). Every request's hit, and the
// engine's totals (cached and computed tokens, preemptions), must be equal.
#include <gtest/gtest.h>

#include <map>

#include "cache/hybrid_cache.h"
#include "core/random.h"
#include "engine/engine.h"
#include "models/kv_store.h"
#include "models/loader.h"
#include "runner/hybrid_cache_setup.h"
#include "runner/model_executor.h"
#include "sim/simulator.h"

namespace radixlm {
namespace {

struct RunRecord {
  std::vector<sim::TraceRequest> trace;         // as served, in submission order
  std::map<std::pair<int64_t, int64_t>, int64_t> hits;  // (session, turn) -> cached prompt tokens
  engine::EngineMetrics metrics;
};

// Conversations sharing a system prompt; every round submits each conversation's next turn at
// once (the engine serves them concurrently) and runs until idle.
RunRecord Serve(models::Transformer& model, const engine::EngineConfig& cfg, const std::string& policy, uint64_t seed) {
  core::ThreadPool pool(1);
  models::KvStore kv(model.config(), {cfg.num_blocks, cfg.block_tokens, core::DType::kF32});
  auto hybrid = runner::MakeHybridServing(model.config(), runner::ShapeOfModel(model.config()), cfg.scheduler.max_running,
                                          policy.empty() ? 0 : cfg.checkpoint_slots, policy.empty() ? "sglang+" : policy,
                                          0.0, cfg.prompt_end_checkpoints)
                    .value();
  runner::ModelExecutor exec(model, pool, kv, hybrid.states.get());
  exec.set_compaction({.threshold = 0});
  engine::Engine eng(cfg, exec, hybrid.cache.get());
  core::Rng rng(seed);
  const int64_t vocab = model.config().vocab_size;
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng.Below(vocab));
    return t;
  };
  const std::vector<int32_t> system = random_tokens(23);
  constexpr int kConversations = 5, kTurns = 4;
  std::vector<std::vector<int32_t>> history(kConversations, system);
  RunRecord run;
  for (int turn = 0; turn < kTurns; ++turn) {
    std::vector<size_t> this_round;
    for (int c = 0; c < kConversations; ++c) {
      std::vector<int32_t> user = random_tokens(3 + static_cast<int>(rng.Below(15)));
      sim::TraceRequest r;
      r.session_id = c;
      r.turn_id = turn;
      r.ts = 1000.0 * turn;  // rounds far apart: each starts on an idle engine, as served here
      r.input = history[c];
      r.input.insert(r.input.end(), user.begin(), user.end());
      engine::RequestParams p;
      p.prompt = r.input;
      p.max_tokens = 2 + static_cast<int>(rng.Below(6));
      const size_t idx = run.trace.size();
      run.trace.push_back(r);
      this_round.push_back(idx);
      auto id = eng.Submit(p, [&run, idx](const engine::TokenEvent& ev) {
        if (ev.token >= 0) run.trace[idx].output.push_back(ev.token);
        if (ev.finish != engine::FinishReason::kNone)
          run.hits[{run.trace[idx].session_id, run.trace[idx].turn_id}] = ev.usage.cached_tokens;
      });
      EXPECT_TRUE(id.ok()) << id.status().ToString();
    }
    eng.RunUntilIdle();
    for (size_t idx : this_round) {
      const sim::TraceRequest& r = run.trace[idx];
      history[r.session_id] = r.input;
      history[r.session_id].insert(history[r.session_id].end(), r.output.begin(), r.output.end());
    }
  }
  run.metrics = eng.Metrics();
  return run;
}

RunRecord Simulate(const models::ModelConfig& model, const engine::EngineConfig& cfg, const std::string& policy,
             const std::vector<sim::TraceRequest>& trace) {
  const cache::HybridShape shape = runner::ShapeOfModel(model);
  sim::SimulatorConfig c;
  c.name = policy.empty() ? "lru" : policy;
  c.engine = cfg;
  c.arrivals = sim::Arrivals::kTrace;
  sim::SimPolicy p;
  if (model.n_ssm_layers() > 0) {
    const cache::MemoryConfig layout{.max_running = cfg.scheduler.max_running, .recurrent = true,
                                     .checkpoint_slots = policy.empty() ? 0 : cfg.checkpoint_slots,
                                     .prompt_end_checkpoints = cfg.prompt_end_checkpoints};
    c.executor.state_slots = cache::Memory::StateSlots(layout, !policy.empty());
    c.executor.prefill_alignment = model.ssm_chunk;
    if (!policy.empty())
      p.checkpoints = cache::MakeSlotCheckpointCache(cache::ParseHybridPolicy(policy).value(), cfg.checkpoint_slots, shape).value();
  }
  sim::Simulator simulator(c, std::move(p), cache::CostModel(shape, cache::Accounting::kCorrected));
  for (const sim::TraceRequest& r : trace) EXPECT_TRUE(simulator.Feed(r).ok());
  const sim::SimResult res = simulator.Finish();
  RunRecord run;
  for (const sim::RequestRecord& r : res.requests) run.hits[{r.session_id, r.turn_id}] = r.hit_tokens;
  run.metrics = res.metrics;
  return run;
}

void ExpectSameHits(const RunRecord& served, const RunRecord& simulated) {
  ASSERT_EQ(served.hits.size(), simulated.hits.size());
  for (const auto& [key, hit] : served.hits)
    EXPECT_EQ(simulated.hits.at(key), hit) << "session " << key.first << " turn " << key.second;
  EXPECT_EQ(simulated.metrics.cached_prompt_tokens, served.metrics.cached_prompt_tokens);
  EXPECT_EQ(simulated.metrics.hit_requests, served.metrics.hit_requests);
  EXPECT_EQ(simulated.metrics.computed_tokens, served.metrics.computed_tokens);
  EXPECT_EQ(simulated.metrics.preemptions, served.metrics.preemptions);
  EXPECT_EQ(simulated.metrics.evicted_tokens, served.metrics.evicted_tokens);
  EXPECT_DOUBLE_EQ(simulated.metrics.TokenHitRate(), served.metrics.TokenHitRate());
}

TEST(SimulatedVsServed, AttentionModelSameHitsWithEvictionAndPreemption) {
  auto model = models::LoadModel("random:tiny").value();
  for (int32_t blocks : {400, 40, 30}) {  // roomy; evicting; preempting
    engine::EngineConfig cfg{.num_blocks = blocks, .block_tokens = 4};
    cfg.scheduler.max_running = 5;
    cfg.scheduler.step_token_budget = 200;
    const RunRecord served = Serve(*model, cfg, "", 7);
    const RunRecord simulated = Simulate(model->config(), cfg, "", served.trace);
    SCOPED_TRACE("blocks " + std::to_string(blocks));
    ExpectSameHits(served, simulated);
    EXPECT_GT(served.metrics.cached_prompt_tokens, 0);
    if (blocks <= 40) {
      EXPECT_GT(served.metrics.evicted_tokens, 0);
    }
    if (blocks == 30) {
      EXPECT_GT(served.metrics.preemptions, 0);
    }
  }
}

TEST(SimulatedVsServed, HybridModelSameHitsUnderEachCheckpointPolicy) {
  for (const char* spec : {"random:nemotron-h-tiny", "random:qwen35-tiny"}) {  // Mamba2; Gated DeltaNet
    auto model = models::LoadModel(spec).value();
    for (const std::string policy : {"sglang+", "marconi-static"}) {
      for (int slots : {3, 12}) {
        engine::EngineConfig cfg{.num_blocks = 300, .block_tokens = 4, .checkpoint_slots = slots};
        cfg.prompt_end_checkpoints = policy == "marconi-static";
        cfg.scheduler.max_running = 3;
        cfg.scheduler.step_token_budget = 64;
        const RunRecord served = Serve(*model, cfg, policy, 11);
        const RunRecord simulated = Simulate(model->config(), cfg, policy, served.trace);
        SCOPED_TRACE(std::string(spec) + " " + policy + ", " + std::to_string(slots) + " slots");
        ExpectSameHits(served, simulated);
        if (slots == 12) {
          EXPECT_GT(served.metrics.cached_prompt_tokens, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace radixlm
