// The engine with a real (tiny random) model: sharing must never change an answer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <filesystem>
#include <map>

#include "core/random.h"
#include "engine/batch_runner.h"
#include "engine/engine.h"
#include "models/loader.h"
#include "models/ssm_state.h"
#include "tier/disk_tier.h"
#include "runner/hybrid_cache_setup.h"
#include "sim/model_shape.h"
#include "runner/model_executor.h"
#include "scheduler/admission.h"
#include "scheduler/batch_plan.h"

namespace radixlm {
namespace {

struct Outcome {
  std::map<int, std::vector<int32_t>> outputs;  // by request index
  std::map<int, engine::Usage> usage;
  engine::EngineMetrics metrics;
  int64_t cascade_rows = 0;
  int64_t cascade_nested_rows = 0;
};

struct Workload {
  std::vector<engine::RequestParams> requests;
  std::vector<int> submit_step;  // requests are submitted when the engine reaches this step
};

Workload MakeWorkload(uint64_t seed, int64_t vocab) {
  core::Rng rng(seed);
  std::vector<std::vector<int32_t>> bases;
  for (int b = 0; b < 4; ++b) {
    std::vector<int32_t> t(20 + rng.Below(40));
    for (auto& x : t) x = static_cast<int32_t>(rng.Below(vocab));
    bases.push_back(t);
  }
  Workload w;
  for (int i = 0; i < 24; ++i) {
    const auto& base = bases[rng.Below(bases.size())];
    engine::RequestParams p;
    p.prompt.assign(base.begin(), base.begin() + 1 + rng.Below(base.size()));  // cut anywhere, even mid-block
    const int extra = static_cast<int>(rng.Below(12));
    for (int k = 0; k < extra; ++k) p.prompt.push_back(static_cast<int32_t>(rng.Below(vocab)));
    p.max_tokens = 1 + static_cast<int>(rng.Below(10));
    w.requests.push_back(p);
    w.submit_step.push_back(static_cast<int>(rng.Below(30)));
  }
  return w;
}

// Speculative decoding's workload: prompts that repeat themselves (a pattern twice, so prompt
// lookup finds drafts), exact repeats of earlier prompts submitted later (the radix tree then
// holds what followed, so the tree source drafts whole answers), long enough outputs; greedy
// and seeded sampling, stop ids, min_tokens, penalties, log-probabilities.
Workload MakeSpeculationWorkload(uint64_t seed, int64_t vocab) {
  core::Rng rng(seed);
  std::vector<std::vector<int32_t>> bases;
  for (int b = 0; b < 4; ++b) {
    std::vector<int32_t> pattern(6 + rng.Below(10));
    for (auto& x : pattern) x = static_cast<int32_t>(rng.Below(vocab));
    std::vector<int32_t> t = pattern;
    for (int k = 0; k < 2; ++k) t.insert(t.end(), pattern.begin(), pattern.end());
    bases.push_back(t);
  }
  Workload w;
  for (int i = 0; i < 20; ++i) {
    engine::RequestParams p;
    if (i >= 10 && rng.Below(2) == 0) {  // an earlier request again, later
      const int j = static_cast<int>(rng.Below(10));
      p = w.requests[static_cast<size_t>(j)];
      w.requests.push_back(p);
      w.submit_step.push_back(w.submit_step[static_cast<size_t>(j)] + 40 + static_cast<int>(rng.Below(20)));
      continue;
    }
    const auto& base = bases[rng.Below(bases.size())];
    p.prompt.assign(base.begin(), base.begin() + 4 + rng.Below(base.size() - 3));
    for (int k = static_cast<int>(rng.Below(4)); k > 0; --k) p.prompt.push_back(static_cast<int32_t>(rng.Below(vocab)));
    p.max_tokens = 8 + static_cast<int>(rng.Below(32));
    p.cumulative_logprob = true;
    switch (rng.Below(5)) {
      case 0: p.sampling.temperature = 0.9f, p.sampling.seed = 100 + i; break;
      case 1: p.stop_ids = {p.prompt[rng.Below(p.prompt.size())]}, p.min_tokens = 3; break;
      case 2: p.sampling.frequency_penalty = 0.5f, p.sampling.repetition_penalty = 1.1f; break;
      case 3: p.top_logprobs = 3; break;
      default: break;
    }
    w.requests.push_back(p);
    w.submit_step.push_back(static_cast<int>(rng.Below(20)));
  }
  return w;
}

// policy: for a model with Mamba2 layers, the hybrid cache policy ("" = no prefix reuse).
// compaction: intra-step prefix dedup in the executor (threshold 0 = off).
Outcome RunWorkload(models::Transformer& model, const Workload& w, engine::EngineConfig cfg,
                    const std::string& policy = "", runner::PrefillCompaction compaction = {.threshold = 0},
                    core::DType kv_dtype = core::DType::kF32, bool cascade = true, bool parallel_sampling = false,
                    tier::DiskTier* disk = nullptr, const models::WindowRings& rings = {}) {
  core::ThreadPool pool(2);
  if (parallel_sampling) cfg.sampling_pool = &pool;
  models::KvStore kv(model.config(), {cfg.num_blocks, cfg.block_tokens, kv_dtype, rings.ring_tokens > 0});
  auto hybrid = runner::MakeHybridServing(model.config(), runner::ShapeOfModel(model.config(), kv_dtype, rings),
                                          cfg.scheduler.max_running, policy.empty() ? 0 : cfg.checkpoint_slots,
                                          policy.empty() ? "sglang+" : policy, 0.0, cfg.prompt_end_checkpoints,
                                          cfg.speculate.on(), rings)
                    .value();
  runner::ModelExecutor exec(model, pool, kv, hybrid.states.get());
  exec.set_compaction(compaction);
  exec.set_cascade(cascade);
  exec.set_tier(disk);
  cache::PrefixCaches caches(hybrid.cache.get());
  caches.tier = disk;
  engine::Engine eng(cfg, exec, caches);
  Outcome out;
  int step = 0;
  size_t submitted = 0;
  std::vector<size_t> order(w.requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w.submit_step[a] < w.submit_step[b]; });
  while (true) {
    while (submitted < order.size() && w.submit_step[order[submitted]] <= step) {
      const int idx = static_cast<int>(order[submitted++]);
      auto id = eng.Submit(w.requests[idx], [&out, idx](const engine::TokenEvent& ev) {
        if (ev.token >= 0) out.outputs[idx].push_back(ev.token);
        if (ev.finish != engine::FinishReason::kNone) out.usage[idx] = ev.usage;
      });
      EXPECT_TRUE(id.ok()) << id.status().ToString();
    }
    const bool worked = eng.Step();
    ++step;
    if (!worked && submitted == order.size()) break;
    if (step > 100000) break;
  }
  out.cascade_rows = exec.cascade_rows();
  out.cascade_nested_rows = exec.cascade_nested_rows();
  out.metrics = eng.Metrics();
  EXPECT_EQ(out.metrics.running, 0);
  EXPECT_EQ(out.metrics.waiting, 0);
  // The tree, the block pool and every state slot (free or held by exactly one checkpoint).
  EXPECT_EQ(eng.memory().CheckInvariants(), "");
  return out;
}

int64_t Accepted(const engine::EngineMetrics& m) {
  int64_t a = 0;
  for (const engine::SpeculationCounts& c : m.speculation) a += c.accepted;
  return a;
}
int64_t Drafted(const engine::EngineMetrics& m) {
  int64_t d = 0;
  for (const engine::SpeculationCounts& c : m.speculation) d += c.drafted;
  return d;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = models::LoadModel("random:tiny").value().release(); }
  static void TearDownTestSuite() { delete model_; }
  static models::Transformer* model_;
};
models::Transformer* EngineTest::model_ = nullptr;

TEST_F(EngineTest, PrefixCacheNeverChangesAnAnswer) {
  int64_t preemptions_on = 0, preemptions_off = 0, evicted = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const Workload w = MakeWorkload(seed, model_->config().vocab_size);
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    engine::EngineConfig on_small = on;
    on_small.num_blocks = 14;  // forces eviction and preemption
    on_small.scheduler.max_running = 8;
    engine::EngineConfig off_small = on_small;
    off_small.prefix_cache = false;
    const Outcome a = RunWorkload(*model_, w, off), b = RunWorkload(*model_, w, on), c = RunWorkload(*model_, w, on_small),
                  d = RunWorkload(*model_, w, off_small);
    ASSERT_EQ(a.outputs.size(), w.requests.size());
    for (size_t i = 0; i < w.requests.size(); ++i) {
      EXPECT_EQ(a.outputs.at(i).size(), static_cast<size_t>(w.requests[i].max_tokens));
      EXPECT_EQ(b.outputs.at(i), a.outputs.at(i)) << "cache on, request " << i;
      EXPECT_EQ(c.outputs.at(i), a.outputs.at(i)) << "cache on, small pool, request " << i;
      EXPECT_EQ(d.outputs.at(i), a.outputs.at(i)) << "cache off, small pool, request " << i;
    }
    EXPECT_GT(b.metrics.cached_prompt_tokens, 0) << "the workload shares prefixes";
    EXPECT_LT(b.metrics.computed_tokens, a.metrics.computed_tokens);
    preemptions_on += c.metrics.preemptions;
    preemptions_off += d.metrics.preemptions;
    evicted += c.metrics.evicted_tokens;
  }
  // The small pools really exercised eviction and preempt-and-recompute.
  EXPECT_GT(preemptions_on, 0);
  EXPECT_GT(preemptions_off, 0);
  EXPECT_GT(evicted, 0);
}

