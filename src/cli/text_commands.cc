// Subcommands that speak text: tokenize, and chat (interactive, streaming).
#include <memory>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "models/kv_store.h"
#include "serve/chat_session.h"
#include "serve/completion_stream.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

core::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> TokenizerOnly(const ModelOptions& o) {
  int64_t vocab = 0;
  if (o.tokenizer.empty()) {
    RADIXLM_ASSIGN_OR_RETURN(models::ModelConfig c, models::LoadConfig(o.model));
    vocab = c.vocab_size;
  }
  return LoadTokenizer(o, vocab);
}

}  // namespace

namespace {

struct TokenizeOptions {
  ModelOptions model;
  std::string text, decode, input, output;
  bool json_out = false, add_special = false, skip_special = false, check_roundtrip = false, bench = false;
};

void DecodeIds(const tokenizer::Tokenizer& t, const TokenizeOptions& o) {
  auto ids = ParseIds(o.decode);
  ExitIfError(ids.status());
  for (int32_t id : *ids)
    if (id >= t.vocab_size()) ExitIfError(core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary"));
  const std::string text = t.Decode(*ids, o.skip_special);
  if (o.json_out) std::printf("%s\n", core::JsonText(json({{"text", text}})).c_str());
  else std::printf("%s\n", text.c_str());
}

// --bench: single-thread encoding of every {"text"} line of --input, in MB/s.
void BenchEncode(const tokenizer::Tokenizer& t, const TokenizeOptions& o) {
  std::ifstream in(o.input);
  if (!in) ExitIfError(core::NotFound(o.input + ": cannot open"));
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("text") || !j["text"].is_string()) continue;
    texts.push_back(j["text"].get<std::string>());
    bytes += texts.back().size();
  }
  if (texts.empty()) ExitIfError(core::InvalidArgument(o.input + ": no {\"text\": ...} lines"));
  t.Encode(texts[0]);  // warm-up, as the reference run does
  size_t tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& text : texts) tokens += t.Encode(text).size();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n", core::JsonText(json({{"tokenizer", t.name()}, {"bytes", bytes}, {"tokens", tokens}, {"seconds", s},
                                           {"mb_per_s", bytes / 1e6 / s}})).c_str());
}

// --input: each {"text"} line's ids as a JSONL line; --check-roundtrip fails unless every line
// decodes back to its text.
void EncodeLines(const tokenizer::Tokenizer& t, const TokenizeOptions& o) {
  std::ifstream in(o.input);
  if (!in) ExitIfError(core::NotFound(o.input + ": cannot open"));
  std::ofstream file;
  if (!o.output.empty()) file.open(o.output);
  std::ostream& out = o.output.empty() ? std::cout : file;
  std::string line;
  int roundtrip_failures = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("text") || !j["text"].is_string())
      ExitIfError(core::InvalidArgument(o.input + ":" + std::to_string(n) + ": expected {\"text\": string}"));
    const std::string text = j["text"].get<std::string>();
    const auto ids = t.Encode(text, o.add_special);
    out << core::JsonText(json({{"ids", ids}})) << "\n";
    if (o.check_roundtrip && t.Decode(ids) != t.RoundTripForm(text) && ++roundtrip_failures <= 3)
      std::fprintf(stderr, "line %d does not round-trip: %s\n", n, core::JsonText(json(text)).substr(0, 200).c_str());
  }
  if (roundtrip_failures) {
    std::fprintf(stderr, "radixlm: %d line(s) of %s do not decode back to their text\n", roundtrip_failures, o.input.c_str());
    std::exit(1);
  }
}

void RunTokenize(const TokenizeOptions& o) {
  auto t = TokenizerOnly(o.model);
  ExitIfError(t.status());
  if (!o.decode.empty()) return DecodeIds(**t, o);
  if (!o.input.empty() && o.bench) return BenchEncode(**t, o);
  if (!o.input.empty()) return EncodeLines(**t, o);
  const auto ids = (*t)->Encode(o.text, o.add_special);
  if (o.json_out) {
    std::printf("%s\n", core::JsonText(json({{"ids", ids}})).c_str());
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
  std::printf("\n");
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "text to token ids (or --decode ids to text)");
  cmd->add_option("--model,-m", o->model.model, "take the tokenizer from this model");
  AddTokenizerOptions(cmd, &o->model);
  cmd->add_option("--text", o->text, "text to encode");
  cmd->add_option("--decode", o->decode, "token ids to decode, comma-separated");
  cmd->add_option("--input", o->input, "JSONL file of {\"text\": ...} lines to encode");
  cmd->add_option("--output", o->output, "with --input: JSONL of {\"ids\": [...]} lines (default stdout)");
  cmd->add_flag("--add-special", o->add_special, "apply the tokenizer's BOS/EOS rules");
  cmd->add_flag("--skip-special", o->skip_special, "with --decode: drop special tokens");
  cmd->add_flag("--check-roundtrip", o->check_roundtrip, "with --input: fail unless decode(encode(text)) == text for every line");
  cmd->add_flag("--bench", o->bench, "with --input: time single-thread encoding of all lines, print MB/s as JSON");
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  cmd->callback([o] { RunTokenize(*o); });
}

