// radixlm rerank and radixlm embed: offline scoring over JSONL files with intra-batch prefix
// deduplication (RadixMLP), on runner::ScoringRunner.
//   rerank: every query/passage pair rendered with the Qwen3-Reranker template, scored
//     sigmoid(logit(yes) - logit(no)) at the last token (ids looked up in the tokenizer).
//   embed: Qwen3-Embedding inputs (optional query instruction, end-of-text appended for
//     last-token pooling), pooled and L2-normalised.
// Inputs are packed into forwards of at most --max-batch-tokens computed rows; a forward runs
// compacted when its compact/original row ratio is below --threshold (0 never, 1 always).
#include <memory>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/progress.h"
#include "runner/scoring.h"
#include "tokenizer/scoring_format.h"
#include "tokenizer/scoring_inputs.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

struct ScoringOptions {
  int max_batch_tokens = 8192;
  double threshold = 0.92;
  std::string compaction = "trie";
};

void AddScoringOptions(CLI::App* cmd, ScoringOptions* o) {
  AddChecked(cmd, "--max-batch-tokens", o->max_batch_tokens,
             "rows computed per forward (compact rows when compacted)", CLI::Range(1, 1 << 24));
  AddChecked(cmd, "--compaction", o->compaction,
             "attention when a forward compacts: trie | gather", CLI::IsMember({"trie", "gather"}));
  cmd->add_option("--threshold", o->threshold, "compact a forward when compact/original rows < this (0 never, 1 always)")
      ->capture_default_str();
}

runner::ScoringConfig MakeScoringConfig(const ScoringOptions& o, core::DType kv_dtype) {
  return {.max_batch_tokens = o.max_batch_tokens, .threshold = o.threshold, .trie_attention = o.compaction == "trie",
          .kv_dtype = kv_dtype};
}

nlohmann::json StatsJson(const runner::ScoringStats& st, double seconds) {
  return {{"forwards", st.forwards}, {"compacted_forwards", st.compacted_forwards}, {"tokens", st.original_rows},
          {"computed_tokens", st.computed_rows}, {"compact_ratio", st.ratio()}, {"seconds", seconds}};
}

}  // namespace

void RegisterRerank(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    ScoringOptions scoring;
    std::string input, out;
    std::string instruction{tokenizer::kDefaultRerankInstruction};
    int queries = 0, passages = 0;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("rerank", "score query/passage pairs with the Qwen3-Reranker template (prefix dedup within batches)");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  AddScoringOptions(cmd, &o->scoring);
  cmd->add_option("--input", o->input, "JSONL {query, documents} or a JSON array {query, hits[{content}]}")->required();
  cmd->add_option("--out", o->out, "write one JSON line per query with its scores");
  cmd->add_option("--instruction", o->instruction)->capture_default_str();
  cmd->add_option("--queries", o->queries, "at most this many queries (0 = all)");
  cmd->add_option("--passages", o->passages, "at most this many passages per query (0 = all)");
  cmd->add_flag("--json", o->json_out, "print a JSON summary");
  cmd->callback([o] {
    auto queries = tokenizer::ReadRerankQueries(o->input);
    ExitIfError(queries.status());
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    const tokenizer::Tokenizer& tok = *loaded.tokenizer;
    auto format = tokenizer::MakeRerankerFormat(tok);
    ExitIfError(format.status());
    const size_t nq = o->queries > 0 ? std::min<size_t>(o->queries, queries->size()) : queries->size();
    const tokenizer::RerankPairs rendered = tokenizer::RenderRerankPairs(*queries, nq, o->passages, *format, tok, o->instruction,
                                                   o->scoring.max_batch_tokens);
    const auto& pairs = rendered.pairs;
    const auto& query_of = rendered.query_of;
    core::ThreadPool pool(o->model.threads);
    runner::ScoringRunner runner(*loaded.model, pool, MakeScoringConfig(o->scoring, KvDtypeOf(o->model)));
    core::Progress progress("rerank", static_cast<int64_t>(pairs.size()));
    runner.set_progress([&](size_t done, size_t) { progress.Update(static_cast<int64_t>(done)); });
    const auto t0 = std::chrono::steady_clock::now();
    auto logits = runner.YesNoLogits(pairs, format->yes_id, format->no_id);
    progress.Done();
    ExitIfError(logits.status());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o->out.empty()) {
      std::ofstream out(o->out);
      for (size_t qi = 0, p = 0; qi < nq; ++qi) {
        json s = json::array();
        while (p < pairs.size() && query_of[p] == qi) s.push_back(1.0 / (1.0 + std::exp(-(*logits)[p++])));
        out << core::JsonText(json{{"query", (*queries)[qi].query}, {"scores", s}}) << "\n";
      }
      if (!out) ExitIfError(core::IoError("cannot write " + o->out));
    }
    json summary = StatsJson(runner.stats(), seconds);
    summary.update({{"model", loaded.model->config().name}, {"pairs", pairs.size()}, {"queries", nq},
                    {"compaction", o->scoring.compaction}, {"threshold", o->scoring.threshold},
                    {"pairs_per_s", seconds > 0 ? pairs.size() / seconds : 0.0}, {"yes_id", format->yes_id},
                    {"no_id", format->no_id}});
    std::printf("%s\n", core::JsonText(summary, o->json_out ? -1 : 2).c_str());
  });
}