// A disk tier under a pool so small that prefixes keep leaving it: a match goes on through the
// blocks the tier holds (loaded, not computed), with eviction, preemption, copy-on-write of a
// partial block, step dedup and a bf16 KV; then a new engine and a new tier object on the same
// folder (a restart) start warm. Every answer is bitwise the plain run's.
TEST_F(EngineTest, ADiskTierUnderThePoolNeverChangesAnAnswer) {
  int64_t disk_hits = 0, restart_hits = 0, loaded = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const Workload w = MakeWorkload(seed, model_->config().vocab_size);
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    engine::EngineConfig small = off;
    small.prefix_cache = true;
    small.num_blocks = 14;  // forces eviction and preemption
    small.scheduler.max_running = 8;
    char tmpl[] = "/tmp/radixlm_engine_tier_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    for (core::DType kv : {core::DType::kF32, core::DType::kBF16}) {
      const Outcome plain = RunWorkload(*model_, w, off, "", {.threshold = 0}, kv);
      auto open = [&] {
        return tier::DiskTier::Open({.dir = dir, .capacity_bytes = 1 << 30, .fingerprint = std::string("test:") + core::DTypeName(kv).data(),
                                     .block_tokens = 8, .block_bytes = models::KvStore::BytesPerBlock(model_->config(), 8, kv)})
            .value();
      };
      auto disk = open();
      const Outcome first = RunWorkload(*model_, w, small, "", {.threshold = 0}, kv, true, false, disk.get());
      const Outcome dedup = RunWorkload(*model_, w, small, "", {.threshold = 1.0}, kv, true, false, disk.get());
      disk.reset();  // a restart: the writes end, a new object lists the folder
      auto again = open();
      const Outcome restarted = RunWorkload(*model_, w, small, "", {.threshold = 0}, kv, true, false, again.get());
      for (size_t i = 0; i < w.requests.size(); ++i) {
        EXPECT_EQ(first.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " request " << i;
        EXPECT_EQ(dedup.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " request " << i;
        EXPECT_EQ(restarted.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " request " << i;
      }
      EXPECT_EQ(first.metrics.tier_failed_loads + restarted.metrics.tier_failed_loads, 0);
      disk_hits += first.metrics.tier_hit_tokens + dedup.metrics.tier_hit_tokens;
      restart_hits += restarted.metrics.tier_hit_tokens;
      loaded += again->stats().loaded_blocks;
    }
    std::filesystem::remove_all(dir);
  }
  EXPECT_GT(disk_hits, 0) << "hits came from the tier";
  EXPECT_GT(restart_hits, 0) << "a restarted engine starts warm";
  EXPECT_GT(loaded, 0);
}

// Intra-step prefix dedup in prefill: requests submitted together that share a prompt prefix
// compute the shared rows once (trie-space or scatter/gather attention), composed with the
// radix cache (cached rows are not computed at all), with chunked prefill, continuing chunks
// whose contexts differ, and preemption. Every answer is bitwise the plain run's.
// A step's rows sampled in parallel on the executor's pool draw exactly the tokens they draw in
// order (each request has its own seeded generator): temperature, top-k and top-p, with best_of's
// cumulative log-probabilities.
TEST_F(EngineTest, ParallelSamplingDrawsTheSameTokens) {
  Workload w = MakeWorkload(7, model_->config().vocab_size);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    engine::RequestParams& p = w.requests[i];
    p.sampling = {.temperature = 0.9f, .top_k = i % 3 == 1 ? 20 : 0, .top_p = i % 3 == 2 ? 0.8f : 1.0f, .seed = 100 + i};
    p.max_tokens += 8;
    p.cumulative_logprob = i % 2 == 0;
  }
  const engine::EngineConfig cfg{.num_blocks = 512, .block_tokens = 8};
  const Outcome serial = RunWorkload(*model_, w, cfg);
  const Outcome parallel = RunWorkload(*model_, w, cfg, "", {.threshold = 0}, core::DType::kF32, true, /*parallel_sampling=*/true);
  EXPECT_EQ(serial.outputs, parallel.outputs);
  for (size_t i = 0; i < w.requests.size(); ++i)
    EXPECT_EQ(serial.usage.at(i).cumulative_logprob, parallel.usage.at(i).cumulative_logprob) << i;
  int several = 0;  // requests that sampled several tokens (the comparison is not of empty outputs)
  for (const auto& [i, tokens] : serial.outputs) several += tokens.size() > 1;
  EXPECT_GT(several, 10);
}

// A model with more output rows than its tokenizer has tokens (issue 45's probe: a sampled id
// without a token ended the chat command): those ids are never sampled, greedy or not.
TEST_F(EngineTest, IdsPastTheTokenizerAreNeverSampled) {
  Workload w = MakeWorkload(11, model_->config().vocab_size);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    engine::RequestParams& p = w.requests[i];
    p.sampling = {.temperature = i % 2 ? 1.5f : 0.0f, .seed = 7 + i};
    p.max_tokens += 20;
    p.top_logprobs = i % 3 == 0 ? 5 : -1;
  }
  const int64_t tokens = 100;  // a tokenizer of 100 tokens for the model's rows
  engine::EngineConfig cfg{.num_blocks = 512, .block_tokens = 8};
  cfg.sampled_vocab = tokens;
  const Outcome o = RunWorkload(*model_, w, cfg);
  int64_t sampled = 0;
  for (const auto& [i, out] : o.outputs)
    for (int32_t t : out) {
      EXPECT_LT(t, tokens) << "request " << i;
      ++sampled;
    }
  EXPECT_GT(sampled, 200);
}

// On a dense model and on a mixture of experts (a shared row is routed once).
TEST_F(EngineTest, IntraStepPrefixDedupNeverChangesAnAnswer) {
  auto moe = models::LoadModel("random:qwen3moe-tiny");
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  for (models::Transformer* model : {model_, moe->get()}) {
  int64_t dedup_cache_on = 0, dedup_cache_off = 0, preemptions = 0;
  for (uint64_t seed : {4, 5, 6}) {
    Workload w = MakeWorkload(seed, model->config().vocab_size);
    for (size_t i = 0; i < w.submit_step.size(); ++i) w.submit_step[i] = static_cast<int>(i / 8) * 6;  // bursts of 8
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    off.scheduler.step_token_budget = 96 + 64 * static_cast<int>(seed % 3);  // several prompts per step, some chunked
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    engine::EngineConfig small = on;
    small.num_blocks = 20;  // preemption
    small.scheduler.max_running = 8;
    const Outcome plain = RunWorkload(*model, w, off);
    for (const bool trie : {true, false}) {
      const runner::PrefillCompaction always{.threshold = 1.0, .trie_attention = trie};
      const Outcome a = RunWorkload(*model, w, off, "", always), b = RunWorkload(*model, w, on, "", always),
                    c = RunWorkload(*model, w, small, "", always),
                    d = RunWorkload(*model, w, on, "", {.threshold = 0.92, .trie_attention = trie});
      for (size_t i = 0; i < w.requests.size(); ++i) {
        EXPECT_EQ(a.outputs.at(i), plain.outputs.at(i)) << "cache off, request " << i << " trie " << trie;
        EXPECT_EQ(b.outputs.at(i), plain.outputs.at(i)) << "cache on, request " << i << " trie " << trie;
        EXPECT_EQ(c.outputs.at(i), plain.outputs.at(i)) << "small pool, request " << i << " trie " << trie;
        EXPECT_EQ(d.outputs.at(i), plain.outputs.at(i)) << "threshold, request " << i << " trie " << trie;
      }
      EXPECT_EQ(a.metrics.computed_tokens, plain.metrics.computed_tokens) << "dedup is counted, not hidden";
      dedup_cache_off += a.metrics.deduplicated_tokens;
      dedup_cache_on += b.metrics.deduplicated_tokens;
      preemptions += c.metrics.preemptions;
    }
    EXPECT_EQ(plain.metrics.deduplicated_tokens, 0);
  }
  EXPECT_GT(dedup_cache_off, 0);
  EXPECT_GT(dedup_cache_on, 0) << "rows shared within a step are not in the cache yet";
  EXPECT_GT(preemptions, 0);
  }
}

// The executor on two steps of three sequences: contexts X0, X1, X0, then the same tokens T at
// the same positions. Sequences 0 and 2 share everything; sequence 1 shares nothing in the
// second step (its context differs), which a dedup keyed on (token, position) alone would get
// wrong.
TEST_F(EngineTest, StepDedupKeepsSequencesWithDifferentContextsApart) {
  const auto& cfg = model_->config();
  core::Rng rng(9);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng.Below(cfg.vocab_size));
    return t;
  };
  const std::vector<std::vector<int32_t>> contexts = {random_tokens(20), random_tokens(20)};
  const std::vector<int32_t> tail = random_tokens(12);
  const int ctx_of[3] = {0, 1, 0};
  auto run = [&](runner::PrefillCompaction c, int64_t* dedup) {
    core::ThreadPool pool(2);
    models::KvStore kv(cfg, {16, 8});
    runner::ModelExecutor exec(*model_, pool, kv);
    exec.set_compaction(c);
    std::vector<std::vector<int32_t>> tables = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
    std::vector<float> all, logits;
    for (int step = 0; step < 2; ++step) {
      std::vector<engine::StepSequence> seqs(3);
      for (int i = 0; i < 3; ++i) {
        const auto& ctx = contexts[ctx_of[i]];
        seqs[i].tokens = step == 0 ? std::span<const int32_t>(ctx) : std::span<const int32_t>(tail);
        seqs[i].start_position = step == 0 ? 0 : static_cast<int32_t>(ctx.size());
        seqs[i].context = step == 0 ? std::span<const int32_t>() : std::span<const int32_t>(ctx);
        seqs[i].block_table = tables[i];
        seqs[i].logit_rows = 1;
      }
      exec.Execute({}, seqs, &logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    *dedup = exec.deduplicated_rows();
    return all;
  };
  int64_t dedup = 0;
  const std::vector<float> plain = run({.threshold = 0}, &dedup);
  EXPECT_EQ(dedup, 0);
  const size_t v = static_cast<size_t>(cfg.vocab_size);
  EXPECT_FALSE(std::equal(plain.begin() + 3 * v, plain.begin() + 4 * v, plain.begin() + 4 * v))
      << "different contexts give different logits for the same tail";
  for (const bool trie : {true, false}) {
    EXPECT_EQ(run({.threshold = 1.0, .trie_attention = trie}, &dedup), plain) << "trie " << trie;
    EXPECT_EQ(dedup, 20 + 12) << "sequence 2 repeats sequence 0 in both steps";
  }
}

// The step budget charges a chunk only for rows no other sequence of the step computes: a
// burst of six prompts with one 48-token system prompt, under a 16-token budget, prefills the
// system prompt together (one set of rows) instead of one request after another. Fewer steps,
// the same answers, with the radix cache off and on.
TEST_F(EngineTest, StepBudgetChargesOnlyRowsNotSharedInTheStep) {
  core::Rng rng(11);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng.Below(model_->config().vocab_size));
    return t;
  };
  const std::vector<int32_t> system = random_tokens(48);
  Workload w;
  for (int i = 0; i < 6; ++i) {
    engine::RequestParams p;
    p.prompt = system;
    const std::vector<int32_t> question = random_tokens(4 + i);
    p.prompt.insert(p.prompt.end(), question.begin(), question.end());
    p.max_tokens = 3;
    w.requests.push_back(p);
    w.submit_step.push_back(0);
  }
  for (const bool cache : {false, true}) {
    engine::EngineConfig cfg{.num_blocks = 256, .block_tokens = 8, .prefix_cache = cache};
    cfg.scheduler.step_token_budget = 16;
    const Outcome plain = RunWorkload(*model_, w, cfg);
    const Outcome shared = RunWorkload(*model_, w, cfg, "", {.threshold = 1.0});
    for (size_t i = 0; i < w.requests.size(); ++i)
      EXPECT_EQ(shared.outputs.at(i), plain.outputs.at(i)) << "request " << i << " cache " << cache;
    EXPECT_GE(shared.metrics.deduplicated_tokens, 5 * 48) << "cache " << cache;
    // With the cache, requests admitted after the first chunk attach to the prompt blocks the
    // first ones publish as they compute them, so the plain path takes no more steps either.
    if (cache) EXPECT_LE(shared.metrics.steps, plain.metrics.steps);
    else EXPECT_LT(shared.metrics.steps, plain.metrics.steps);
    // Charged rows stay within the budget, decodes aside (one each, charged even past it).
    EXPECT_LE(shared.metrics.computed_tokens - shared.metrics.deduplicated_tokens,
              16 * shared.metrics.steps + shared.metrics.generated_tokens)
        << "cache " << cache;
  }
}

