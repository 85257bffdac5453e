#include "grammar/probe.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "grammar/grammar_cache.h"
#include "grammar/json_feed.h"
#include "grammar/json_schema.h"

namespace radixlm::grammar {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Every byte as a token, and "</s>" as the stop token.
std::shared_ptr<const Vocabulary> ByteVocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("</s>");
  const std::vector<int32_t> stop = {256};
  return std::make_shared<const Vocabulary>(std::move(bytes), std::span<const int32_t>{}, stop);
}

}  // namespace

core::StatusOr<Walk> RandomWalk(Matcher& m, std::mt19937_64& rng, const WalkOptions& o) {
  m.set_fuel(o.fuel);
  const int32_t v = m.grammar().vocab().size();
  std::vector<uint32_t> mask((v + 31) / 32);
  std::vector<int32_t> allowed;
  Walk w;
  while (static_cast<int>(w.tokens.size()) < o.max_tokens && !m.IsTerminated()) {
    const auto t0 = Clock::now();
    if (!m.FillNextTokenMask(mask)) return core::ResourceExhausted("grammar: a mask exceeded the work budget");
    w.mask_us.push_back(Ms(t0, Clock::now()) * 1000);
    w.max_mask_units = std::max(w.max_mask_units, m.last_mask_units());
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i) {
      for (uint32_t bits = mask[i]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(i * 32 + __builtin_ctz(bits)));
    }
    if (allowed.empty()) break;
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.IsCompleted() && std::uniform_real_distribution<double>(0, 1)(rng) < o.stop_bias) {
      pick = m.grammar().vocab().stop_ids().front();
    }
    RADIXLM_CHECK(m.AcceptToken(pick));
    if (m.grammar().vocab().IsStop(pick)) {
      w.stopped = true;
      break;
    }
    w.tokens.push_back(pick);
  }
  return w;
}

core::StatusOr<json> SampleDocument(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, const WalkOptions& o) {
  Matcher m(g);
  auto w = RandomWalk(m, rng, o);
  RADIXLM_RETURN_IF_ERROR(w.status());
  std::string doc;
  for (int32_t id : w->tokens) doc += g->vocab().bytes(id);
  return json{{"document", doc + m.ShortestCompletion()}, {"completed", m.IsCompleted()}, {"tokens", w->tokens.size()},
              {"max_mask_units", w->max_mask_units}};
}

core::StatusOr<json> BenchMasks(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, int runs,
                                const WalkOptions& o) {
  std::vector<double> us;
  int64_t tokens = 0, completed = 0, max_units = 0;
  for (int r = 0; r < runs; ++r) {
    Matcher m(g);
    auto w = RandomWalk(m, rng, o);
    RADIXLM_RETURN_IF_ERROR(w.status());
    max_units = std::max(max_units, w->max_mask_units);
    us.insert(us.end(), w->mask_us.begin(), w->mask_us.end());
    tokens += static_cast<int64_t>(w->tokens.size());
    completed += m.IsCompleted();
  }
  return json{{"runs", runs},
              {"tokens", tokens},
              {"documents_completed", completed},
              {"mask_us_median", Percentile(us, 0.5)},
              {"mask_us_p99", Percentile(us, 0.99)},
              {"mask_us_max", Percentile(us, 1.0)},
              {"mask_us_mean", us.empty() ? 0.0 : std::accumulate(us.begin(), us.end(), 0.0) / us.size()},
              {"mask_units_max", max_units}};
}

json CheckText(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  const bool prefix = m.AcceptBytes(text);
  return {{"prefix", prefix}, {"complete", prefix && m.IsCompleted()}};
}

core::StatusOr<json> CheckCase(const nlohmann::ordered_json& row) {
  static const std::shared_ptr<const Vocabulary> vocab = ByteVocabulary();
  if (!row.is_object() || !row.contains("schema")) return core::InvalidArgument("each line needs a schema");
  const auto t0 = Clock::now();
  auto conv = JsonSchemaToGbnf(row["schema"].dump());
  GrammarCache::Result g = conv.ok() ? GrammarCache::Compile(*conv, vocab) : conv.status();
  json out = {{"compiled", g.ok()}, {"compile_ms", Ms(t0, Clock::now())}};
  if (!g.ok()) {
    out["error"] = g.status().message();
    return out;
  }
  json accept = json::array();
  for (const auto& v : row.value("instances", nlohmann::ordered_json::array())) {
    json pair = json::array();
    for (FeedStyle style : {FeedStyle::kCompact, FeedStyle::kPython}) {
      Matcher m(*g);
      pair.push_back(FeedJson(m, v, style) && m.IsCompleted());
    }
    accept.push_back(pair);
  }
  out["accept"] = accept;
  return out;
}

}  // namespace radixlm::grammar
