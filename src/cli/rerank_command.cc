// radixlm rerank: offline Qwen3-Reranker scoring of query/passage lists, with intra-batch
// prefix deduplication (RadixMLP). Every pair is rendered with the reranker template (system
// line asking for "yes"/"no", <Instruct>/<Query>/<Document>, the empty-think assistant prefix),
// batched up to --max-batch-tokens, and scored sigmoid(logit(yes) - logit(no)) from the last
// token, the two token ids looked up in the tokenizer. A batch runs compacted when its
// compact/original row ratio is below --threshold (0 = never, 1 = always).
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/block_pool.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "models/kv_store.h"
#include "models/prefix_compaction.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

struct RerankQuery {
  std::string query;
  std::vector<std::string> documents;
};

// JSONL of {"query", "documents": [...]}, or a JSON array of {"query", "hits": [{"content"}]}
// (rank_llm's BM25 run files, as in ../shared/data/rerank).
core::StatusOr<std::vector<RerankQuery>> ReadQueries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<RerankQuery> out;
  auto add = [&](const json& j) {
    RerankQuery q;
    q.query = j.at("query").get<std::string>();
    if (j.contains("documents"))
      for (const auto& d : j["documents"]) q.documents.push_back(d.get<std::string>());
    if (j.contains("hits"))
      for (const auto& h : j["hits"]) q.documents.push_back(h.at("content").get<std::string>());
    out.push_back(std::move(q));
  };
  try {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
      for (const auto& j : json::parse(text)) add(j);
    } else {
      std::istringstream lines(text);
      int line_no = 0;
      for (std::string line; std::getline(lines, line);) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
          add(json::parse(line));
        } catch (const json::exception& e) {
          return core::InvalidArgument(path + ":" + std::to_string(line_no) + ": " + e.what());
        }
      }
    }
  } catch (const json::exception& e) {
    return core::InvalidArgument(path + ": " + e.what());
  }
  return out;
}

int32_t SingleToken(const tokenizer::Tokenizer& tok, const std::string& word) {
  const std::vector<int32_t> ids = tok.Encode(word, /*add_special=*/false);
  if (ids.size() != 1) ExitIfError(core::InvalidArgument("'" + word + "' is not a single token of this tokenizer"));
  return ids[0];
}

}  // namespace