// Hybrid (Mamba2 + attention) models: each running request owns a recurrent-state slot; with
// continuous batching, chunked prefill (chunks ending on the scan grid), a small pool that
// forces preemption (the state is recomputed from scratch) and fewer state slots than
// requests, every answer is bitwise the one of a run that serves requests one at a time.
// The same guarantees with the production storage types: a llama.cpp-quantised Q4_K_M file
// (tests/data/quant: q4_k and q6_k weights, int8 activations) and a bf16 KV cache. The radix
// cache, eviction with preemption, and intra-step dedup (trie and gather) are bitwise the plain
// run, because every kernel is batch-invariant for every weight and KV type.
TEST(QuantisedEngineTest, SharingNeverChangesAnAnswerWithQuantisedWeightsAndBf16Kv) {
  const char* src = std::getenv("RADIXLM_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto loaded = models::LoadModel(std::string(src) + "/tests/data/quant/tiny-q4_k_m.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  models::Transformer& model = **loaded;
  ASSERT_EQ(model.weights().TypeSummary(), "q4_k+q6_k");
  const core::DType kv = core::DType::kBF16;
  for (uint64_t seed : {7, 8}) {
    Workload w = MakeWorkload(seed, model.config().vocab_size);
    for (size_t i = 0; i < w.submit_step.size(); ++i) w.submit_step[i] = static_cast<int>(i / 8) * 6;
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    off.scheduler.step_token_budget = 128;
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    engine::EngineConfig small = on;
    small.num_blocks = 20;
    small.scheduler.max_running = 8;
    const Outcome plain = RunWorkload(model, w, off, "", {.threshold = 0}, kv);
    const Outcome cached = RunWorkload(model, w, on, "", {.threshold = 0}, kv);
    const Outcome evicting = RunWorkload(model, w, small, "", {.threshold = 0}, kv);
    const Outcome trie = RunWorkload(model, w, on, "", {.threshold = 1.0, .trie_attention = true}, kv);
    const Outcome gather = RunWorkload(model, w, off, "", {.threshold = 1.0, .trie_attention = false}, kv);
    engine::EngineConfig speculative = on;  // drafts from one-token matches: int8 rows verified in batches
    speculative.speculate = {.source = "tree", .draft_max = 6, .min_match = 1, .adapt = false};
    const Outcome spec = RunWorkload(model, w, speculative, "", {.threshold = 0}, kv);
    EXPECT_GT(Drafted(spec.metrics), 0);
    for (size_t i = 0; i < w.requests.size(); ++i) {
      EXPECT_EQ(spec.outputs.at(i), plain.outputs.at(i)) << "speculative, request " << i;
      EXPECT_EQ(cached.outputs.at(i), plain.outputs.at(i)) << "cache on, request " << i;
      EXPECT_EQ(evicting.outputs.at(i), plain.outputs.at(i)) << "small pool, request " << i;
      EXPECT_EQ(trie.outputs.at(i), plain.outputs.at(i)) << "trie dedup, request " << i;
      EXPECT_EQ(gather.outputs.at(i), plain.outputs.at(i)) << "gather dedup, request " << i;
    }
    EXPECT_GT(cached.metrics.cached_prompt_tokens, 0);
    EXPECT_GT(evicting.metrics.preemptions + evicting.metrics.evicted_tokens, 0);
    EXPECT_GT(trie.metrics.deduplicated_tokens, 0);
  }
}

TEST(HybridEngineTest, BatchingChunkingAndPreemptionNeverChangeAnAnswer) {
  for (const char* spec : {"random:lfm2-tiny", "random:lfm2moe-tiny", "random:nemotron-h-tiny",
                           "random:granite-h-tiny", "random:qwen35-tiny", "random:qwen35moe-tiny",
                           "random:nemotron-h-moe-tiny"}) {
    auto model = models::LoadModel(spec).value();
    const Workload w = MakeWorkload(5, model->config().vocab_size);
    engine::EngineConfig one{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    one.scheduler.max_running = 1;
    one.scheduler.step_token_budget = 4096;
    engine::EngineConfig batched = one;
    batched.scheduler.max_running = 6;
    batched.scheduler.step_token_budget = 20;
    engine::EngineConfig small = batched;
    small.num_blocks = 14;
    small.prefix_cache = true;  // ignored for hybrids: no KV-only hits
    const Outcome a = RunWorkload(*model, w, one), b = RunWorkload(*model, w, batched), c = RunWorkload(*model, w, small);
    for (size_t i = 0; i < w.requests.size(); ++i) {
      ASSERT_EQ(a.outputs.at(i).size(), static_cast<size_t>(w.requests[i].max_tokens));
      EXPECT_EQ(b.outputs.at(i), a.outputs.at(i)) << spec << " batched, request " << i;
      EXPECT_EQ(c.outputs.at(i), a.outputs.at(i)) << spec << " small pool, request " << i;
    }
    EXPECT_GT(c.metrics.preemptions, 0) << spec;
    EXPECT_EQ(c.metrics.cached_prompt_tokens, 0) << spec;
  }
}

// A stateful constraint: the k-th token must be congruent to k mod 5 (so a token accepted
// twice, or a state not carried across preemption, changes what is allowed next).
class StepModConstraint : public sampling::TokenConstraint {
 public:
  void Mask(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i)
      if (static_cast<int64_t>(i % 5) != static_cast<int64_t>(accepted.size() % 5)) logits[i] = -std::numeric_limits<float>::infinity();
  }
  void Accept(int32_t token) override { accepted.push_back(token); }
  std::vector<int32_t> accepted;
};

// Constrained requests decode the same tokens alone, batched and chunked, and preempted by a
// small pool (the constraint sees each token once, in order); every token obeys it.
TEST(ConstrainedEngineTest, BatchingChunkingAndPreemptionNeverChangeAConstrainedAnswer) {
  auto model = models::LoadModel("random:tiny").value();
  engine::EngineConfig one{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
  one.scheduler.max_running = 1;
  one.scheduler.step_token_budget = 4096;
  engine::EngineConfig batched = one;
  batched.scheduler.max_running = 6;
  batched.scheduler.step_token_budget = 20;
  engine::EngineConfig small = batched;
  small.num_blocks = 14;
  small.prefix_cache = true;
  std::vector<Outcome> outcomes;
  for (const engine::EngineConfig& cfg : {one, batched, small}) {
    Workload w = MakeWorkload(9, model->config().vocab_size);
    std::vector<std::shared_ptr<StepModConstraint>> constraints;
    for (auto& r : w.requests) {
      r.sampling.temperature = 1.0f;
      r.sampling.seed = constraints.size() + 1;
      constraints.push_back(std::make_shared<StepModConstraint>());
      r.constraint = constraints.back();
    }
    outcomes.push_back(RunWorkload(*model, w, cfg));
    for (size_t i = 0; i < w.requests.size(); ++i) {
      const auto& out = outcomes.back().outputs.at(static_cast<int>(i));
      EXPECT_EQ(constraints[i]->accepted, out) << "request " << i;
      for (size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k] % 5, static_cast<int32_t>(k % 5)) << "request " << i;
    }
  }
  for (size_t i = 0; i < outcomes[0].outputs.size(); ++i) {
    EXPECT_EQ(outcomes[1].outputs.at(static_cast<int>(i)), outcomes[0].outputs.at(static_cast<int>(i))) << "batched, request " << i;
    EXPECT_EQ(outcomes[2].outputs.at(static_cast<int>(i)), outcomes[0].outputs.at(static_cast<int>(i))) << "small pool, request " << i;
  }
  EXPECT_GT(outcomes[2].metrics.preemptions, 0);
}

// A stateful constraint over a small alphabet (tokens 5..10, never the previous token again):
// outputs repeat, so drafts are made; a draft token the constraint forbids is never kept, and
// the constraint sees exactly the kept tokens, in order.
class SmallAlphabetConstraint : public sampling::TokenConstraint {
 public:
  void Mask(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i)
      if (i < 5 || i > 10 || (!accepted.empty() && static_cast<int32_t>(i) == accepted.back()))
        logits[i] = -std::numeric_limits<float>::infinity();
  }
  void Accept(int32_t token) override { accepted.push_back(token); }
  std::vector<int32_t> accepted;
};

TEST(ConstrainedEngineTest, SpeculationNeverChangesAConstrainedAnswer) {
  auto model = models::LoadModel("random:tiny").value();
  std::vector<Outcome> outcomes;
  for (bool spec : {false, true}) {
    Workload w;
    std::vector<std::shared_ptr<SmallAlphabetConstraint>> constraints;
    for (int i = 0; i < 6; ++i) {
      engine::RequestParams p;
      p.prompt = {5, 6, 7, 5, 6, 7, 8, 9, static_cast<int32_t>(100 + i)};
      p.max_tokens = 30;
      if (i % 2) p.sampling = {.temperature = 0.8f, .seed = static_cast<uint64_t>(i)};
      constraints.push_back(std::make_shared<SmallAlphabetConstraint>());
      p.constraint = constraints.back();
      w.requests.push_back(p);
      w.submit_step.push_back(i);
    }
    engine::EngineConfig cfg{.num_blocks = 256, .block_tokens = 8};
    if (spec) cfg.speculate = {.source = "ngram", .draft_max = 4, .min_match = 1, .adapt = false};
    outcomes.push_back(RunWorkload(*model, w, cfg));
    for (size_t i = 0; i < w.requests.size(); ++i) EXPECT_EQ(constraints[i]->accepted, outcomes.back().outputs.at(static_cast<int>(i)));
  }
  for (size_t i = 0; i < outcomes[0].outputs.size(); ++i)
    EXPECT_EQ(outcomes[1].outputs.at(static_cast<int>(i)), outcomes[0].outputs.at(static_cast<int>(i))) << "request " << i;
  EXPECT_GT(Accepted(outcomes[1].metrics), 0);
  EXPECT_GT(Drafted(outcomes[1].metrics), Accepted(outcomes[1].metrics));
}