namespace {

struct ChatOptions {
  ModelOptions model;
  EngineOptions engine;
  std::string system, chat_template;
  int max_tokens = 64;
  sampling::SamplingParams sampling;
};

// The conversation on stdin through serve::ChatSession: each turn's reply streamed, then its
// prompt, cached and computed tokens; the totals at the end.
void RunChat(ChatOptions& o) {
  o.model.kv_tokens = o.engine.kv_tokens;  // refused up front when it cannot fit
  const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o.model);
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;
  auto format = tokenizer::ChatTemplate::ForTokenizer(tok, o.chat_template);
  ExitIfError(format.status());
  // The same engine as `serve`: a conversation's history stays in the radix cache.
  core::ThreadPool pool(o.model.threads);
  const auto serving = MakeServingEngineOrExit(*loaded.model, pool, o.engine, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  engine::Engine& eng = serving->engine();
  serve::ChatSession chat(eng, tok, *format, o.system,
                          {.max_tokens = o.max_tokens, .stop_ids = EndOfTurnIds(tok), .sampling = o.sampling});
  std::fprintf(stderr, "%s on %d threads, %s chat template, prefix cache %s; one message per line, Ctrl-D to end\n",
               loaded.model->config().name.c_str(), pool.size(), o.chat_template.empty() ? "the model's" : o.chat_template.c_str(),
               o.engine.no_prefix_cache ? "off" : "on");
  if (o.model.model.rfind("random:", 0) == 0)
    std::fprintf(stderr, "(random weights: the replies are noise; the token ids, the streaming and the costs are real)\n");
  std::string line;
  int turns = 0;
  int64_t total_prompt = 0, total_cached = 0;
  double total_prefill_s = 0;
  while (std::printf("\n> "), std::fflush(stdout), std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto turn = chat.Prepare(line);
    ExitIfError(turn.status());
    if (!turn->fits) {
      std::printf("[this message and --max-tokens exceed the %lld-token limit (the model's context, --kv-tokens)]\n",
                  static_cast<long long>(eng.max_request_tokens()));
      continue;
    }
    if (!isatty(0)) std::printf("%s", line.c_str());  // echo scripted input so the log reads as a chat
    std::printf("\n");
    if (turn->dropped > 0)
      std::printf("[the oldest %d exchange%s dropped to fit the %lld-token context]\n", turn->dropped, turn->dropped > 1 ? "s" : "",
                  static_cast<long long>(eng.max_request_tokens()));
    auto usage = chat.Run([](const std::string& delta) {
      std::printf("%s", delta.c_str());
      std::fflush(stdout);
    });
    if (!usage.ok()) {
      std::fprintf(stderr, "radixlm chat: %s\n", usage.status().message().c_str());
      std::exit(1);
    }
    const engine::Usage& u = *usage;
    const double decode_s = u.total_seconds - u.ttft_seconds;
    ++turns;
    total_prompt += turn->prompt_tokens;
    total_cached += u.cached_tokens;
    total_prefill_s += u.ttft_seconds;
    std::printf("\n[turn %d: prompt %lld tokens = %lld cached + %lld computed, first token after %.0f ms; %lld tokens at %.1f tok/s]\n",
                turns, static_cast<long long>(turn->prompt_tokens), static_cast<long long>(u.cached_tokens),
                static_cast<long long>(turn->prompt_tokens - u.cached_tokens), u.ttft_seconds * 1e3,
                static_cast<long long>(u.completion_tokens), u.completion_tokens > 1 && decode_s > 0 ? (u.completion_tokens - 1) / decode_s : 0.0);
  }
  std::printf("\n");
  if (turns > 0)
    std::printf("[%d turns: %lld prompt tokens, %lld (%.0f%%) from the prefix cache, %lld computed; %.2f s to first tokens]\n", turns,
                static_cast<long long>(total_prompt), static_cast<long long>(total_cached),
                100.0 * total_cached / std::max<int64_t>(1, total_prompt), static_cast<long long>(total_prompt - total_cached),
                total_prefill_s);
}

}  // namespace

void RegisterChat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->engine.kv_tokens = 8192;  // one conversation
  o->engine.max_running = 1;
  ChatServingDefaults(&o->engine);
  auto* cmd = app.add_subcommand("chat", "interactive chat through the engine and its prefix cache: one user turn per line "
                                         "of input, replies streamed, each turn's prompt, cached and computed tokens shown");
  AddModelOptions(cmd, &o->model, /*positional_model=*/true);
  AddTokenizerOptions(cmd, &o->model);
  AddEngineOptions(cmd, &o->engine);
  cmd->add_option("--system", o->system, "system message");
  cmd->add_option("--chat-template", o->chat_template, "chatml|llama3|llama2 (default: the model's)");
  AddChecked(cmd, "--max-tokens,-n", o->max_tokens, "tokens per reply", CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p);
  cmd->add_option("--seed", o->sampling.seed);
  cmd->callback([o] { RunChat(*o); });
}

}  // namespace radixlm::cli