void RegisterEmbed(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    ScoringOptions scoring;
    std::string input, out, instruction, pooling = "last";
    bool no_normalize = false, truncate = false, json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("embed", "embed texts (Qwen3-Embedding format, last-token or mean pooling; prefix dedup within batches)");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  AddScoringOptions(cmd, &o->scoring);
  cmd->add_option("--input", o->input, "JSONL: one {\"text\": ...} object or JSON string per line")->required();
  cmd->add_option("--out", o->out, "write one JSON line {index, embedding} per input");
  cmd->add_option("--instruction", o->instruction, "embed as queries: 'Instruct: {instruction}\\nQuery:{text}'");
  AddChecked(cmd, "--pooling", o->pooling, "last (end-of-text appended) | mean", CLI::IsMember({"last", "mean"}));
  cmd->add_flag("--no-normalize", o->no_normalize, "skip L2 normalisation");
  cmd->add_flag("--truncate", o->truncate, "cut inputs longer than --max-batch-tokens instead of failing");
  cmd->add_flag("--json", o->json_out, "print a JSON summary");
  cmd->callback([o] {
    const auto texts = tokenizer::ReadEmbedTexts(o->input);
    ExitIfError(texts.status());
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    const bool last = o->pooling == "last";
    const auto rendered = tokenizer::RenderEmbedInputs(*texts, *loaded.tokenizer, o->instruction, last,
                                                       o->scoring.max_batch_tokens, o->truncate, o->input);
    ExitIfError(rendered.status());
    const std::vector<std::vector<int32_t>>& inputs = *rendered;
    core::ThreadPool pool(o->model.threads);
    runner::ScoringRunner runner(*loaded.model, pool, MakeScoringConfig(o->scoring, KvDtypeOf(o->model)));
    core::Progress progress("embed", static_cast<int64_t>(inputs.size()));
    runner.set_progress([&](size_t done, size_t) { progress.Update(static_cast<int64_t>(done)); });
    const auto t0 = std::chrono::steady_clock::now();
    auto emb = runner.Embed(inputs, last ? runner::Pooling::kLastToken : runner::Pooling::kMean, !o->no_normalize);
    progress.Done();
    ExitIfError(emb.status());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o->out.empty()) {
      std::ofstream out(o->out);
      for (size_t i = 0; i < emb->size(); ++i) out << core::JsonText(json{{"index", i}, {"embedding", (*emb)[i]}}) << "\n";
      if (!out) ExitIfError(core::IoError("cannot write " + o->out));
    }
    json summary = StatsJson(runner.stats(), seconds);
    summary.update({{"model", loaded.model->config().name}, {"inputs", inputs.size()}, {"pooling", o->pooling},
                    {"dimensions", loaded.model->config().d_model}, {"compaction", o->scoring.compaction},
                    {"threshold", o->scoring.threshold}, {"inputs_per_s", seconds > 0 ? inputs.size() / seconds : 0.0}});
    std::printf("%s\n", core::JsonText(summary, o->json_out ? -1 : 2).c_str());
  });
}

}  // namespace radixlm::cli
