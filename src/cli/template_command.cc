// `radixlm template render`: prints exactly what a chat template renders for a context, as
// Hugging Face's apply_chat_template renders it (the Jinja engine in src/jinja/).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "jinja/template.h"
#include "jinja/value.h"
#include "models/presets.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {
namespace {

struct TemplateOptions {
  std::string template_file, context_file;
  bool jsonl = false;  // the context file holds one context per line; one JSON result per line out
  int64_t now = -1;  // strftime_now's time (Unix seconds); -1: the clock
  ModelOptions model;
  bool model_given = false;
};

core::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json ParseContext(const std::string& text, const std::string& where) {
  nlohmann::ordered_json context;
  try {
    context = nlohmann::ordered_json::parse(text);
  } catch (const std::exception& e) {
    ExitIfError(core::InvalidArgument(where + ": not JSON: " + e.what()));
  }
  if (!context.is_object()) ExitIfError(core::InvalidArgument(where + ": the context must be a JSON object"));
  return context;
}

// --jsonl: {"text": ...} or {"error": "<class>", "message": ...} per context line.
int RenderLines(const tokenizer::ChatTemplate& tmpl, const std::string& contexts, const jinja::RenderOptions& ro,
                const std::string& where) {
  std::istringstream in(contexts);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    jinja::JinjaError err;
    auto text = tmpl.Render(ParseContext(line, where), ro, &err);
    const nlohmann::ordered_json out = text.ok() ? nlohmann::ordered_json{{"text", *text}}
                                                 : nlohmann::ordered_json{{"error", err.kind}, {"message", err.message}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  return 0;
}

int RunRender(const TemplateOptions& o) {
  auto context_text = ReadAll(o.context_file);
  ExitIfError(context_text.status());
  core::StatusOr<tokenizer::ChatTemplate> tmpl = core::InvalidArgument("no template");
  if (!o.template_file.empty()) {
    auto source = ReadAll(o.template_file);
    ExitIfError(source.status());
    tmpl = tokenizer::ChatTemplate::FromSource(*source);
  } else {
    int64_t vocab = 0;
    if (o.model.model.rfind("random:", 0) == 0)
      if (auto c = models::PresetConfig(o.model.model.substr(7)); c.ok()) vocab = c->vocab_size;
    auto tok = LoadTokenizer(o.model, vocab);
    ExitIfError(tok.status());
    tmpl = tokenizer::ChatTemplate::ForTokenizer(**tok);
  }
  ExitIfError(tmpl.status());
  jinja::RenderOptions ro;
  if (o.now >= 0) ro.now = static_cast<std::time_t>(o.now);
  if (o.jsonl) return RenderLines(*tmpl, *context_text, ro, o.context_file);
  auto text = tmpl->Render(ParseContext(*context_text, o.context_file), ro);
  if (!text.ok()) {
    std::fprintf(stderr, "radixlm: template error: %s\n", text.status().message().c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

// `template cases`: each line {"template", "context", "now"?} rendered by the Jinja engine alone
// (no chat-template conventions): {"text"} or {"error": class, "message"} per line. The
// differential fuzzer's engine side (fuzz/template_diff.py); every case within the render bounds.
int RunCases(const std::string& path) {
  auto all = ReadAll(path);
  ExitIfError(all.status());
  std::istringstream in(*all);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto row = nlohmann::ordered_json::parse(line, nullptr, false);
    if (!row.is_object() || !row.contains("template") || !row["template"].is_string())
      ExitIfError(core::InvalidArgument(path + ": each line needs a \"template\" string"));
    jinja::RenderOptions ro;
    ro.now = static_cast<std::time_t>(row.value("now", int64_t{1736942400}));
    nlohmann::ordered_json out;
    auto t = jinja::Template::Parse(row["template"].get<std::string>());
    if (!t.ok()) {
      const std::string m = t.status().message();
      const size_t colon = m.find(": ");
      out = {{"error", m.substr(0, colon)}, {"message", colon == std::string::npos ? m : m.substr(colon + 2)}};
    } else {
      jinja::JinjaError err;
      const auto context = row.value("context", nlohmann::ordered_json::object());
      auto text = t->Render(context, ro, &err);
      out = text.ok() ? nlohmann::ordered_json{{"text", *text}} : nlohmann::ordered_json{{"error", err.kind}, {"message", err.message}};
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void RegisterTemplate(CLI::App& app) {
  auto* cmd = app.add_subcommand("template", "chat templates (the model's own Jinja template)");
  cmd->require_subcommand(1);
  auto* render = cmd->add_subcommand("render", "print exactly what a chat template renders for a context");
  auto o = std::make_shared<TemplateOptions>();
  auto* file = render->add_option("--template", o->template_file, "a Jinja template file");
  auto* model = render->add_option("-m,--model", o->model.model, "a model (GGUF, HF folder, random:PRESET): its own template and tokens");
  file->excludes(model);
  render->add_option("--tokenizer", o->model.tokenizer, "tokenizer (family name, tokenizer.json, HF folder or GGUF)");
  render->add_option("--context", o->context_file,
                     "JSON object of the variables handed to the template (messages, tools, add_generation_prompt, "
                     "bos_token, eos_token, keyword arguments); with -m the model's template and tokens fill what it leaves out")
      ->required();
  render->add_option("--now", o->now, "strftime_now's time, Unix seconds (default: the clock)");
  render->add_flag("--jsonl", o->jsonl, "the context file has one context per line; print one JSON result per line "
                                        "({\"text\"} or {\"error\", \"message\"})");
  auto* cases = cmd->add_subcommand("cases", "render JSONL cases {\"template\", \"context\"} with the Jinja engine alone "
                                            "(one {\"text\"} or {\"error\", \"message\"} per line)");
  auto cases_file = std::make_shared<std::string>();
  cases->add_option("--input", *cases_file, "JSONL of cases")->required();
  cases->callback([cases_file] {
    std::fflush(stdout);
    std::exit(RunCases(*cases_file));
  });
  render->callback([o, file, model]() {
    if (file->count() == 0 && model->count() == 0) ExitIfError(core::InvalidArgument("template render: pass --template FILE or -m MODEL"));
    std::fflush(stdout);
    std::exit(RunRender(*o));
  });
}

}  // namespace radixlm::cli
