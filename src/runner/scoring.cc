#include "runner/scoring.h"

#include "sampling/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "models/prefix_compaction.h"

namespace radixlm::runner {
namespace {

int64_t Blocks(int64_t tokens, int64_t bt) { return (tokens + bt - 1) / bt; }

size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t k = 0;
  while (k < n && a[k] == b[k]) ++k;
  return k;
}

// Output rows read out once per computed row: `rows` (original rows) become the rows to ask the
// model for, one per distinct computed row, and for each of `rows` the index of its output.
// Without this a forward of many identical inputs (free in trie mode) would read out one
// logits row per input, unbounded; with it output memory is bounded by computed rows, as on
// the plain path. Values are unchanged: the model reads every row through `scatter` anyway.
struct OutputRows {
  std::vector<int32_t> request;  // original rows, first occurrence of each computed row
  std::vector<int32_t> index;    // [rows.size()] -> position in `request`
};

OutputRows ReadOutOnce(std::span<const int32_t> rows, const models::CompactionPlan* plan, size_t computed_rows) {
  OutputRows o;
  std::vector<int32_t> slot(computed_rows, -1);  // computed row -> position in `request`
  o.index.reserve(rows.size());
  for (int32_t r : rows) {
    int32_t& at = slot[plan ? plan->scatter[r] : r];
    if (at < 0) {
      at = static_cast<int32_t>(o.request.size());
      o.request.push_back(r);
    }
    o.index.push_back(at);
  }
  return o;
}

}  // namespace

ScoringRunner::ScoringRunner(models::Transformer& model, core::ThreadPool& pool, ScoringConfig config)
    : model_(model),
      pool_(pool),
      config_(config),
      kv_(model.config(),
          {static_cast<int>(Blocks(config.kv_rows > 0 ? config.kv_rows : 2 * config.max_batch_tokens, config.block_tokens)),
           config.block_tokens, config.kv_dtype}) {
  RADIXLM_CHECK(config.max_batch_tokens > 0 && config.block_tokens > 0);
  RADIXLM_CHECK(config.kv_rows == 0 || config.kv_rows >= config.max_batch_tokens);
}

core::Status ScoringRunner::Validate(std::span<const std::vector<int32_t>> seqs) const {
  const auto& c = model_.config();
  if (c.n_ssm_layers() > 0)
    return core::Unimplemented("embedding and reranking need an attention-only model (this one has Mamba2 layers)");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(seqs[i].size());
    if (n == 0) return core::InvalidArgument("input " + std::to_string(i) + " is empty");
    if (n > config_.max_batch_tokens || n > c.max_context)
      return core::OutOfRange("input " + std::to_string(i) + " has " + std::to_string(n) + " tokens; the limit is " +
                              std::to_string(std::min<int64_t>(config_.max_batch_tokens, c.max_context)));
    for (int32_t t : seqs[i])
      if (t < 0 || t >= c.vocab_size)
        return core::InvalidArgument("input " + std::to_string(i) + " has token id " + std::to_string(t) +
                                     " outside the vocabulary");
  }
  return core::Status::Ok();
}

std::vector<size_t> ScoringRunner::Pack(std::span<const std::vector<int32_t>> seqs) const {
  const int64_t bt = config_.block_tokens, kv_blocks = kv_.n_blocks();
  std::vector<size_t> starts;
  models::CompactionPlanBuilder builder;
  int64_t original = 0, own_blocks = 0;
  size_t lcp = 0;
  auto positions = [](size_t n) {
    std::vector<int32_t> p(n);
    std::iota(p.begin(), p.end(), 0);
    return p;
  };
  for (size_t s = 0; s < seqs.size(); ++s) {
    const std::vector<int32_t> pos = positions(seqs[s].size());
    const int64_t len = static_cast<int64_t>(seqs[s].size());
    if (!starts.empty() && s > starts.back()) {
      // Cost of the forward with s added, compacted or not as its ratio would decide.
      const int64_t compact = builder.compact_rows() + builder.NewRows(seqs[s], pos);
      const int64_t orig = original + len;
      const bool compacted = config_.threshold >= 1.0 || double(compact) < config_.threshold * double(orig);
      const size_t new_lcp = std::min(lcp, CommonPrefix(seqs[starts.back()], seqs[s]));
      const int64_t shared = compacted && config_.trie_attention ? static_cast<int64_t>(new_lcp) / bt : 0;
      const int64_t count = static_cast<int64_t>(s - starts.back()) + 1;
      const int64_t blocks = own_blocks + Blocks(len, bt) - (count - 1) * shared;
      if ((compacted ? compact : orig) <= config_.max_batch_tokens && blocks <= kv_blocks) {
        builder.AddSequence(seqs[s], pos);
        original = orig;
        own_blocks += Blocks(len, bt);
        lcp = new_lcp;
        continue;
      }
    }
    starts.push_back(s);
    builder = models::CompactionPlanBuilder();
    builder.AddSequence(seqs[s], pos);
    original = len;
    own_blocks = Blocks(len, bt);
    lcp = seqs[s].size();
  }
  starts.push_back(seqs.size());
  return starts;
}