// With the hybrid cache, requests restore checkpoints (branch points found by speculative
// insertion, and finished requests' final states) and prefill only the rest. The scan is the
// exact recurrence, so a restore gives the bits of a computation from scratch: tokens and the
// sampled tokens' log-probabilities are compared bitwise.
// Hybrid models with a disk tier: the states their hybrid cache keeps (prompt ends, branch
// points, finished sequences) go to disk with the blocks before them; a new engine on the same
// folder (a restart: an empty pool and hybrid cache) resumes from them. Every answer is bitwise
// the plain run's.
TEST(HybridEngineTest, ADiskTierKeepsStatesAcrossARestartWithoutChangingAnAnswer) {
  for (const char* spec : {"random:lfm2-tiny", "random:nemotron-h-tiny", "random:qwen35-tiny"}) {
    auto model = models::LoadModel(spec).value();
    Workload w = MakeWorkload(7, model->config().vocab_size);
    for (auto& r : w.requests) r.cumulative_logprob = true;
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    off.scheduler.max_running = 6;
    off.scheduler.step_token_budget = 24;
    const Outcome plain = RunWorkload(*model, w, off);
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    on.checkpoint_slots = 16;
    on.prompt_end_checkpoints = true;
    on.prompt_end_min_gap = 0;
    char tmpl[] = "/tmp/radixlm_hybrid_tier_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    auto open = [&] {
      return tier::DiskTier::Open({.dir = dir, .capacity_bytes = 1 << 30, .fingerprint = spec, .block_tokens = 8,
                                   .block_bytes = models::KvStore::BytesPerBlock(model->config(), 8, core::DType::kF32),
                                   .state_bytes = models::SsmStateStore::BytesPerSlot(model->config())})
          .value();
    };
    auto disk = open();
    const Outcome first = RunWorkload(*model, w, on, "marconi", {.threshold = 0}, core::DType::kF32, true, false, disk.get());
    disk.reset();
    auto again = open();
    const Outcome restarted = RunWorkload(*model, w, on, "marconi", {.threshold = 0}, core::DType::kF32, true, false, again.get());
    for (size_t i = 0; i < w.requests.size(); ++i) {
      EXPECT_EQ(first.outputs.at(i), plain.outputs.at(i)) << spec << " request " << i;
      EXPECT_EQ(restarted.outputs.at(i), plain.outputs.at(i)) << spec << " restarted, request " << i;
      EXPECT_EQ(restarted.usage.at(i).cumulative_logprob, plain.usage.at(i).cumulative_logprob) << spec << " request " << i;
    }
    EXPECT_GT(restarted.metrics.tier_hit_tokens, 0) << spec << ": the restart resumed from states on disk";
    EXPECT_EQ(restarted.metrics.tier_failed_loads, 0) << spec;
    EXPECT_LT(restarted.metrics.computed_tokens, first.metrics.computed_tokens) << spec;
    std::filesystem::remove_all(dir);
  }
}

TEST(HybridEngineTest, HybridCachePoliciesNeverChangeAnAnswer) {
  for (const char* spec : {"random:lfm2-tiny", "random:lfm2moe-tiny", "random:nemotron-h-tiny",
                           "random:granite-h-tiny", "random:qwen35-tiny"}) {
    auto model = models::LoadModel(spec).value();
    for (uint64_t seed : {5, 6}) {
      Workload w = MakeWorkload(seed, model->config().vocab_size);
      for (auto& r : w.requests) r.cumulative_logprob = true;
      engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
      off.scheduler.max_running = 6;
      off.scheduler.step_token_budget = 24;
      const Outcome a = RunWorkload(*model, w, off);
      for (const char* policy : {"sglang+", "marconi"}) {
        for (int slots : {3, 64}) {  // tight (forces checkpoint eviction) and roomy
          engine::EngineConfig on = off;
          on.prefix_cache = true;
          on.checkpoint_slots = slots;
          const Outcome b = RunWorkload(*model, w, on, policy);
          for (size_t i = 0; i < w.requests.size(); ++i) {
            EXPECT_EQ(b.outputs.at(i), a.outputs.at(i)) << spec << " " << policy << " slots " << slots << " request " << i;
            EXPECT_EQ(b.usage.at(i).cumulative_logprob, a.usage.at(i).cumulative_logprob) << spec << " " << policy << " request " << i;
          }
          if (slots == 64) {  // with room, shared prefixes are reused
            EXPECT_GT(b.metrics.cached_prompt_tokens, 0) << spec << " " << policy;
            EXPECT_LT(b.metrics.computed_tokens, a.metrics.computed_tokens) << spec << " " << policy;
          }
        }
      }
    }
  }
}

// Issue 25.6: a seeded request's tokens do not depend on what else runs. Sampled requests
// (temperature, top-p, top-k, penalties) are served alone, then again among noise requests
// arriving at random steps, some sharing their prompts' prefixes (so the caches hold, split
// and restore what the targets use) and some not, with a pool small enough to evict and
// preempt, at several step budgets: every target's tokens are bitwise the same. On a hybrid
// this holds because the scan is the exact recurrence (kernels::Mamba2ScanRecurrent): a
// prompt split anywhere, a restored checkpoint and a recomputed preemption give the same bits.
TEST(DeterminismTest, SeededSamplingAloneEqualsUnderConcurrentLoad) {
  for (const char* spec : {"random:lfm2-tiny", "random:lfm2moe-tiny", "random:tiny", "random:gemma3-tiny",
                           "random:nemotron-h-tiny", "random:granite-h-tiny", "random:qwen35-tiny",
                           "random:qwen3moe-tiny", "random:granite-h-moe-tiny"}) {
    auto model = models::LoadModel(spec).value();
    const bool hybrid = model->config().n_ssm_layers() > 0;
    const int64_t V = model->config().vocab_size;
    core::Rng rng(31);
    std::vector<std::vector<int32_t>> bases(3);
    for (auto& b : bases)
      for (int k = 0; k < 48; ++k) b.push_back(static_cast<int32_t>(rng.Below(V)));
    Workload targets;
    for (int i = 0; i < 6; ++i) {
      engine::RequestParams p;
      const auto& base = bases[i % 3];
      p.prompt.assign(base.begin(), base.begin() + 20 + rng.Below(28));
      for (int k = 0; k < 1 + static_cast<int>(rng.Below(9)); ++k) p.prompt.push_back(static_cast<int32_t>(rng.Below(V)));
      p.max_tokens = 12;
      p.sampling = {.temperature = 0.9f, .top_k = i % 2 ? 0 : 40, .top_p = 0.95f, .seed = 1000u + i,
                    .presence_penalty = i == 3 ? 0.5f : 0.0f};
      p.cumulative_logprob = true;  // the sampled tokens' log-probabilities: any bit of the logits shows
      targets.requests.push_back(p);
      targets.submit_step.push_back(0);
    }
    for (int budget : {7, 16, 64, 4096}) {
      engine::EngineConfig cfg{.num_blocks = 40, .block_tokens = 8, .prefix_cache = true, .checkpoint_slots = 8};
      cfg.scheduler.max_running = 6;
      cfg.scheduler.step_token_budget = budget;
      const std::string policy = hybrid ? "marconi" : "";
      // Alone: each target by itself, in a fresh engine.
      std::vector<std::vector<int32_t>> alone;
      std::vector<double> alone_logprob;
      for (const auto& t : targets.requests) {
        Workload one;
        one.requests = {t};
        one.submit_step = {0};
        const Outcome o = RunWorkload(*model, one, cfg, policy);
        alone.push_back(o.outputs.at(0));
        alone_logprob.push_back(o.usage.at(0).cumulative_logprob);
      }
      // Under load: the targets among 18 noise requests (half extending the targets' bases).
      Workload mixed;
      core::Rng noise(budget);
      for (int i = 0; i < 18; ++i) {
        engine::RequestParams p;
        if (i % 2 == 0) {
          const auto& base = bases[noise.Below(3)];
          p.prompt.assign(base.begin(), base.begin() + 1 + noise.Below(base.size()));
        }
        for (int k = 0; k < 5 + static_cast<int>(noise.Below(40)); ++k) p.prompt.push_back(static_cast<int32_t>(noise.Below(V)));
        p.max_tokens = 1 + static_cast<int>(noise.Below(16));
        p.sampling = {.temperature = 1.0f, .seed = 7u + i};
        mixed.requests.push_back(p);
        mixed.submit_step.push_back(static_cast<int>(noise.Below(40)));
      }
      for (size_t i = 0; i < targets.requests.size(); ++i) {
        mixed.requests.push_back(targets.requests[i]);
        mixed.submit_step.push_back(static_cast<int>(noise.Below(40)));
      }
      const Outcome loaded = RunWorkload(*model, mixed, cfg, policy);
      for (size_t i = 0; i < targets.requests.size(); ++i) {
        const int k = static_cast<int>(18 + i);
        EXPECT_EQ(loaded.outputs.at(k), alone[i]) << spec << " budget " << budget << " target " << i;
        EXPECT_EQ(loaded.usage.at(k).cumulative_logprob, alone_logprob[i]) << spec << " budget " << budget << " target " << i;
      }
      if (budget == 7) {
        EXPECT_GT(loaded.metrics.cached_prompt_tokens, 0) << spec;  // the caches were in play
        EXPECT_GT(loaded.metrics.preemptions + loaded.metrics.evicted_tokens, 0) << spec;
      }
    }
  }
}

// Retries and regenerations: a hybrid prompt sent again verbatim. Without prompt-end states it
// reuses only what an earlier branch point left; with them it reuses all but its last token,
// and no answer changes.
void PromptEndCheckpointsCase(models::Transformer& model_ref) {
  models::Transformer* model = &model_ref;
  core::Rng rng(21);
  Workload w;
  for (int p = 0; p < 6; ++p) {
    engine::RequestParams params;
    for (int k = 0; k < 30 + static_cast<int>(rng.Below(40)); ++k)
      params.prompt.push_back(static_cast<int32_t>(rng.Below(model->config().vocab_size)));
    params.max_tokens = 4;
    for (int repeat = 0; repeat < 3; ++repeat) {
      params.sampling.seed = 100 * p + repeat;  // a regeneration samples anew
      w.requests.push_back(params);
      w.submit_step.push_back(40 * (3 * p + repeat));  // one at a time: each finds the last one cached
    }
  }
  engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
  off.scheduler.max_running = 4;
  off.scheduler.step_token_budget = 32;
  const Outcome plain = RunWorkload(*model, w, off);
  engine::EngineConfig on = off;
  on.prefix_cache = true;
  on.checkpoint_slots = 16;
  const Outcome without = RunWorkload(*model, w, on, "marconi");
  on.prompt_end_checkpoints = true;
  const Outcome with = RunWorkload(*model, w, on, "marconi");
  for (size_t i = 0; i < w.requests.size(); ++i) {
    EXPECT_EQ(with.outputs.at(i), plain.outputs.at(i)) << "request " << i;
    EXPECT_EQ(without.outputs.at(i), plain.outputs.at(i)) << "request " << i;
    const int64_t n = static_cast<int64_t>(w.requests[i].prompt.size());
    if (i % 3 > 0) {
      EXPECT_EQ(with.usage.at(i).cached_tokens, n - 1) << "repeat " << i;
      if (i % 3 == 1) {
        EXPECT_EQ(without.usage.at(i).cached_tokens, 0) << "first repeat " << i;
      }
    }
  }
  EXPECT_GT(with.metrics.cached_prompt_tokens, without.metrics.cached_prompt_tokens);
  EXPECT_LT(with.metrics.computed_tokens, without.metrics.computed_tokens);
}

