#include "runner/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace radixlm::runner {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Holds a sequence's blocks and returns them to the pool on scope exit.
class BlockLease {
 public:
  explicit BlockLease(cache::BlockPool& pool) : pool_(pool) {}
  ~BlockLease() { for (int32_t b : blocks_) pool_.Release(b); }
  // Grows the lease to cover `tokens` positions.
  bool Cover(int64_t tokens) {
    const int64_t need = (tokens + pool_.block_tokens() - 1) / pool_.block_tokens() - static_cast<int64_t>(blocks_.size());
    if (need <= 0) return true;
    auto got = pool_.Allocate(static_cast<int32_t>(need));
    if (!got) return false;
    blocks_.insert(blocks_.end(), got->begin(), got->end());
    return true;
  }
  const std::vector<int32_t>& blocks() const { return blocks_; }

 private:
  cache::BlockPool& pool_;
  std::vector<int32_t> blocks_;
};

}  // namespace

void Generator::Run(models::ForwardBatch& b, float* logits) {
  if (states_) b.ssm.assign(1, models::SsmSeq{0, {}});
  model_.Forward(pool_, b, kv_, logits, states_.get());
}

core::StatusOr<GenerateResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                                   const std::function<bool(int32_t)>& on_token) {
  const auto& cfg = model_.config();
  if (prompt.empty()) return core::InvalidArgument("prompt is empty");
  for (int32_t id : prompt)
    if (id < 0 || id >= cfg.vocab_size)
      return core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                   std::to_string(cfg.vocab_size - 1) + ")");
  const int64_t total = static_cast<int64_t>(prompt.size()) + opt.max_tokens;
  if (total > cfg.max_context)
    return core::OutOfRange("prompt of " + std::to_string(prompt.size()) + " tokens plus " + std::to_string(opt.max_tokens) +
                            " new tokens exceeds the context of " + std::to_string(cfg.max_context));
  BlockLease lease(blocks_);
  if (!lease.Cover(total))
    return core::ResourceExhausted("KV pool too small: " + std::to_string(total) + " tokens need " +
                                   std::to_string((total + blocks_.block_tokens() - 1) / blocks_.block_tokens()) +
                                   " blocks, " + std::to_string(blocks_.num_free()) + " free");
  if (states_) states_->Reset(0);
  GenerateResult result;
  sampling::Sampler sampler(opt.sampling);
  std::vector<float> logits(cfg.vocab_size);
  std::vector<int32_t> positions;
  double t0 = Now();
  // Prefill in chunks; only the last chunk's last row needs logits.
  const int64_t n = prompt.size();
  for (int64_t start = 0; start < n; start += opt.prefill_chunk) {
    const int64_t len = std::min<int64_t>(opt.prefill_chunk, n - start);
    positions.resize(len);
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(start));
    const int32_t last = static_cast<int32_t>(len - 1);
    models::ForwardBatch b;
    b.token_ids = std::span<const int32_t>(prompt.data() + start, len);
    b.positions = positions;
    b.seqs.push_back({0, len, lease.blocks()});
    if (start + len == n) b.logit_rows = std::span<const int32_t>(&last, 1);
    Run(b, logits.data());
  }
  result.prefill_seconds = Now() - t0;
  t0 = Now();
  int32_t next = sampler.Sample(logits);
  int32_t pos = static_cast<int32_t>(n);
  while (true) {
    result.tokens.push_back(next);
    const bool stop = std::find(opt.stop_ids.begin(), opt.stop_ids.end(), next) != opt.stop_ids.end();
    if (on_token && !on_token(next)) break;
    if (stop) { result.stopped = true; break; }
    if (static_cast<int>(result.tokens.size()) >= opt.max_tokens) break;
    const int32_t row = 0;
    models::ForwardBatch b;
    b.token_ids = std::span<const int32_t>(&next, 1);
    b.positions = std::span<const int32_t>(&pos, 1);
    b.seqs.push_back({0, 1, lease.blocks()});
    b.logit_rows = std::span<const int32_t>(&row, 1);
    Run(b, logits.data());
    ++result.decode_steps;
    ++pos;
    next = sampler.Sample(logits);
  }
  result.decode_seconds = Now() - t0;
  return result;
}

core::StatusOr<std::vector<float>> Generator::AllLogits(const std::vector<int32_t>& ids) {
  const auto& cfg = model_.config();
  const int64_t n = ids.size();
  if (n == 0) return core::InvalidArgument("no token ids");
  for (int32_t id : ids)
    if (id < 0 || id >= cfg.vocab_size) return core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary");
  if (n > cfg.max_context) return core::OutOfRange("more ids than the model's context");
  BlockLease lease(blocks_);
  if (!lease.Cover(n)) return core::ResourceExhausted("KV pool too small for " + std::to_string(n) + " tokens");
  std::vector<int32_t> positions(n), rows(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(n * cfg.vocab_size);
  if (states_) states_->Reset(0);
  models::ForwardBatch b;
  b.token_ids = ids;
  b.positions = positions;
  b.seqs.push_back({0, n, lease.blocks()});
  b.logit_rows = rows;
  Run(b, logits.data());
  return logits;
}

core::StatusOr<PerplexityResult> Perplexity(models::Transformer& model, core::ThreadPool& pool, const std::vector<int32_t>& ids,
                                            int64_t ctx, core::DType kv_dtype, const std::function<void(int64_t)>& on_window) {
  if (ids.size() < 2) return core::InvalidArgument("fewer than two tokens");
  if (ctx < 2 || ctx > model.config().max_context)
    return core::InvalidArgument("--ctx " + std::to_string(ctx) + " exceeds the model's context of " +
                                 std::to_string(model.config().max_context));
  SequenceKv kv(model.config(), ctx, kv_dtype);
  Generator gen(model, pool, kv.store, kv.pool);
  const int64_t vocab = model.config().vocab_size;
  PerplexityResult r;
  r.windows = (static_cast<int64_t>(ids.size()) - 1 + ctx - 1) / ctx;
  double nll = 0;
  for (int64_t w = 0; w < r.windows; ++w) {
    const auto begin = ids.begin() + w * ctx;
    const std::vector<int32_t> window(begin, begin + std::min<int64_t>(ctx, ids.end() - begin));
    if (window.size() < 2) break;
    auto logits = gen.AllLogits(window);
    RADIXLM_RETURN_IF_ERROR(logits.status());
    for (size_t i = 0; i + 1 < window.size(); ++i) {
      const float* row = logits->data() + i * vocab;
      const float max = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      nll += std::log(sum) + max - row[window[i + 1]];
      ++r.tokens_scored;
    }
    if (on_window) on_window(w + 1);
  }
  r.perplexity = std::exp(nll / static_cast<double>(r.tokens_scored));
  return r;
}

}  // namespace radixlm::runner