void RegisterRerank(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string input, out, compaction = "trie";
    std::string instruction = "Given a web search query, retrieve relevant passages that answer the query";
    int max_batch_tokens = 8192, queries = 0, passages = 0;
    double threshold = 0.92;
    bool json_out = false;
  };
  auto* o = new Opts;
  auto* cmd = app.add_subcommand("rerank", "score query/passage pairs with the Qwen3-Reranker template (prefix dedup within batches)");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  cmd->add_option("--input", o->input, "JSONL {query, documents} or a JSON array {query, hits[{content}]}")->required();
  cmd->add_option("--out", o->out, "write one JSON line per query with its scores");
  cmd->add_option("--instruction", o->instruction)->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens)->capture_default_str();
  cmd->add_option("--compaction", o->compaction, "gather | trie (when a batch compacts)")->capture_default_str();
  cmd->add_option("--threshold", o->threshold, "compact a batch when compact/original rows < this (0 never, 1 always)")
      ->capture_default_str();
  cmd->add_option("--queries", o->queries, "at most this many queries (0 = all)");
  cmd->add_option("--passages", o->passages, "at most this many passages per query (0 = all)");
  cmd->add_flag("--json", o->json_out, "print a JSON summary");
  cmd->callback([o] {
    if (o->compaction != "gather" && o->compaction != "trie") ExitIfError(core::InvalidArgument("--compaction is gather or trie"));
    auto queries = ReadQueries(o->input);
    ExitIfError(queries.status());
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    models::Transformer& model = *loaded.model;
    const tokenizer::Tokenizer& tok = *loaded.tokenizer;
    const auto& c = model.config();
    const int32_t yes = SingleToken(tok, "yes"), no = SingleToken(tok, "no");
    const std::vector<int32_t> prefix = tok.Encode(
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
        "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n", false);
    const std::vector<int32_t> suffix = tok.Encode("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", false);
    // Pairs in input order.
    struct Pair { size_t q; std::vector<int32_t> ids; };
    std::vector<Pair> pairs;
    const size_t nq = o->queries > 0 ? std::min<size_t>(o->queries, queries->size()) : queries->size();
    for (size_t qi = 0; qi < nq; ++qi) {
      const RerankQuery& q = (*queries)[qi];
      const size_t nd = o->passages > 0 ? std::min<size_t>(o->passages, q.documents.size()) : q.documents.size();
      for (size_t di = 0; di < nd; ++di) {
        std::vector<int32_t> ids = prefix;
        const auto body = tok.Encode("<Instruct>: " + o->instruction + "\n<Query>: " + q.query + "\n<Document>: " +
                                         q.documents[di], false);
        const int64_t room = o->max_batch_tokens - static_cast<int64_t>(prefix.size() + suffix.size());
        ids.insert(ids.end(), body.begin(), body.begin() + std::min<int64_t>(room, body.size()));  // truncate the body
        ids.insert(ids.end(), suffix.begin(), suffix.end());
        pairs.push_back({qi, std::move(ids)});
      }
    }
    core::ThreadPool pool(o->model.threads);
    const int bt = 16;
    const int32_t n_blocks = (o->max_batch_tokens + bt - 1) / bt + 512;
    models::KvStore kv(c, {n_blocks, bt});
    cache::BlockPool blocks({n_blocks, bt});
    std::vector<double> scores(pairs.size());
    int64_t original = 0, compact = 0, compacted_batches = 0, batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t first = 0; first < pairs.size();) {
      size_t last = first;
      int64_t tokens = 0;
      while (last < pairs.size() && (last == first || tokens + static_cast<int64_t>(pairs[last].ids.size()) <= o->max_batch_tokens))
        tokens += static_cast<int64_t>(pairs[last++].ids.size());
      std::vector<int32_t> ids, pos, rows;
      std::vector<int64_t> cu = {0};
      for (size_t p = first; p < last; ++p) {
        for (size_t i = 0; i < pairs[p].ids.size(); ++i) {
          ids.push_back(pairs[p].ids[i]);
          pos.push_back(static_cast<int32_t>(i));
        }
        rows.push_back(static_cast<int32_t>(ids.size() - 1));
        cu.push_back(static_cast<int64_t>(ids.size()));
      }
      const models::CompactionPlan plan = models::BuildCompactionPlan(ids, pos, cu);
      const bool use = o->threshold >= 1.0 || (o->threshold > 0 && plan.ratio() < o->threshold);
      // Trie attention reads shared rows through the creator's table; sharing the batch's
      // common prefix blocks avoids copying them.
      size_t lcp = pairs[first].ids.size();
      for (size_t p = first + 1; p < last; ++p) {
        size_t k = 0;
        while (k < lcp && k < pairs[p].ids.size() && pairs[p].ids[k] == pairs[first].ids[k]) ++k;
        lcp = k;
      }
      const int shared = use && o->compaction == "trie" ? static_cast<int>(lcp / bt) : 0;
      const std::vector<int32_t> common = shared ? *blocks.Allocate(shared) : std::vector<int32_t>{};
      std::vector<std::vector<int32_t>> tables;
      models::ForwardBatch fb;
      for (size_t p = first; p < last; ++p) {
        std::vector<int32_t> t = common;
        auto own = blocks.Allocate(static_cast<int32_t>((pairs[p].ids.size() + bt - 1) / bt - shared));
        if (!own) ExitIfError(core::ResourceExhausted("KV pool too small for a batch"));
        t.insert(t.end(), own->begin(), own->end());
        tables.push_back(std::move(t));
      }
      fb.token_ids = ids;
      fb.positions = pos;
      for (size_t p = 0; p < tables.size(); ++p) fb.seqs.push_back({cu[p], cu[p + 1] - cu[p], tables[p]});
      fb.logit_rows = rows;
      fb.compaction = use ? &plan : nullptr;
      fb.trie_attention = use && o->compaction == "trie";
      std::vector<float> logits(rows.size() * c.vocab_size);
      model.Forward(pool, fb, kv, logits.data());
      for (size_t p = first; p < last; ++p) {
        const float* l = logits.data() + (p - first) * c.vocab_size;
        scores[p] = 1.0 / (1.0 + std::exp(static_cast<double>(l[no]) - l[yes]));
      }
      for (auto& t : tables)
        for (size_t k = shared; k < t.size(); ++k) blocks.Release(t[k]);
      for (int32_t b : common) blocks.Release(b);
      original += static_cast<int64_t>(ids.size());
      compact += use ? plan.compact_rows() : static_cast<int64_t>(ids.size());
      compacted_batches += use;
      ++batches;
      first = last;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o->out.empty()) {
      std::ofstream out(o->out);
      for (size_t qi = 0, p = 0; qi < nq; ++qi) {
        json s = json::array();
        while (p < pairs.size() && pairs[p].q == qi) s.push_back(scores[p++]);
        out << json{{"query", (*queries)[qi].query}, {"scores", s}}.dump() << "\n";
      }
    }
    const json summary = {{"model", c.name}, {"pairs", pairs.size()}, {"queries", nq}, {"batches", batches},
                          {"compacted_batches", compacted_batches}, {"compaction", o->compaction},
                          {"threshold", o->threshold}, {"tokens", original},
                          {"compact_ratio", original ? double(compact) / original : 1.0}, {"seconds", seconds},
                          {"pairs_per_s", seconds > 0 ? pairs.size() / seconds : 0.0}, {"yes_id", yes}, {"no_id", no}};
    std::printf("%s\n", summary.dump(o->json_out ? -1 : 2).c_str());
  });
}

}  // namespace radixlm::cli