TEST(HybridEngineTest, PromptEndCheckpointsMakeExactRepeatsHitWithoutChangingAnAnswer) {
  for (const char* spec : {"random:lfm2-tiny", "random:nemotron-h-tiny", "random:qwen35-tiny"}) {
    SCOPED_TRACE(spec);
    PromptEndCheckpointsCase(*models::LoadModel(spec).value());
  }
}

// A burst of requests with one long system prompt, all submitted at once, where a step's rows
// are not shared (hybrids; attention with intra-step dedup off): the first computes the prompt,
// the others wait for it to share the prefix ahead of its prompt's end (the KV, and on a hybrid
// the state captured there) and compute only their own suffixes. Answers and log-probabilities
// are bitwise those of the cache off.
TEST(HybridEngineTest, ABurstSharingASystemPromptComputesItOnce) {
  // "+rings": the sliding layers in window rings (the window captured where the prompt is shared).
  for (const std::string spec :
       {"random:tiny", "random:gemma3-tiny", "random:gemma3-tiny+rings", "random:nemotron-h-tiny", "random:qwen35-tiny",
        "random:lfm2-tiny"}) {
    SCOPED_TRACE(spec);
    const bool with_rings = spec.ends_with("+rings");
    auto model = models::LoadModel(with_rings ? spec.substr(0, spec.size() - 6) : spec).value();
    const models::WindowRings rings =
        with_rings ? models::WindowRings{models::SsmStateStore::RingTokens(model->config(), 8, 32), 8, core::DType::kF32}
                   : models::WindowRings{};
    core::Rng rng(31);
    const int64_t V = model->config().vocab_size;
    std::vector<int32_t> system(160);
    for (auto& x : system) x = static_cast<int32_t>(rng.Below(V));
    // First a request that shares the system prompt's first 3 tokens and finishes alone: the
    // burst's first request then splits its cached path there (a branch point to capture too).
    Workload w;
    engine::RequestParams first;
    first.prompt.assign(system.begin(), system.begin() + 3);
    for (int k = 0; k < 20; ++k) first.prompt.push_back(static_cast<int32_t>(rng.Below(V)));
    first.max_tokens = 2;
    first.cumulative_logprob = true;
    w.requests.push_back(first);
    w.submit_step.push_back(0);
    for (int i = 0; i < 6; ++i) {
      engine::RequestParams p;
      p.prompt = system;
      for (int k = 0; k < 8; ++k) p.prompt.push_back(static_cast<int32_t>(rng.Below(V)));
      p.max_tokens = 4;
      p.cumulative_logprob = true;
      w.requests.push_back(p);
      w.submit_step.push_back(10);
    }
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
    off.scheduler.max_running = 6;
    off.scheduler.step_token_budget = 32;
    const Outcome plain = RunWorkload(*model, w, off);
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    on.checkpoint_slots = 16;
    const bool hybrid = model->config().n_ssm_layers() > 0 || with_rings;
    const Outcome shared =
        RunWorkload(*model, w, on, hybrid ? "marconi" : "", {.threshold = 0}, core::DType::kF32, true, false, nullptr, rings);
    int followers = 0;
    for (size_t i = 0; i < w.requests.size(); ++i) {
      EXPECT_EQ(shared.outputs.at(i), plain.outputs.at(i)) << "request " << i;
      EXPECT_EQ(shared.usage.at(i).cumulative_logprob, plain.usage.at(i).cumulative_logprob) << "request " << i;
      followers += shared.usage.at(i).cached_tokens == 160;
    }
    EXPECT_EQ(followers, 5);
    EXPECT_GE(plain.metrics.computed_tokens - shared.metrics.computed_tokens, 5 * 160);
  }
}

// cache_salt: tenants never share cached prefixes nor a step's rows, on attention and hybrid
// models; within a tenant everything is shared as before; no answer changes.
TEST(SaltedEngineTest, TenantsShareNothingAndAnswersStayTheSame) {
  for (const char* spec : {"random:lfm2-tiny", "random:tiny", "random:gemma3-tiny", "random:nemotron-h-tiny",
                           "random:qwen35-tiny", "random:qwen3moe-tiny"}) {
    auto model = models::LoadModel(spec).value();
    const bool hybrid = model->config().n_ssm_layers() > 0;
    core::Rng rng(3);
    std::vector<int32_t> system(40);
    for (auto& t : system) t = static_cast<int32_t>(rng.Below(model->config().vocab_size));
    Workload w;
    for (int i = 0; i < 8; ++i) {
      engine::RequestParams p;
      p.prompt = system;
      for (int k = 0; k < 5; ++k) p.prompt.push_back(static_cast<int32_t>(rng.Below(model->config().vocab_size)));
      p.max_tokens = 3;
      p.cache_salt = i % 2 ? "tenant-b" : "tenant-a";
      w.requests.push_back(p);
      w.submit_step.push_back(i < 2 ? 0 : 30 * i);  // the first two together (one step), then one by one
    }
    engine::EngineConfig off{.num_blocks = 256, .block_tokens = 8, .prefix_cache = false};
    off.scheduler.max_running = 4;
    const Outcome plain = RunWorkload(*model, w, off);
    engine::EngineConfig on = off;
    on.prefix_cache = true;
    on.checkpoint_slots = 16;
    const Outcome salted = RunWorkload(*model, w, on, hybrid ? "sglang+" : "", {.threshold = hybrid ? 0.0 : 1.0});
    for (size_t i = 0; i < w.requests.size(); ++i) {
      EXPECT_EQ(salted.outputs.at(i), plain.outputs.at(i)) << spec << " request " << i;
      // Each tenant's first request finds nothing: not the other tenant's identical system prompt.
      if (i < 2) {
        EXPECT_EQ(salted.usage.at(i).cached_tokens, 0) << spec << " request " << i;
      }
      // A tenant's later requests reuse its system prompt (a hybrid from its third request on: the
      // second captures the state at the branch point).
      if (i >= (hybrid ? 4u : 2u)) {
        EXPECT_GE(salted.usage.at(i).cached_tokens, 40) << spec << " request " << i;
      }
    }
    // The two first requests ran in one step with identical rows: not computed once for both.
    EXPECT_EQ(salted.metrics.deduplicated_tokens, 0) << spec;
    // Without salts the same workload shares across the two.
    Workload shared = w;
    for (auto& r : shared.requests) r.cache_salt.clear();
    const Outcome one = RunWorkload(*model, shared, on, hybrid ? "sglang+" : "", {.threshold = hybrid ? 0.0 : 1.0});
    EXPECT_GT(one.metrics.cached_prompt_tokens + one.metrics.deduplicated_tokens,
              salted.metrics.cached_prompt_tokens + salted.metrics.deduplicated_tokens) << spec;
  }
}

TEST_F(EngineTest, MultiTurnConversationReportsGrowingCachedTokens) {
  core::ThreadPool pool(2);
  models::KvStore kv(model_->config(), {256, 16});
  runner::ModelExecutor exec(*model_, pool, kv);
  engine::Engine eng({.num_blocks = 256, .block_tokens = 16}, exec);
  std::vector<int32_t> history = {151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13};  // a system turn
  int64_t last_cached = -1;
  core::Rng rng(9);
  for (int turn = 0; turn < 5; ++turn) {
    for (int k = 0; k < 7; ++k) history.push_back(static_cast<int32_t>(rng.Below(150000)));  // user turn
    std::vector<int32_t> reply;
    engine::Usage usage;
    ASSERT_TRUE(eng.Submit({.prompt = history, .max_tokens = 5}, [&](const engine::TokenEvent& ev) {
                   if (ev.token >= 0) reply.push_back(ev.token);
                   if (ev.finish != engine::FinishReason::kNone) usage = ev.usage;
                 }).ok());
    eng.RunUntilIdle();
    EXPECT_GT(usage.cached_tokens, last_cached) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GE(usage.cached_tokens, static_cast<int64_t>(history.size()) - 7 - 1);
    }
    last_cached = usage.cached_tokens;
    history.insert(history.end(), reply.begin(), reply.end());
  }
  // Requests hold no blocks now; what remains belongs to the cache and is freed by eviction.
  const_cast<cache::RadixTree*>(eng.tree())->EvictUntilFree(256);
  EXPECT_EQ(eng.pool().blocks_in_use(), 0);
}

TEST_F(EngineTest, ARequestThatFitsThePoolIsNeverPinnedOutByItsOwnMatch) {
  // 10 blocks of 16. A leaves a 100-token prompt node (7 blocks) and its output node in the
  // tree. B shares A's first 20 tokens and needs all 10 blocks: its match would lock the whole
  // prompt node, so no eviction frees enough, and with nothing running it waited forever
  // (RunUntilIdle: "engine made no progress").
  core::ThreadPool pool(2);
  auto run = [&](int32_t blocks, bool cache, const std::vector<std::vector<int32_t>>& prompts, std::vector<int> max_tokens) {
    models::KvStore kv(model_->config(), {blocks, 16});
    runner::ModelExecutor exec(*model_, pool, kv);
    engine::Engine eng({.num_blocks = blocks, .block_tokens = 16, .prefix_cache = cache}, exec);
    std::vector<std::vector<int32_t>> outs(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(eng.Submit({.prompt = prompts[i], .max_tokens = max_tokens[i]}, [&, i](const engine::TokenEvent& ev) {
                     if (ev.token >= 0) outs[i].push_back(ev.token);
                   }).ok());
      eng.RunUntilIdle();
    }
    return outs;
  };
  core::Rng rng(12);
  std::vector<int32_t> a(100), b;
  for (auto& t : a) t = static_cast<int32_t>(rng.Below(150000));
  b.assign(a.begin(), a.begin() + 20);
  for (int k = 0; k < 130; ++k) b.push_back(static_cast<int32_t>(rng.Below(150000)));
  const auto cached = run(10, true, {a, b}, {60, 10});
  const auto plain = run(64, false, {b}, {10});
  ASSERT_EQ(cached[1].size(), 10u);
  EXPECT_EQ(cached[1], plain[0]);
}

