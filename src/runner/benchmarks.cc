#include "runner/benchmarks.h"

#include "runner/serving_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"
#include "engine/engine.h"
#include "kernels/attention.h"
#include "models/kv_store.h"
#include "runner/model_executor.h"
#include "runner/scoring.h"

namespace radixlm::runner {
namespace {

using nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

// gather mode keeps every original row's K/V, trie mode shares the prefix's full blocks as the
// radix cache would, so its forwards hold more sequences. Each forward also computes its last
// rows' logits. Reports tokens/s (original tokens over the runner's forward time: plan, tables
// and forward), the observed compact/original ratio and the ideal ratio r = B(P+S) / (P+BS).
core::StatusOr<json> BenchCompaction(models::Transformer& model, core::ThreadPool& pool, int batch, int prefix, int suffix,
                                     const std::string& mode, int max_batch_tokens, int repeats, core::DType kv_dtype) {
  const auto& c = model.config();
  if (mode != "off" && mode != "gather" && mode != "trie")
    return (core::InvalidArgument("--compaction is off, gather or trie"));
  const int len = prefix + suffix;
  if (len <= 0 || len > max_batch_tokens) return (core::InvalidArgument("a sequence must fit --max-batch-tokens"));
  core::Rng rng(5);
  std::vector<int32_t> shared(prefix);
  for (auto& t : shared) t = static_cast<int32_t>(rng.Below(c.vocab_size));
  std::vector<std::vector<int32_t>> seqs(batch);
  for (auto& s : seqs) {
    s = shared;
    for (int i = 0; i < suffix; ++i) s.push_back(static_cast<int32_t>(rng.Below(c.vocab_size)));
  }
  const int64_t bt = 16;
  ScoringRunner scorer(model, pool,
                               {.max_batch_tokens = max_batch_tokens,
                                .kv_rows = ((max_batch_tokens + bt - 1) / bt + batch) * bt,
                                .threshold = mode == "off" ? 0.0 : 1.0,  // 1 = compact every forward
                                .trie_attention = mode == "trie",
                                .block_tokens = static_cast<int32_t>(bt),
                                .kv_dtype = kv_dtype});
  std::vector<double> rates;
  ScoringStats run;
  for (int r = 0; r < repeats; ++r) {
    const ScoringStats before = scorer.stats();
    RADIXLM_RETURN_IF_ERROR(scorer.YesNoLogits(seqs, 0, 1).status());
    const ScoringStats& after = scorer.stats();
    run = {.forwards = after.forwards - before.forwards,
           .original_rows = after.original_rows - before.original_rows,
           .computed_rows = after.computed_rows - before.computed_rows,
           .seconds = after.seconds - before.seconds};
    rates.push_back(run.original_rows / run.seconds);
  }
  const double ideal = double(batch) * len / (prefix + double(batch) * suffix);
  return json{{"model", c.name}, {"batch", batch}, {"shared_prefix", prefix}, {"suffix", suffix},
                  {"compaction", mode}, {"forwards", run.forwards},
                  {"max_batch_tokens", max_batch_tokens},
                  {"tokens_per_s", Median(rates)}, {"observed_ratio", double(run.computed_rows) / run.original_rows},
                  {"ideal_speedup_r", ideal}, {"threads", pool.size()}, {"repeats", repeats}};
}

namespace {

// KV bytes the attention layers read in one decode step at the middle of a shared-prefix decode:
// {plain (every request reads its whole context), cascade (the shared whole split chunks once per
// tile of requests)}.
std::pair<double, double> SharedDecodeKvBytes(const models::ModelConfig& c, core::DType kv_dtype, int batch, int prefix,
                                              int suffix, int gen_tokens, int32_t bt) {
  const double token_bytes = static_cast<double>(c.KvValuesPerToken(true, true)) * core::DTypeSize(kv_dtype);
  const int64_t split = kernels::AttentionSplitTokens(bt);
  const int64_t shared_tokens = (prefix / bt * bt) / split * split;  // whole split chunks of whole blocks
  const int64_t mid = prefix + suffix + gen_tokens / 2;
  const int tile = kernels::CascadeTileRows(c.n_heads / c.n_kv_heads);
  const double plain_bytes = token_bytes * batch * mid;
  const double cascade_bytes =
      batch >= 2 ? token_bytes * (static_cast<double>(shared_tokens) * ((batch + tile - 1) / tile) +
                                  static_cast<double>(batch) * (mid - shared_tokens))
                 : plain_bytes;
  return {plain_bytes, cascade_bytes};
}

struct DecodeTiming {
  int64_t steps = 0;
  double seconds = 0;
  models::ForwardProfile profile;  // where the timed steps' forwards went
  int64_t cascade_rows = 0;
};

// Submits `batch` requests on eng (whose prefix cache holds the shared prefix), steps through
// their prefill and first tokens, then times the steps where all of them decode.
core::StatusOr<DecodeTiming> TimeDecodeSteps(engine::Engine& eng, const ModelExecutor& exec, models::Transformer& model,
                                             int batch, const std::function<engine::RequestParams()>& make) {
  int first_tokens = 0, finished = 0;
  for (int i = 0; i < batch; ++i) {
    const auto id = eng.Submit(make(), [&](const engine::TokenEvent& ev) {
      if (ev.finish != engine::FinishReason::kNone) ++finished;
      else if (ev.token >= 0) ++first_tokens;
    });
    RADIXLM_RETURN_IF_ERROR(id.status());
  }
  while (first_tokens < batch) eng.Step();
  DecodeTiming t;
  const int64_t cascade_rows_before = exec.cascade_rows();
  model.set_profile(&t.profile);
  const auto t0 = std::chrono::steady_clock::now();
  while (finished < batch) {
    eng.Step();
    ++t.steps;
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  model.set_profile(nullptr);
  t.cascade_rows = exec.cascade_rows() - cascade_rows_before;
  return t;
}

}  // namespace

// Decode of `batch` concurrent requests that share a `prefix`-token prompt prefix (+ `suffix`
// own tokens each), through the serving engine with the radix cache (the prefix is cached by a
// first request, so the batch's block tables share its blocks), cascade attention on or off.
// Reports decode tokens/s over the steps where every request decodes, and the KV bytes the
// attention layers read per decode step (at the middle of the decode) in each mode.
core::StatusOr<json> BenchCascadeDecode(models::Transformer& model, core::ThreadPool& pool, int batch, int prefix, int suffix,
                                        int gen_tokens, bool cascade, core::DType kv_dtype) {
  const auto& c = model.config();
  if (batch < 1 || prefix < 0 || suffix < 1 || gen_tokens < 2)
    return (core::InvalidArgument("--decode-batch >= 1, --suffix >= 1 and --gen-tokens >= 2"));
  const int32_t bt = 16;
  // The prefix once (shared), then each request's own tokens and a partial block of slack.
  const int64_t per_request = suffix + gen_tokens + 2 * bt;
  ServingOptions so;
  so.block_tokens = bt;
  so.kv_tokens = ((prefix + static_cast<int64_t>(batch + 1) * per_request) / bt + 8) * bt;
  so.max_running = batch + 1;
  so.step_tokens = 2048;
  so.checkpoint_slots = 0;
  const engine::EngineConfig ec = MakeEngineConfig(so);
  if (prefix + suffix + gen_tokens > c.max_context) return (core::InvalidArgument("longer than the model's context"));
  models::KvStore kv(c, {ec.num_blocks, ec.block_tokens, kv_dtype});
  ModelExecutor exec(model, pool, kv);
  exec.set_compaction({.threshold = 0});
  exec.set_cascade(cascade);
  engine::Engine eng(ec, exec);
  core::Rng rng(7);
  std::vector<int32_t> shared(prefix);
  for (auto& t : shared) t = static_cast<int32_t>(rng.Below(c.vocab_size));
  int max_tokens = 1;
  auto make = [&]() {
    engine::RequestParams p;
    p.prompt = shared;
    for (int i = 0; i < suffix; ++i) p.prompt.push_back(static_cast<int32_t>(rng.Below(c.vocab_size)));
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0;
    return p;
  };
  RADIXLM_RETURN_IF_ERROR(eng.Submit(make(), nullptr).status());  // caches the shared prefix
  eng.RunUntilIdle();
  max_tokens = gen_tokens;
  auto t = TimeDecodeSteps(eng, exec, model, batch, make);
  RADIXLM_RETURN_IF_ERROR(t.status());
  const int64_t decode_tokens = static_cast<int64_t>(batch) * (gen_tokens - 1);
  const auto [plain_bytes, cascade_bytes] = SharedDecodeKvBytes(c, kv_dtype, batch, prefix, suffix, gen_tokens, bt);
  return json{{"model", c.name},
            {"threads", pool.size()},
            {"isa", core::IsaName(core::ActiveIsa())},
            {"kv_dtype", std::string(core::DTypeName(kv_dtype))},
            {"decode_batch", batch},
            {"shared_prefix", prefix},
            {"suffix", suffix},
            {"gen_tokens", gen_tokens},
            {"cascade", cascade ? "on" : "off"},
            {"decode_steps", t->steps},
            {"decode_tokens", decode_tokens},
            {"decode_seconds", t->seconds},
            {"decode_tokens_per_s", decode_tokens / t->seconds},
            // Seconds of the timed steps in forwards, their GEMMs (lm_head included) and their
            // attention calls (the rest of a forward: norms, RoPE, K/V writes, copies).
            {"decode_forward_s", t->profile.total_s},
            {"decode_gemm_s", t->profile.gemm_s},
            {"decode_attention_s", t->profile.attention_s},
            {"cascade_rows", t->cascade_rows},
            {"kv_bytes_read_per_step", cascade ? cascade_bytes : plain_bytes},
            {"kv_bytes_ratio_plain_over_cascade", plain_bytes / cascade_bytes}};
}

}  // namespace radixlm::runner
