// `radixlm grammar`: compile a JSON Schema or GBNF grammar for a tokenizer's vocabulary, print
// the grammar, time masks over a random document (--bench), or write random documents
// (--samples) for an outside check.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/json_text.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_feed.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "models/loader.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

struct GrammarOpts {
  ModelOptions model;
  std::string schema, gbnf, schema_lines, check, check_cases;
  bool json_object = false, print_gbnf = false, bench = false;
  int samples = 0, max_tokens = 512, runs = 1;
  uint64_t seed = 1;
  double stop_bias = 0.5;
  int64_t fuel = grammar::kStepFuel;  // work budget per mask and per token
};

core::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The grammar text: GBNF as given, or a schema's GBNF, or the json_object grammar.
core::StatusOr<std::string> GrammarText(const GrammarOpts& o) {
  if (o.json_object) return grammar::JsonObjectGbnf();
  if (!o.gbnf.empty()) return ReadFile(o.gbnf);
  auto schema = ReadFile(o.schema);
  if (!schema.ok()) return schema.status();
  return grammar::JsonSchemaToGbnf(*schema);
}

std::shared_ptr<const grammar::Vocabulary> VocabularyOf(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> bytes;
  std::vector<int32_t> special;
  for (int32_t i = 0; i < tok.vocab_size(); ++i) {
    bytes.push_back(tok.TokenBytes(i));
    if (tok.IsSpecial(i)) special.push_back(i);
  }
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes), special, EndOfTurnIds(tok));
}

struct Walk {
  std::vector<int32_t> tokens;
  std::vector<double> mask_us;
  int64_t max_mask_units = 0;  // the costliest mask's work units (grammar/matcher.h: kStepFuel)
  bool stopped = false;
};