TEST_F(EngineTest, RejectsBadRequestsClearlyAndCancelsCleanly) {
  core::ThreadPool pool(2);
  models::KvStore kv(model_->config(), {64, 16});
  runner::ModelExecutor exec(*model_, pool, kv);
  engine::Engine eng({.num_blocks = 64, .block_tokens = 16}, exec);
  EXPECT_EQ(eng.Submit({.prompt = {}}, nullptr).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(eng.Submit({.prompt = {999999999}}, nullptr).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(eng.Submit({.prompt = {1}, .max_tokens = 1 << 30}, nullptr).status().code(), core::StatusCode::kOutOfRange);
  EXPECT_EQ(eng.Submit({.prompt = std::vector<int32_t>(2000, 1), .max_tokens = 1}, nullptr).status().code(),
            core::StatusCode::kResourceExhausted);
  engine::FinishReason reason = engine::FinishReason::kNone;
  auto id = eng.Submit({.prompt = {1, 2, 3}, .max_tokens = 500}, [&](const engine::TokenEvent& ev) {
    if (ev.finish != engine::FinishReason::kNone) reason = ev.finish;
  });
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 5; ++i) eng.Step();
  eng.Cancel(*id);
  eng.RunUntilIdle();
  EXPECT_EQ(reason, engine::FinishReason::kCancelled);
  const_cast<cache::RadixTree*>(eng.tree())->EvictUntilFree(64);
  EXPECT_EQ(eng.pool().blocks_in_use(), 0);
}

// min_tokens: the stop ids cannot be sampled before it (their logits are -inf); after it they
// end the request as before. Checked with greedy decoding whose first token is made a stop id.
TEST_F(EngineTest, MinTokensHoldsTheStopIdsBack) {
  core::ThreadPool pool(2);
  models::KvStore kv(model_->config(), {64, 16});
  runner::ModelExecutor exec(*model_, pool, kv);
  engine::Engine eng({.num_blocks = 64, .block_tokens = 16, .prefix_cache = false}, exec);
  auto run = [&](engine::RequestParams p) {
    std::vector<int32_t> out;
    engine::FinishReason reason = engine::FinishReason::kNone;
    EXPECT_TRUE(eng.Submit(p, [&](const engine::TokenEvent& ev) {
                     if (ev.token >= 0) out.push_back(ev.token);
                     if (ev.finish != engine::FinishReason::kNone) reason = ev.finish;
                   }).ok());
    eng.RunUntilIdle();
    return std::make_pair(out, reason);
  };
  const auto [free_run, _] = run({.prompt = {1, 2, 3}, .max_tokens = 6});
  ASSERT_EQ(free_run.size(), 6u);
  const int32_t stop = free_run[0];
  const auto [stopped, why] = run({.prompt = {1, 2, 3}, .max_tokens = 6, .stop_ids = {stop}});
  EXPECT_EQ(stopped, std::vector<int32_t>{stop});
  EXPECT_EQ(why, engine::FinishReason::kStop);
  const auto [held, why_held] = run({.prompt = {1, 2, 3}, .max_tokens = 6, .stop_ids = {stop}, .min_tokens = 3});
  ASSERT_GE(held.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(held[i], stop) << i;
  if (why_held == engine::FinishReason::kStop) {
    EXPECT_EQ(held.back(), stop);
  }
  EXPECT_EQ(eng.Submit({.prompt = {1}, .max_tokens = 2, .min_tokens = 3}, nullptr).status().code(), core::StatusCode::kInvalidArgument);
}

// A stop string in the text ends a request early (EndEarly): it finishes as stopped and what it
// computed stays cached, so the next turn finds prompt + reply; a cancel discards the reply.
TEST_F(EngineTest, EndingEarlyKeepsTheReplyCachedWhileCancellingDiscardsIt) {
  for (bool end_early : {true, false}) {
    core::ThreadPool pool(2);
    models::KvStore kv(model_->config(), {64, 16});
    runner::ModelExecutor exec(*model_, pool, kv);
    engine::Engine eng({.num_blocks = 64, .block_tokens = 16}, exec);
    const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    std::vector<int32_t> reply;
    engine::FinishReason reason = engine::FinishReason::kNone;
    auto id = eng.Submit({.prompt = prompt, .max_tokens = 100}, [&](const engine::TokenEvent& ev) {
      if (ev.token >= 0) reply.push_back(ev.token);
      if (ev.finish != engine::FinishReason::kNone) reason = ev.finish;
    });
    ASSERT_TRUE(id.ok());
    for (int i = 0; i < 6; ++i) eng.Step();
    end_early ? eng.EndEarly(*id) : eng.Cancel(*id);
    eng.RunUntilIdle();
    EXPECT_EQ(reason, end_early ? engine::FinishReason::kStop : engine::FinishReason::kCancelled);
    ASSERT_GE(reply.size(), 3u);
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), reply.begin(), reply.end());
    next.push_back(20);
    engine::Usage usage;
    ASSERT_TRUE(eng.Submit({.prompt = next, .max_tokens = 1}, [&](const engine::TokenEvent& ev) {
                     if (ev.finish != engine::FinishReason::kNone) usage = ev.usage;
                   }).ok());
    eng.RunUntilIdle();
    // Cached: the prompt and the reply but its last token (never fed back); after a cancel only
    // the prompt (published when its prefill finished).
    EXPECT_EQ(usage.cached_tokens, static_cast<int64_t>(end_early ? prompt.size() + reply.size() - 1 : prompt.size()))
        << end_early;
    EXPECT_EQ(eng.memory().CheckInvariants(), "");
  }
}

// Cascade attention in the engine: requests sharing a prefix longer than the attention split
// decode in cascade groups (their shared blocks read once per step), with the same tokens as
// with cascade off, on an attention model and a hybrid, f32 and bf16 KV, and through
// preemption (a small pool) mid-group. Random sharing depth: a system prompt, then one of two
// few-shot blocks or none, then the request's own text; the few-shot levels are nested groups.
TEST(CascadeEngineTest, SharedPrefixGroupsDecodeTheSameTokensAsWithoutCascade) {
  // "+rings": the sliding layers in window rings (the full layers still decode in cascade).
  for (const std::string spec : {"random:lfm2-tiny", "random:tiny", "random:gemma3-tiny", "random:gemma3-tiny+rings",
                                 "random:nemotron-h-tiny", "random:qwen35-tiny", "random:qwen3moe-tiny",
                                 "random:qwen35moe-tiny"}) {
    const bool with_rings = spec.ends_with("+rings");
    auto model = models::LoadModel(with_rings ? spec.substr(0, spec.size() - 6) : spec).value();
    const bool hybrid = model->config().n_ssm_layers() > 0 || with_rings;
    core::Rng rng(5);
    auto random_tokens = [&](int n) {
      std::vector<int32_t> t(n);
      for (auto& x : t) x = static_cast<int32_t>(rng.Below(model->config().vocab_size));
      return t;
    };
    const std::vector<int32_t> system = random_tokens(1100 + static_cast<int>(rng.Below(200)));
    const std::vector<std::vector<int32_t>> few_shot = {random_tokens(1030), random_tokens(1100)};
    Workload w;
    for (int i = 0; i < 8; ++i) {
      engine::RequestParams p;
      p.prompt = system;
      // The first two carry each few-shot block (so both levels are cached), the rest pick one.
      const int depth = i < 2 ? i + 1 : static_cast<int>(rng.Below(3));
      if (depth > 0) p.prompt.insert(p.prompt.end(), few_shot[depth - 1].begin(), few_shot[depth - 1].end());
      const std::vector<int32_t> own = random_tokens(5 + static_cast<int>(rng.Below(30)));
      p.prompt.insert(p.prompt.end(), own.begin(), own.end());
      p.max_tokens = 40;
      w.requests.push_back(p);
      // The first ones cache the prefixes, the next find the branch points there (a hybrid's
      // checkpoints), the rest share them.
      w.submit_step.push_back(i < 2 ? 0 : i < 4 ? 60 : 120);
    }
    for (core::DType kv : {core::DType::kF32, core::DType::kBF16})
      for (int32_t blocks : {512, 225}) {
        engine::EngineConfig cfg{.num_blocks = blocks, .block_tokens = 16, .checkpoint_slots = 16};
        cfg.scheduler.max_running = 8;
        cfg.scheduler.step_token_budget = 512;
        const std::string policy = hybrid ? "sglang+" : "";
        const models::WindowRings rings =
            with_rings ? models::WindowRings{models::SsmStateStore::RingTokens(model->config(), 16, 512), 16, kv}
                       : models::WindowRings{};
        const Outcome on = RunWorkload(*model, w, cfg, policy, {.threshold = 0}, kv, true, false, nullptr, rings);
        const Outcome off = RunWorkload(*model, w, cfg, policy, {.threshold = 0}, kv, false, false, nullptr, rings);
        for (size_t i = 0; i < w.requests.size(); ++i)
          EXPECT_EQ(on.outputs.at(i), off.outputs.at(i)) << spec << " request " << i << " blocks " << blocks;
        EXPECT_GT(on.cascade_rows, 0) << spec << " blocks " << blocks;
        EXPECT_GT(on.cascade_nested_rows, 0) << spec << " blocks " << blocks;
        EXPECT_EQ(off.cascade_rows, 0);
        EXPECT_GT(on.metrics.cached_prompt_tokens, 0);
        if (blocks == 225) {
          EXPECT_GT(on.metrics.preemptions, 0) << spec;
        }
      }
  }
}