void ScoringRunner::Run(std::span<const std::vector<int32_t>> seqs, const Outputs& what, const OnForward& out) {
  const auto& c = model_.config();
  const int64_t bt = config_.block_tokens;
  const std::vector<size_t> starts = Pack(seqs);
  std::vector<float> hidden, logits;
  for (size_t f = 0; f + 1 < starts.size(); ++f) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t first = starts[f], count = starts[f + 1] - first;
    std::vector<int32_t> ids, pos, last_rows;
    std::vector<int64_t> cu = {0};
    size_t lcp = seqs[first].size();
    for (size_t s = first; s < first + count; ++s) {
      ids.insert(ids.end(), seqs[s].begin(), seqs[s].end());
      for (size_t i = 0; i < seqs[s].size(); ++i) pos.push_back(static_cast<int32_t>(i));
      last_rows.push_back(static_cast<int32_t>(ids.size() - 1));
      cu.push_back(static_cast<int64_t>(ids.size()));
      lcp = std::min(lcp, CommonPrefix(seqs[first], seqs[s]));
    }
    const models::CompactionPlan plan = config_.threshold > 0 ? models::BuildCompactionPlan(ids, pos, cu)
                                                              : models::CompactionPlan{};
    const bool compacted = config_.threshold > 0 && (config_.threshold >= 1.0 || plan.ratio() < config_.threshold);
    // Trie attention reads a shared row through its creator's table: the forward's common
    // prefix lives in blocks every table shares, so only rows past it are ever copied.
    const int64_t shared = compacted && config_.trie_attention ? static_cast<int64_t>(lcp) / bt : 0;
    std::vector<std::vector<int32_t>> tables(count);
    int32_t next_block = static_cast<int32_t>(shared);
    for (size_t k = 0; k < count; ++k) {
      const int64_t blocks = Blocks(static_cast<int64_t>(seqs[first + k].size()), bt);
      for (int64_t b = 0; b < blocks; ++b) tables[k].push_back(b < shared ? static_cast<int32_t>(b) : next_block++);
    }
    RADIXLM_CHECK_MSG(next_block <= kv_.n_blocks(), "scoring forward exceeds its KV store (packing bug)");
    models::ForwardBatch fb;
    fb.token_ids = ids;
    fb.positions = pos;
    for (size_t k = 0; k < count; ++k) fb.seqs.push_back({cu[k], cu[k + 1] - cu[k], tables[k]});
    const models::CompactionPlan* used = compacted ? &plan : nullptr;
    const size_t computed = compacted ? plan.compact_rows() : ids.size();
    OutputRows logit_rows, hidden_rows;
    if (what.logits) logit_rows = ReadOutOnce(last_rows, used, computed);
    if (what.pooling == Pooling::kMean) {
      std::vector<int32_t> every(ids.size());
      std::iota(every.begin(), every.end(), 0);
      hidden_rows = ReadOutOnce(every, used, computed);
    } else if (what.pooling == Pooling::kLastToken) {
      hidden_rows = ReadOutOnce(last_rows, used, computed);
    }
    fb.logit_rows = logit_rows.request;
    hidden.resize(hidden_rows.request.size() * c.d_model);  // [distinct rows, d_model]
    fb.hidden_rows = hidden_rows.request;
    fb.hidden = hidden.data();
    fb.compaction = used;
    fb.trie_attention = compacted && config_.trie_attention;
    logits.resize(fb.logit_rows.size() * c.vocab_size);  // [distinct last rows, vocab_size]
    model_.Forward(pool_, fb, kv_, logits.data());
    stats_.forwards += 1;
    stats_.compacted_forwards += compacted;
    stats_.sequences += static_cast<int64_t>(count);
    stats_.original_rows += static_cast<int64_t>(ids.size());
    stats_.computed_rows += static_cast<int64_t>(computed);
    stats_.output_rows += static_cast<int64_t>(logit_rows.request.size() + hidden_rows.request.size());
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out(first, count, {hidden, hidden_rows.index, logits, logit_rows.index});
    if (progress_) progress_(first + count, seqs.size());
  }
}