// A random document: each step fills the mask and takes a uniformly random allowed token,
// except that a stop token, when allowed, is taken with probability stop_bias.
Walk RandomWalk(grammar::Matcher& m, std::mt19937_64& rng, const GrammarOpts& o) {
  m.set_fuel(o.fuel);
  const int32_t v = m.grammar().vocab().size();
  std::vector<uint32_t> mask((v + 31) / 32);
  std::vector<int32_t> allowed;
  Walk w;
  while (static_cast<int>(w.tokens.size()) < o.max_tokens && !m.IsTerminated()) {
    const auto t0 = Clock::now();
    if (!m.FillNextTokenMask(mask)) ExitIfError(core::ResourceExhausted("grammar: a mask exceeded the work budget"));
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

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// JSONL documents for an outside validator: each random document, cut at --max-tokens, is
// completed by the grammar's shortest completion (so every line is a whole document).
void PrintSamples(const std::shared_ptr<const grammar::CompiledGrammar>& g, int index, std::mt19937_64& rng,
                  const GrammarOpts& o) {
  for (int i = 0; i < o.samples; ++i) {
    grammar::Matcher m(g);
    Walk w = RandomWalk(m, rng, o);
    std::string doc;
    for (int32_t id : w.tokens) doc += g->vocab().bytes(id);
    json line = {{"document", doc + m.ShortestCompletion()}, {"completed", m.IsCompleted()}, {"tokens", w.tokens.size()},
                 {"max_mask_units", w.max_mask_units}};
    if (index >= 0) line["index"] = index;
    std::printf("%s\n", core::JsonText(line).c_str());
  }
}

std::shared_ptr<const grammar::Vocabulary> VocabularyOrExit(const GrammarOpts& o) {
  ModelOptions mo = o.model;
  int64_t model_vocab = 0;
  if (mo.tokenizer.empty() && !mo.model.empty()) {
    auto cfg = models::LoadConfig(mo.model);
    ExitIfError(cfg.status());
    model_vocab = cfg->vocab_size;
  }
  auto tok = LoadTokenizer(mo, model_vocab);
  ExitIfError(tok.status());
  return VocabularyOf(**tok);
}

// --schema-lines: a JSONL file of schemas (a line is a schema, or an object with "schema"),
// samples for each; a schema that does not compile prints {"index", "error"}.
void RunSchemaLines(const GrammarOpts& o) {
  std::ifstream in(o.schema_lines);
  if (!in) ExitIfError(core::NotFound(o.schema_lines + ": cannot open"));
  auto vocab = VocabularyOrExit(o);
  std::mt19937_64 rng(o.seed);
  int index = 0;
  for (std::string line; std::getline(in, line); ++index) {
    json row = json::parse(line, nullptr, false);
    if (row.is_object() && row.contains("schema")) row = row["schema"];
    auto g = grammar::CompiledGrammar::FromJsonSchema(row.dump(), vocab);
    if (!g.ok()) {
      std::printf("%s\n", core::JsonText(json{{"index", index}, {"error", g.status().message()}}).c_str());
      continue;
    }
    PrintSamples(*g, index, rng, o);
  }
}

// --check: each line of the file (a JSON string) fed to a matcher byte by byte: whether the
// grammar accepts it as a prefix, and whether it is a complete document.
void CheckTexts(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& path) {
  std::ifstream in(path);
  if (!in) ExitIfError(core::NotFound(path + ": cannot open"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json text = json::parse(line, nullptr, false);
    if (!text.is_string()) ExitIfError(core::InvalidArgument(path + ": each line must be a JSON string"));
    grammar::Matcher m(g);
    const bool prefix = m.AcceptBytes(text.get<std::string>());
    std::printf("%s\n", core::JsonText(json{{"prefix", prefix}, {"complete", prefix && m.IsCompleted()}}).c_str());
  }
}

// --check-cases: each line {"schema", "instances": [values]}; prints {"compiled", "error",
// "accept": [[compact, python-style], ...]} per line: whether the schema's grammar accepts each
// instance as a whole document (any member order; grammar/json_feed.h). Compiled for a byte
// vocabulary (acceptance of text does not depend on the tokenizer), within the server's bounds.
void RunCheckCases(const GrammarOpts& o) {
  std::ifstream in(o.check_cases);
  if (!in) ExitIfError(core::NotFound(o.check_cases + ": cannot open"));
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("</s>");
  const std::vector<int32_t> stop = {256};
  auto vocab = std::make_shared<const grammar::Vocabulary>(std::move(bytes), std::span<const int32_t>{}, stop);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto row = nlohmann::ordered_json::parse(line, nullptr, false);
    if (!row.is_object() || !row.contains("schema")) ExitIfError(core::InvalidArgument(o.check_cases + ": each line needs a schema"));
    const auto t0 = Clock::now();
    auto conv = grammar::JsonSchemaToGbnf(row["schema"].dump());
    grammar::GrammarCache::Result g = conv.ok() ? grammar::GrammarCache::Compile(*conv, vocab) : conv.status();
    json out = {{"compiled", g.ok()}, {"compile_ms", Ms(t0, Clock::now())}};
    if (!g.ok()) {
      out["error"] = g.status().message();
    } else {
      json accept = json::array();
      for (const auto& v : row.value("instances", nlohmann::ordered_json::array())) {
        json pair = json::array();
        for (grammar::FeedStyle style : {grammar::FeedStyle::kCompact, grammar::FeedStyle::kPython}) {
          grammar::Matcher m(*g);
          pair.push_back(grammar::FeedJson(m, v, style) && m.IsCompleted());
        }
        accept.push_back(pair);
      }
      out["accept"] = accept;
    }
    std::printf("%s\n", core::JsonText(out).c_str());
    std::fflush(stdout);
  }
}

void Run(const GrammarOpts& o) {
  if (!o.check_cases.empty()) return RunCheckCases(o);
  if (!o.schema_lines.empty()) return RunSchemaLines(o);
  const int given = !o.schema.empty() + !o.gbnf.empty() + o.json_object;
  if (given != 1) ExitIfError(core::InvalidArgument("give exactly one of --schema, --gbnf, --json-object, --schema-lines"));
  auto c0 = Clock::now();
  auto text = GrammarText(o);
  ExitIfError(text.status());
  const double to_gbnf_ms = Ms(c0, Clock::now());
  if (o.print_gbnf) std::printf("%s", text->c_str());
  if (!o.bench && o.samples == 0 && o.check.empty()) {
    ExitIfError(grammar::ParseGbnf(*text).status());
    return;
  }
  const auto v0 = Clock::now();
  auto vocab = VocabularyOrExit(o);
  const double vocab_ms = Ms(v0, Clock::now());  // loading the tokenizer and preparing its trie
  c0 = Clock::now();
  auto text2 = GrammarText(o);  // timed again together with parsing and lowering: the compile
  auto g = grammar::CompiledGrammar::FromGbnf(*text2, vocab);
  ExitIfError(g.status());
  const double compile_ms = Ms(c0, Clock::now());
  if (!o.check.empty()) return CheckTexts(*g, o.check);
  std::mt19937_64 rng(o.seed);
  if (o.samples > 0) {
    PrintSamples(*g, -1, rng, o);
    return;
  }
  std::vector<double> us;
  int64_t tokens = 0, completed = 0, max_units = 0;
  for (int r = 0; r < o.runs; ++r) {
    grammar::Matcher m(*g);
    Walk w = RandomWalk(m, rng, o);
    max_units = std::max(max_units, w.max_mask_units);
    us.insert(us.end(), w.mask_us.begin(), w.mask_us.end());
    tokens += static_cast<int64_t>(w.tokens.size());
    completed += m.IsCompleted();
  }
  json out = {{"vocab_size", vocab->size()},          {"vocab_prepare_ms", vocab_ms},
              {"schema_to_gbnf_ms", to_gbnf_ms},       {"compile_ms", compile_ms},
              {"runs", o.runs},                         {"tokens", tokens},
              {"documents_completed", completed},       {"mask_us_median", Percentile(us, 0.5)},
              {"mask_us_p99", Percentile(us, 0.99)},    {"mask_us_max", Percentile(us, 1.0)},
              {"mask_us_mean", us.empty() ? 0.0 : std::accumulate(us.begin(), us.end(), 0.0) / us.size()},
              {"mask_units_max", max_units}};
  std::printf("%s\n", core::JsonText(out).c_str());
}

}  // namespace

void RegisterGrammar(CLI::App& app) {
  auto o = std::make_shared<GrammarOpts>();
  o->model.tokenizer = "qwen3";
  o->model.model.clear();
  auto* cmd = app.add_subcommand("grammar", "compile a JSON Schema or GBNF grammar; time token masks (--bench)");
  cmd->add_option("--schema", o->schema, "JSON Schema file");
  cmd->add_option("--gbnf", o->gbnf, "GBNF grammar file (start rule: root)");
  cmd->add_flag("--json-object", o->json_object, "any JSON object (response_format json_object)");
  cmd->add_option("--schema-lines", o->schema_lines, "JSONL of schemas: --samples documents for each (JSONL)");
  cmd->add_flag("--print-gbnf", o->print_gbnf, "print the grammar text");
  cmd->add_flag("--bench", o->bench, "time masks over random documents, print one JSON object");
  cmd->add_option("--samples", o->samples, "print N random documents as JSONL (text, completed, completion)");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per random document (default 512)");
  cmd->add_option("--check-cases", o->check_cases,
                  "JSONL of {\"schema\", \"instances\"}: print {\"compiled\", \"accept\": [[compact, spaced], ...]} per line "
                  "(the differential fuzzer's check, fuzz/schema_diff.py)");
  cmd->add_option("--check", o->check, "JSONL of strings: print {\"prefix\", \"complete\"} per line (accepted as a prefix / a whole document)");
  cmd->add_option("--runs", o->runs, "--bench: random documents to time (default 1)");
  cmd->add_option("--seed", o->seed, "random seed (default 1)");
  cmd->add_option("--fuel", o->fuel, "work units a mask or a token may cost (default: the server's budget)");
  cmd->add_option("--stop-bias", o->stop_bias, "probability of taking a stop token when allowed (default 0.5)");
  auto* m = cmd->add_option("--model,-m", o->model.model, "take the tokenizer from this model");
  AddTokenizerOptions(cmd, &o->model);
  CLI::Option* t = cmd->get_option("--tokenizer");
  cmd->callback([o, m, t] {
    GrammarOpts run = *o;
    if (m->count() > 0 && t->count() == 0) run.model.tokenizer.clear();  // -m alone: the model's own
    Run(run);
  });
}

}  // namespace radixlm::cli