// An offline job run by planned groups (BatchLLM): a shuffled job of prefix groups (and a few
// requests alone) decodes exactly the tokens of the same job submitted all at once, every
// request answered once; each group's prefix is computed once (the engine's computed prompt
// tokens = the plan's, up to the partial block a member recomputes after a prefix that ends
// mid-block); with a pool that holds only a few groups it still completes, equal, without
// computing more than the all-at-once baseline.
TEST(BatchRunnerTest, PlannedGroupsDecodeWhatTheJobDoesAllAtOnceAndComputeEachPrefixOnce) {
  // "+rings": the sliding layers in window rings (a state, checkpointed at each group's prefix).
  for (const std::string spec : {"random:lfm2-tiny", "random:tiny", "random:gemma3-tiny", "random:gemma3-tiny+rings",
                                 "random:nemotron-h-tiny", "random:qwen35-tiny", "random:qwen35moe-tiny"}) {
    const bool with_rings = spec.ends_with("+rings");
    auto model = models::LoadModel(with_rings ? spec.substr(0, spec.size() - 6) : spec).value();
    const models::WindowRings rings =
        with_rings ? models::WindowRings{models::SsmStateStore::RingTokens(model->config(), 16, 256), 16, core::DType::kF32}
                   : models::WindowRings{};
    const bool hybrid = model->config().n_ssm_layers() > 0 || with_rings;
    core::Rng rng(11);
    auto random_tokens = [&](int n) {
      std::vector<int32_t> t(n);
      for (auto& x : t) x = static_cast<int32_t>(rng.Below(model->config().vocab_size));
      return t;
    };
    std::vector<engine::RequestParams> items;
    for (int g = 0; g < 6; ++g) {
      const std::vector<int32_t> prefix = random_tokens(150 + static_cast<int>(rng.Below(200)));
      for (int m = 0; m < 3 + static_cast<int>(rng.Below(5)); ++m) {
        engine::RequestParams p;
        p.prompt = prefix;
        const auto own = random_tokens(5 + static_cast<int>(rng.Below(40)));
        p.prompt.insert(p.prompt.end(), own.begin(), own.end());
        p.max_tokens = 1 + static_cast<int>(rng.Below(8));
        items.push_back(p);
      }
    }
    for (int i = 0; i < 4; ++i) items.push_back({.prompt = random_tokens(30), .max_tokens = 4});
    for (size_t i = items.size() - 1; i > 0; --i) std::swap(items[i], items[rng.Below(i + 1)]);
    std::vector<std::vector<int32_t>> prompts;
    for (const auto& it : items) prompts.push_back(it.prompt);
    const scheduler::BatchPlan plan = scheduler::PlanBatch(prompts);
    ASSERT_EQ(plan.stats.shared_groups, 6);
    std::vector<scheduler::PrefixGroup> alone;
    for (size_t i = 0; i < items.size(); ++i) alone.push_back({0, {static_cast<int64_t>(i)}});
    struct Run {
      std::vector<std::vector<int32_t>> out;
      std::vector<int> finals;
      engine::EngineMetrics metrics;
      engine::BatchRunStats stats;
    };
    auto run = [&](int32_t blocks, bool planned) {
      engine::EngineConfig cfg{.num_blocks = blocks, .block_tokens = 16, .checkpoint_slots = 16};
      cfg.scheduler.max_running = 64;
      cfg.scheduler.step_token_budget = 256;
      core::ThreadPool pool(2);
      models::KvStore kv(model->config(), {cfg.num_blocks, cfg.block_tokens, core::DType::kF32, with_rings});
      auto hy = runner::MakeHybridServing(model->config(), runner::ShapeOfModel(model->config(), core::DType::kF32, rings),
                                          cfg.scheduler.max_running, hybrid ? cfg.checkpoint_slots : 0, "sglang+", 0.0,
                                          false, false, rings)
                    .value();
      runner::ModelExecutor exec(*model, pool, kv, hy.states.get());
      engine::Engine eng(cfg, exec, hy.cache.get());
      Run r;
      r.out.resize(items.size());
      r.finals.resize(items.size());
      r.stats = engine::RunBatchGroups(eng, items, planned ? std::span<const scheduler::PrefixGroup>(plan.groups) : alone,
                                       {.submit_all = !planned}, [&](int64_t i, const engine::TokenEvent& ev) {
                                         if (ev.token >= 0) r.out[i].push_back(ev.token);
                                         if (ev.finish != engine::FinishReason::kNone) ++r.finals[i];
                                         EXPECT_NE(ev.finish, engine::FinishReason::kError) << ev.error;
                                         return true;
                                       });
      r.metrics = eng.Metrics();
      EXPECT_EQ(eng.memory().CheckInvariants(), "");
      return r;
    };
    const Run base = run(1024, false), planned = run(1024, true), tight = run(100, true);
    EXPECT_EQ(base.finals, std::vector<int>(items.size(), 1));
    EXPECT_EQ(planned.finals, std::vector<int>(items.size(), 1));
    EXPECT_EQ(tight.finals, std::vector<int>(items.size(), 1));
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(planned.out[i], base.out[i]) << spec << " item " << i;
      EXPECT_EQ(tight.out[i], base.out[i]) << spec << " item " << i;
    }
    EXPECT_EQ(planned.stats.warm_requests, 6);
    const int64_t computed = planned.metrics.prompt_tokens - planned.metrics.cached_prompt_tokens;
    int64_t slack = 0;  // a member recomputes the prefix's partial last block
    for (const auto& g : plan.groups)
      if (g.members.size() > 1) slack += static_cast<int64_t>(g.members.size()) * (g.prefix_tokens % 16);
    EXPECT_EQ(planned.metrics.preemptions, 0);
    EXPECT_GE(computed, plan.stats.planned_tokens) << spec;
    EXPECT_LE(computed, plan.stats.planned_tokens + slack) << spec;
    const int64_t tight_computed = tight.metrics.prompt_tokens - tight.metrics.cached_prompt_tokens;
    const int64_t base_computed = base.metrics.prompt_tokens - base.metrics.cached_prompt_tokens;
    EXPECT_LE(tight_computed, base_computed) << spec;
  }
}


void ExpectSameAnswers(const Workload& w, const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size()) << what;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const int k = static_cast<int>(i);
    EXPECT_EQ(b.outputs.at(k), a.outputs.at(k)) << what << ", request " << i;
    // Bitwise: each token's log-probability came from the same logits.
    EXPECT_EQ(b.usage.at(k).cumulative_logprob, a.usage.at(k).cumulative_logprob) << what << ", request " << i;
  }
}

// Drafts verified as extra rows of the step give the tokens (and log-probabilities) of plain
// decoding, bitwise, greedy and seeded sampling alike (each kept token is the draw plain
// decoding makes from the same logits with the same generator state), through batching,
// chunking, a small pool (eviction, preemption with a draft appended), step dedup and parallel
// sampling; drafts are accepted and rejected along the way.
TEST_F(EngineTest, SpeculationNeverChangesAnAnswer) {
  for (uint64_t seed : {1, 2, 3}) {
    const Workload w = MakeSpeculationWorkload(seed, model_->config().vocab_size);
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = true};
    off.scheduler.max_running = 6;
    off.scheduler.step_token_budget = 24;
    const Outcome plain = RunWorkload(*model_, w, off);
    for (const char* source : {"ngram", "tree"}) {
      engine::EngineConfig on = off;
      // Drafts as long as the source finds, from one-token matches: many are rejected.
      on.speculate = {.source = source, .draft_max = 6, .min_match = 1, .adapt = false};
      engine::EngineConfig small = on;
      small.num_blocks = 18;
      const Outcome a = RunWorkload(*model_, w, on), b = RunWorkload(*model_, w, small),
                    c = RunWorkload(*model_, w, on, "", {.threshold = 1.0}, core::DType::kF32, true, /*parallel=*/true);
      ExpectSameAnswers(w, plain, a, std::string(source));
      ExpectSameAnswers(w, plain, b, std::string(source) + " small pool");
      ExpectSameAnswers(w, plain, c, std::string(source) + " dedup, parallel sampling");
      EXPECT_GT(Accepted(a.metrics), 0) << source << " seed " << seed;
      EXPECT_GT(Drafted(a.metrics), Accepted(a.metrics)) << source << " seed " << seed << ": no draft was rejected";
      EXPECT_LE(a.metrics.steps, plain.metrics.steps) << source << " seed " << seed;
      EXPECT_GT(b.metrics.preemptions, 0) << source << " seed " << seed;
      if (std::string(source) == "tree") {
        EXPECT_GT(a.metrics.speculation[static_cast<size_t>(speculate::Origin::kRadix)].accepted, 0)
            << "repeated prompts draft the cached answer, seed " << seed;
      }
    }
  }
}

// Hybrid (Mamba2, Gated DeltaNet) and mixture-of-experts models: a rejected draft rolls the
// recurrent state back to the state captured before it, bitwise.
TEST(HybridEngineTest, SpeculationNeverChangesAnAnswer) {
  for (const char* spec : {"random:lfm2-tiny", "random:lfm2moe-tiny", "random:gemma3-tiny", "random:nemotron-h-tiny",
                           "random:qwen35-tiny", "random:qwen3moe-tiny", "random:qwen35moe-tiny"}) {
    auto model = models::LoadModel(spec).value();
    const Workload w = MakeSpeculationWorkload(4, model->config().vocab_size);
    engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = true, .checkpoint_slots = 16};
    off.scheduler.max_running = 6;
    off.scheduler.step_token_budget = 24;
    engine::EngineConfig on = off;
    on.speculate = {.source = "tree", .draft_max = 6, .min_match = 1, .adapt = false};
    const std::string policy = model->config().n_ssm_layers() > 0 ? "marconi" : "";
    const Outcome a = RunWorkload(*model, w, off, policy), b = RunWorkload(*model, w, on, policy);
    ExpectSameAnswers(w, a, b, spec);
    EXPECT_GT(Accepted(b.metrics), 0) << spec;
    EXPECT_GT(Drafted(b.metrics), Accepted(b.metrics)) << spec;
    EXPECT_LE(b.metrics.steps, a.metrics.steps) << spec;
  }
}

// Speculation on a sliding-window model: tree drafts, some rejected, roll back bitwise to the
// answers without drafts (with window rings, through the draft slot).
void ExpectSpeculationRollsBack(models::Transformer& model, const std::string& spec, bool with_rings) {
  const Workload w = MakeSpeculationWorkload(4, model.config().vocab_size);
  engine::EngineConfig plain_cfg{.num_blocks = 512, .block_tokens = 8, .prefix_cache = true};
  plain_cfg.scheduler.max_running = 6;
  plain_cfg.scheduler.step_token_budget = 24;
  plain_cfg.checkpoint_slots = 16;
  engine::EngineConfig spec_cfg = plain_cfg;
  spec_cfg.speculate = {.source = "tree", .draft_max = 6, .min_match = 1, .adapt = false};
  const models::WindowRings rings =
      with_rings ? models::WindowRings{models::SsmStateStore::RingTokens(model.config(), 8, 24 + 6), 8, core::DType::kF32}
                 : models::WindowRings{};
  const Outcome a = RunWorkload(model, w, plain_cfg),
                b = RunWorkload(model, w, spec_cfg, with_rings ? "marconi" : "", {.threshold = 0}, core::DType::kF32, true,
                                false, nullptr, rings);
  ExpectSameAnswers(w, a, b, spec);
  EXPECT_GT(Drafted(b.metrics), Accepted(b.metrics)) << "some drafts were rejected";
}