core::StatusOr<std::vector<std::vector<float>>> ScoringRunner::Embed(std::span<const std::vector<int32_t>> seqs,
                                                                     Pooling pooling, bool normalize) {
  if (auto st = Validate(seqs); !st.ok()) return st;
  const int64_t d = model_.config().d_model;
  std::vector<std::vector<float>> result(seqs.size());
  Run(seqs, {.pooling = pooling}, [&](size_t first, size_t count, const ForwardOutputs& f) {
    size_t row = 0;
    for (size_t k = 0; k < count; ++k) {
      std::vector<double> acc(d, 0.0);
      const size_t rows = pooling == Pooling::kMean ? seqs[first + k].size() : 1;
      for (size_t r = 0; r < rows; ++r, ++row)
        for (int64_t j = 0; j < d; ++j) acc[j] += f.hidden[f.hidden_of[row] * d + j];
      double norm = 0;
      for (double& a : acc) {
        a /= static_cast<double>(rows);
        norm += a * a;
      }
      const double scale = normalize && norm > 0 ? 1.0 / std::sqrt(norm) : 1.0;
      std::vector<float>& e = result[first + k];
      e.resize(d);
      for (int64_t j = 0; j < d; ++j) e[j] = static_cast<float>(acc[j] * scale);
    }
  });
  return result;
}

core::StatusOr<std::vector<std::vector<engine::TokenLogprob>>> ScoringRunner::PromptLogprobs(
    std::span<const std::vector<int32_t>> seqs, int top_k) {
  if (auto st = Validate(seqs); !st.ok()) return st;
  const int64_t d = model_.config().d_model, vocab = model_.config().vocab_size;
  constexpr int64_t kChunk = 32;  // logits rows at a time
  std::vector<std::vector<engine::TokenLogprob>> result(seqs.size());
  std::vector<float> logits(kChunk * vocab);
  Run(seqs, {.pooling = Pooling::kMean}, [&](size_t first, size_t count, const ForwardOutputs& f) {
    size_t row = 0;  // the forward's rows: every row of each sequence, in order
    for (size_t k = 0; k < count; ++k) {
      const std::vector<int32_t>& s = seqs[first + k];
      std::vector<engine::TokenLogprob>& out = result[first + k];
      out.resize(s.size() - 1);
      // Row r's logits predict token r + 1.
      for (size_t r0 = 0; r0 + 1 < s.size(); r0 += kChunk) {
        const int64_t n = std::min<int64_t>(kChunk, static_cast<int64_t>(s.size() - 1 - r0));
        std::vector<float> h(n * d);
        for (int64_t i = 0; i < n; ++i)
          std::copy_n(f.hidden.data() + static_cast<int64_t>(f.hidden_of[row + r0 + i]) * d, d, h.data() + i * d);
        model_.LogitsFromHidden(pool_, h.data(), n, logits.data());
        for (int64_t i = 0; i < n; ++i) {
          const std::span<const float> lr(logits.data() + i * vocab, vocab);
          const double lse = sampling::LogSumExp(lr);
          engine::TokenLogprob& t = out[r0 + i];
          t.logprob = static_cast<float>(lr[s[r0 + i + 1]] - lse);
          sampling::TopLogProbs(lr, top_k, lse, &t.top);
        }
      }
      row += s.size();
    }
  });
  return result;
}

core::StatusOr<std::vector<double>> ScoringRunner::YesNoLogits(std::span<const std::vector<int32_t>> seqs,
                                                               int32_t yes_id, int32_t no_id) {
  const int64_t vocab = model_.config().vocab_size;
  if (yes_id < 0 || yes_id >= vocab || no_id < 0 || no_id >= vocab)
    return core::InvalidArgument("yes/no token ids outside the vocabulary");
  if (auto st = Validate(seqs); !st.ok()) return st;
  std::vector<double> result(seqs.size());
  Run(seqs, {.logits = true}, [&](size_t first, size_t count, const ForwardOutputs& f) {
    for (size_t k = 0; k < count; ++k) {
      const float* row = f.logits.data() + static_cast<int64_t>(f.logits_of[k]) * vocab;
      result[first + k] = static_cast<double>(row[yes_id]) - row[no_id];
    }
  });
  return result;
}

}  // namespace radixlm::runner
