// Subcommands that speak text: tokenize, and chat (interactive, streaming).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "models/kv_store.h"
#include "runner/generator.h"
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

void RegisterTokenize(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string text, decode, input, output;
    bool json_out = false, add_special = false, skip_special = false, check_roundtrip = false, bench = false;
  };
  auto* o = new Opts;
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
  cmd->callback([o] {
    auto t = TokenizerOnly(o->model);
    ExitIfError(t.status());
    if (!o->decode.empty()) {
      auto ids = ParseIds(o->decode);
      ExitIfError(ids.status());
      for (int32_t id : *ids)
        if (id >= (*t)->vocab_size()) ExitIfError(core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary"));
      const std::string text = (*t)->Decode(*ids, o->skip_special);
      if (o->json_out) std::printf("%s\n", json({{"text", text}}).dump(-1, ' ', false, json::error_handler_t::replace).c_str());
      else std::printf("%s\n", text.c_str());
      return;
    }
    if (!o->input.empty() && o->bench) {
      std::ifstream in(o->input);
      if (!in) ExitIfError(core::NotFound(o->input + ": cannot open"));
      std::vector<std::string> texts;
      size_t bytes = 0;
      for (std::string line; std::getline(in, line);) {
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("text") || !j["text"].is_string()) continue;
        texts.push_back(j["text"].get<std::string>());
        bytes += texts.back().size();
      }
      if (texts.empty()) ExitIfError(core::InvalidArgument(o->input + ": no {\"text\": ...} lines"));
      (*t)->Encode(texts[0]);  // warm-up, as the reference run does
      size_t tokens = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& text : texts) tokens += (*t)->Encode(text).size();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s\n", json({{"tokenizer", (*t)->name()}, {"bytes", bytes}, {"tokens", tokens}, {"seconds", s},
                                {"mb_per_s", bytes / 1e6 / s}}).dump().c_str());
      return;
    }
    if (!o->input.empty()) {
      std::ifstream in(o->input);
      if (!in) ExitIfError(core::NotFound(o->input + ": cannot open"));
      std::ofstream file;
      if (!o->output.empty()) file.open(o->output);
      std::ostream& out = o->output.empty() ? std::cout : file;
      std::string line;
      int roundtrip_failures = 0;
      for (int n = 1; std::getline(in, line); ++n) {
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("text") || !j["text"].is_string())
          ExitIfError(core::InvalidArgument(o->input + ":" + std::to_string(n) + ": expected {\"text\": string}"));
        const std::string text = j["text"].get<std::string>();
        const auto ids = (*t)->Encode(text, o->add_special);
        out << json({{"ids", ids}}).dump() << "\n";
        if (o->check_roundtrip && (*t)->Decode(ids) != (*t)->RoundTripForm(text) && ++roundtrip_failures <= 3)
          std::fprintf(stderr, "line %d does not round-trip: %s\n", n, json(text).dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200).c_str());
      }
      if (roundtrip_failures) {
        std::fprintf(stderr, "radixlm: %d line(s) of %s do not decode back to their text\n", roundtrip_failures, o->input.c_str());
        std::exit(1);
      }
      return;
    }
    const auto ids = (*t)->Encode(o->text, o->add_special);
    if (o->json_out) {
      std::printf("%s\n", json({{"ids", ids}}).dump().c_str());
      return;
    }
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
    std::printf("\n");
  });
}

void RegisterChat(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string system, chat_template;
    runner::GenerateOptions gen;
  };
  auto* o = new Opts;
  o->gen.max_tokens = 64;
  auto* cmd = app.add_subcommand("chat", "interactive chat: one user turn per line of input, replies streamed");
  AddModelOptions(cmd, &o->model);
  AddTokenizerOptions(cmd, &o->model);
  cmd->add_option("--system", o->system, "system message");
  cmd->add_option("--chat-template", o->chat_template, "chatml|llama3|llama2 (default: the model's)");
  cmd->add_option("--max-tokens,-n", o->gen.max_tokens, "tokens per reply")->capture_default_str();
  cmd->add_option("--temperature", o->gen.sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", o->gen.sampling.top_p);
  cmd->add_option("--seed", o->gen.sampling.seed);
  cmd->callback([o] {
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    auto& model = *loaded.model;
    const tokenizer::Tokenizer& tok = *loaded.tokenizer;
    auto format = tokenizer::DetectChatFormat(tok.chat_template(), o->chat_template);
    ExitIfError(format.status());
    o->gen.stop_ids = EndOfTurnIds(tok);
    core::ThreadPool pool(o->model.threads);
    const int64_t ctx = std::min<int64_t>(model.config().max_context, 8192);
    const int block_tokens = 16;
    models::KvStore kv(model.config(), {static_cast<int>((ctx + block_tokens - 1) / block_tokens), block_tokens, KvDtypeOf(o->model)});
    cache::BlockPool blocks({kv.n_blocks(), block_tokens});
    runner::Generator gen(model, pool, kv, blocks);
    std::vector<tokenizer::ChatMessage> history;
    if (!o->system.empty()) history.push_back({"system", o->system});
    std::fprintf(stderr, "%s on %d threads, %s chat template; one message per line, Ctrl-D to end\n",
                 model.config().name.c_str(), pool.size(), tokenizer::ChatFormatName(*format));
    if (o->model.model.rfind("random:", 0) == 0)
      std::fprintf(stderr, "(random weights: the replies are noise; the token ids, the streaming and the costs are real)\n");
    std::string line;
    int turn = 0;
    while (std::printf("\n> "), std::fflush(stdout), std::getline(std::cin, line)) {
      if (line.empty()) continue;
      history.push_back({"user", line});
      auto prompt_text = tokenizer::RenderChat(*format, history, /*add_generation_prompt=*/true);
      ExitIfError(prompt_text.status());
      const auto prompt = tok.Encode(*prompt_text);
      if (static_cast<int64_t>(prompt.size()) + o->gen.max_tokens > ctx) {
        std::printf("[conversation reached the %lld-token context; start a new one]\n", static_cast<long long>(ctx));
        break;
      }
      if (!isatty(0)) std::printf("%s", line.c_str());  // echo scripted input so the log reads as a chat
      std::printf("\n");
      tokenizer::StreamDecoder stream(tok);
      std::string reply;
      auto r = gen.Generate(prompt, o->gen, [&](int32_t id) {
        const std::string piece = stream.Push(id);
        reply += piece;
        std::printf("%s", piece.c_str());
        std::fflush(stdout);
        return true;
      });
      ExitIfError(r.status());
      reply += stream.Finish();
      history.push_back({"assistant", reply});
      std::printf("\n[turn %d: prompt %zu tokens in %.0f ms (%.0f tok/s); %zu tokens at %.1f tok/s]\n", ++turn,
                  prompt.size(), r->prefill_seconds * 1e3, prompt.size() / r->prefill_seconds, r->tokens.size(),
                  r->decode_steps ? r->decode_steps / r->decode_seconds : 0.0);
    }
    std::printf("\n");
  });
}

}  // namespace radixlm::cli