// Sliding-window attention: the Gemma 3 preset (a 32-token window), a gpt-oss file as released
// (tests/data/swa: MXFP4 experts, Q8_0 elsewhere, sinks, a 16-token window) and a Gemma 4 file
// (head shapes by layer kind, shared-KV layers, per-layer inputs; a 16-token window) and its
// mixture-of-experts layout (the dense MLP beside the experts). Prompts
// that branch inside and outside the window, the prefix cache with a pool small enough to evict
// and preempt, step dedup, chunked prefill, a disk tier under the pool and speculation with
// rollback: every answer is bitwise the plain run's.
TEST(SlidingWindowEngineTest, SharingNeverChangesAnAnswer) {
  const char* src = std::getenv("RADIXLM_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  for (const std::string& spec : {std::string("random:gemma3-tiny"), std::string(src) + "/tests/data/swa/gpt-oss-tiny-mxfp4.gguf",
                                  std::string(src) + "/tests/data/swa/gemma4-tiny.gguf",
                                  std::string(src) + "/tests/data/swa/gemma4-moe-tiny.gguf"}) {
    SCOPED_TRACE(spec);
    auto loaded = models::LoadModel(spec);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    models::Transformer& model = **loaded;
    ASSERT_GT(model.config().sliding_window(), 0);
    int64_t cached = 0, preemptions = 0, tier_hits = 0;
    for (uint64_t seed : {1, 2}) {
      const Workload w = MakeWorkload(seed, model.config().vocab_size);
      engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
      engine::EngineConfig on = off;
      on.prefix_cache = true;
      on.scheduler.step_token_budget = 20;  // chunked prefill
      engine::EngineConfig small = on;
      small.num_blocks = 14;
      small.scheduler.max_running = 8;
      char tmpl[] = "/tmp/radixlm_swa_tier_XXXXXX";
      const std::string dir = mkdtemp(tmpl);
      auto disk = tier::DiskTier::Open({.dir = dir, .capacity_bytes = 1 << 30, .fingerprint = "test:swa",
                                        .block_tokens = 8,
                                        .block_bytes = models::KvStore::BytesPerBlock(model.config(), 8, core::DType::kF32)})
                      .value();
      const Outcome plain = RunWorkload(model, w, off), cached_run = RunWorkload(model, w, on),
                    evicting = RunWorkload(model, w, small), dedup = RunWorkload(model, w, small, "", {.threshold = 1.0}),
                    tiered = RunWorkload(model, w, small, "", {.threshold = 0}, core::DType::kF32, true, false, disk.get());
      for (size_t i = 0; i < w.requests.size(); ++i) {
        ASSERT_EQ(plain.outputs.at(i).size(), static_cast<size_t>(w.requests[i].max_tokens));
        EXPECT_EQ(cached_run.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " request " << i;
        EXPECT_EQ(evicting.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " small pool, request " << i;
        EXPECT_EQ(dedup.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " dedup, request " << i;
        EXPECT_EQ(tiered.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " disk tier, request " << i;
      }
      cached += cached_run.metrics.cached_prompt_tokens;
      preemptions += evicting.metrics.preemptions;
      tier_hits += tiered.metrics.tier_hit_tokens;
      disk.reset();
      std::filesystem::remove_all(dir);
    }
    EXPECT_GT(cached, 0);
    EXPECT_GT(preemptions, 0);
    EXPECT_GT(tier_hits, 0);
    ExpectSpeculationRollsBack(model, spec, false);
  }
}

// Window rings (--swa-cache window): each sequence's sliding-layer KV in a ring of O(window),
// checkpointed like a hybrid's state; the pool holds the full-attention layers. Alone, with the
// hybrid cache (branches inside and outside the window), a pool small enough to evict and
// preempt, step dedup, a disk tier holding blocks and windows, and speculation with rollback:
// every answer is bitwise the plain paged run's.
TEST(SlidingWindowEngineTest, WindowRingsNeverChangeAnAnswer) {
  const char* src = std::getenv("RADIXLM_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  for (const std::string& spec : {std::string("random:gemma3-tiny"), std::string(src) + "/tests/data/swa/gpt-oss-tiny-mxfp4.gguf",
                                  std::string(src) + "/tests/data/swa/gemma4-tiny.gguf",
                                  std::string(src) + "/tests/data/swa/gemma4-moe-tiny.gguf"}) {
    SCOPED_TRACE(spec);
    auto loaded = models::LoadModel(spec);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    models::Transformer& model = **loaded;
    const models::ModelConfig& c = model.config();
    ASSERT_LT(models::KvStore::BytesPerBlock(c, 8, core::DType::kF32, true),
              models::KvStore::BytesPerBlock(c, 8, core::DType::kF32));
    int64_t cached = 0, preemptions = 0, tier_hits = 0, deduplicated = 0;
    for (uint64_t seed : {1, 2}) {
      const Workload w = MakeWorkload(seed, c.vocab_size);
      engine::EngineConfig off{.num_blocks = 512, .block_tokens = 8, .prefix_cache = false};
      engine::EngineConfig on = off;
      on.prefix_cache = true;
      on.scheduler.step_token_budget = 20;  // chunked prefill
      on.scheduler.max_running = 4;
      on.checkpoint_slots = 16;
      on.prompt_end_checkpoints = true;
      on.prompt_end_min_gap = 0;
      engine::EngineConfig small = on;
      small.num_blocks = 14;
      small.scheduler.max_running = 8;
      const models::WindowRings rings{models::SsmStateStore::RingTokens(c, 8, 20), 8, core::DType::kF32};
      const models::WindowRings wide{models::SsmStateStore::RingTokens(c, 8, 512), 8, core::DType::kF32};
      char tmpl[] = "/tmp/radixlm_ring_tier_XXXXXX";
      const std::string dir = mkdtemp(tmpl);
      auto disk = tier::DiskTier::Open({.dir = dir, .capacity_bytes = 1 << 30, .fingerprint = "test:rings",
                                        .block_tokens = 8,
                                        .block_bytes = models::KvStore::BytesPerBlock(c, 8, core::DType::kF32, true),
                                        .state_bytes = models::SsmStateStore::BytesPerSlot(c, rings)})
                      .value();
      const runner::PrefillCompaction none{.threshold = 0};
      const Outcome plain = RunWorkload(model, w, off),
                    alone = RunWorkload(model, w, off, "", none, core::DType::kF32, true, false, nullptr, wide),
                    cached_run = RunWorkload(model, w, on, "marconi", none, core::DType::kF32, true, false, nullptr, rings),
                    evicting = RunWorkload(model, w, small, "sglang+", none, core::DType::kF32, true, false, nullptr, rings),
                    dedup = RunWorkload(model, w, small, "marconi", {.threshold = 1.0}, core::DType::kF32, true, false,
                                        nullptr, rings),
                    tiered = RunWorkload(model, w, small, "marconi", none, core::DType::kF32, true, false, disk.get(), rings);
      for (size_t i = 0; i < w.requests.size(); ++i) {
        ASSERT_EQ(plain.outputs.at(i).size(), static_cast<size_t>(w.requests[i].max_tokens));
        EXPECT_EQ(alone.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " rings, request " << i;
        EXPECT_EQ(cached_run.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " cache, request " << i;
        EXPECT_EQ(evicting.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " small pool, request " << i;
        EXPECT_EQ(dedup.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " dedup, request " << i;
        EXPECT_EQ(tiered.outputs.at(i), plain.outputs.at(i)) << "seed " << seed << " disk tier, request " << i;
      }
      cached += cached_run.metrics.cached_prompt_tokens;
      preemptions += evicting.metrics.preemptions;
      deduplicated += dedup.metrics.deduplicated_tokens;
      tier_hits += tiered.metrics.tier_hit_tokens;
      disk.reset();
      std::filesystem::remove_all(dir);
    }
    EXPECT_GT(cached, 0);
    EXPECT_GT(preemptions, 0);
    EXPECT_GT(tier_hits, 0);
    EXPECT_GT(deduplicated, 0);
    ExpectSpeculationRollsBack(model, spec, true);
  }
}

// A recorded continuation (a replayed trace) is checked against drafts like sampled tokens:
// the same tokens come out, in fewer steps when the text repeats.
TEST_F(EngineTest, SpeculationVerifiesDraftsAgainstARecordedContinuation) {
  std::vector<int32_t> pattern = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  engine::RequestParams p;
  for (int k = 0; k < 3; ++k) p.prompt.insert(p.prompt.end(), pattern.begin(), pattern.end());
  std::vector<int32_t> given;
  for (int k = 0; k < 4; ++k) given.insert(given.end(), pattern.begin(), pattern.end());
  given[25] = 99;  // a change inside: a draft is rejected there
  p.continuation = given;
  Workload w{{p}, {0}};
  engine::EngineConfig off{.num_blocks = 64, .block_tokens = 8};
  engine::EngineConfig on = off;
  on.speculate = {.source = "ngram", .draft_max = 8, .adapt = false};
  const Outcome a = RunWorkload(*model_, w, off), b = RunWorkload(*model_, w, on);
  EXPECT_EQ(a.outputs.at(0), given);
  EXPECT_EQ(b.outputs.at(0), given);
  EXPECT_LT(b.metrics.steps, a.metrics.steps / 3);
  EXPECT_GT(Drafted(b.metrics), Accepted(b.metrics));
}

// Seeded sampling with drafts: the distribution of the tokens drawn is the model's. Samples
// with speculation (seeds 0..N) and without (other seeds) are two independent samples of one
// distribution: a chi-square test of homogeneity over the first tokens of a position where
// drafts are verified must not reject it (p > 0.001).
TEST_F(EngineTest, SpeculativeSamplingKeepsTheModelsDistribution) {
  engine::RequestParams base;
  base.prompt = {5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};
  base.max_tokens = 4;
  base.sampling.temperature = 1.5f;
  base.sampling.top_k = 8;
  const int n = 300;
  auto run = [&](bool spec, uint64_t seed0) {
    Workload w;
    for (int i = 0; i < n; ++i) {
      engine::RequestParams p = base;
      p.sampling.seed = seed0 + static_cast<uint64_t>(i);
      w.requests.push_back(p);
      w.submit_step.push_back(0);
    }
    engine::EngineConfig cfg{.num_blocks = 2048, .block_tokens = 8};
    cfg.scheduler.max_running = 16;
    if (spec) cfg.speculate = {.source = "ngram", .draft_max = 3, .max_step_rows = 64, .adapt = false};
    return RunWorkload(*model_, w, cfg);
  };
  const Outcome on = run(true, 0), off = run(false, 1000000);
  EXPECT_GT(Drafted(on.metrics), 0);
  for (int pos = 1; pos < 4; ++pos) {
    std::map<int32_t, std::pair<double, double>> counts;
    for (int i = 0; i < n; ++i) {
      counts[on.outputs.at(i).at(pos)].first += 1;
      counts[off.outputs.at(i).at(pos)].second += 1;
    }
    double chi2 = 0;
    for (const auto& [tok, c] : counts) {
      const double total = c.first + c.second, e = total / 2;
      chi2 += (c.first - e) * (c.first - e) / e + (c.second - e) * (c.second - e) / e;
    }
    const double df = static_cast<double>(counts.size()) - 1;
    // Wilson-Hilferty: chi2/df is about normal with mean 1 - 2/(9 df), sd sqrt(2/(9 df)); z 3.1 ~ p 0.001.
    const double z = (std::cbrt(chi2 / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
    EXPECT_LT(z, 3.1) << "position " << pos << ": chi2 " << chi2 << " over " << df << " degrees of freedom";
  }
}

TEST(AdmissionOrderTest, LongestCachedPrefixFirstButStarvedRequestsLeadOldestFirst) {
  scheduler::SchedulerConfig cfg;
  cfg.starvation_steps = 10;
  const std::vector<scheduler::WaitingRequest> w = {
      {.arrival = 0, .cached_tokens = 5, .waited_steps = 3},
      {.arrival = 1, .cached_tokens = 50, .waited_steps = 3},
      {.arrival = 2, .cached_tokens = 0, .waited_steps = 12},
      {.arrival = 3, .cached_tokens = 50, .waited_steps = 1},
      {.arrival = 4, .cached_tokens = 0, .waited_steps = 11}};
  EXPECT_EQ(scheduler::AdmissionOrder(w, cfg), (std::vector<size_t>{2, 4, 1, 3, 0}));
}

}  // namespace
}  // namespace radixlm
