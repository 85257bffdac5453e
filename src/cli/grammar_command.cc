// `radixlm grammar`: compile a JSON Schema or GBNF grammar for a tokenizer's vocabulary, print
// the grammar, time masks over a random document (--bench), or write random documents
// (--samples) for an outside check.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/json_text.h"
#include "grammar/json_schema.h"
#include "grammar/probe.h"
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
  int samples = 0, runs = 1;
  uint64_t seed = 1;
  grammar::WalkOptions walk;
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

// JSONL documents for an outside validator: each random document, cut at --max-tokens, is
// completed by the grammar's shortest completion (so every line is a whole document).
void PrintSamples(const std::shared_ptr<const grammar::CompiledGrammar>& g, int index, std::mt19937_64& rng,
                  const GrammarOpts& o) {
  for (int i = 0; i < o.samples; ++i) {
    auto line = grammar::SampleDocument(g, rng, o.walk);
    ExitIfError(line.status());
    if (index >= 0) (*line)["index"] = index;
    std::printf("%s\n", core::JsonText(*line).c_str());
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
    std::printf("%s\n", core::JsonText(grammar::CheckText(g, text.get<std::string>())).c_str());
  }
}

// --check-cases: each line {"schema", "instances": [values]}; prints grammar::CheckCase's answer.
void RunCheckCases(const GrammarOpts& o) {
  std::ifstream in(o.check_cases);
  if (!in) ExitIfError(core::NotFound(o.check_cases + ": cannot open"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto out = grammar::CheckCase(nlohmann::ordered_json::parse(line, nullptr, false));
    if (!out.ok()) ExitIfError(core::InvalidArgument(o.check_cases + ": " + out.status().message()));
    std::printf("%s\n", core::JsonText(*out).c_str());
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
  auto masks = grammar::BenchMasks(*g, rng, o.runs, o.walk);
  ExitIfError(masks.status());
  json out = {{"vocab_size", vocab->size()}, {"vocab_prepare_ms", vocab_ms}, {"schema_to_gbnf_ms", to_gbnf_ms},
              {"compile_ms", compile_ms}};
  out.update(*masks);
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
  cmd->add_option("--max-tokens", o->walk.max_tokens, "tokens per random document (default 512)");
  cmd->add_option("--check-cases", o->check_cases,
                  "JSONL of {\"schema\", \"instances\"}: print {\"compiled\", \"accept\": [[compact, spaced], ...]} per line "
                  "(the differential fuzzer's check, fuzz/schema_diff.py)");
  cmd->add_option("--check", o->check, "JSONL of strings: print {\"prefix\", \"complete\"} per line (accepted as a prefix / a whole document)");
  cmd->add_option("--runs", o->runs, "--bench: random documents to time (default 1)");
  cmd->add_option("--seed", o->seed, "random seed (default 1)");
  cmd->add_option("--fuel", o->walk.fuel, "work units a mask or a token may cost (default: the server's budget)");
  cmd->add_option("--stop-bias", o->walk.stop_bias, "probability of taking a stop token when allowed (default 0.5)");
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
