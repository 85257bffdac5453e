// Chat templates: the model's own Jinja template (GGUF tokenizer.chat_template,
// tokenizer_config.json's chat_template, chat_template.jinja) rendered by the jinja module as
// Hugging Face's apply_chat_template renders it. A model without a template gets one of three
// built-ins only when named (--chat-template chatml | llama3 | llama2, or a .jinja file): the
// published ChatML, Llama-3-Instruct and Llama-2-chat templates, as Jinja text - there is no
// hand-written renderer to drift from a template.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::tokenizer {

struct ChatMessage {
  std::string role;  // system, user, assistant, tool (whatever the template accepts)
  std::string content;
};

class ChatTemplate {
 public:
  // A template's text, with the special-token strings handed to it as bos_token / eos_token
  // (empty: not defined). Error: a TemplateSyntaxError.
  static core::StatusOr<ChatTemplate> FromSource(const std::string& source, const std::string& bos = "",
                                                 const std::string& eos = "");
  // The tokenizer's own template and tokens, or `override_name`: chatml, llama3, llama2 or a path
  // to a .jinja file. A tokenizer without a template and no override: NotFound, naming the options.
  static core::StatusOr<ChatTemplate> ForTokenizer(const Tokenizer& tok, const std::string& override_name = "");
  // A built-in by name (chatml, llama3, llama2).
  static core::StatusOr<ChatTemplate> Named(const std::string& name, const std::string& bos = "", const std::string& eos = "");
  static std::vector<std::string> BuiltinNames();

  // Renders `variables` (messages, tools, add_generation_prompt, keyword arguments such as
  // enable_thinking) after filling what apply_chat_template always hands a template: tools and
  // documents (none when absent), add_generation_prompt (false), bos_token and eos_token.
  // A template error is InvalidArgument "<class>: <the template's message>" (error: its parts).
  core::StatusOr<std::string> Render(nlohmann::ordered_json variables, const jinja::RenderOptions& options = {},
                                     jinja::JinjaError* error = nullptr) const;
  // Plain role / content messages.
  core::StatusOr<std::string> RenderMessages(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  std::string source_, bos_, eos_;
};

// Where each of `contents` (message texts, in order) lies in the rendered `text`: searched in
// order, each after the previous one; a content the template changed (trimmed, cut) is not
// found and gets no range. Used to encode users' text with special-token strings as text
// (Tokenizer::Encode's `literal`).
std::vector<TextRange> LocateContents(const std::string& text, const std::vector<std::string>& contents);

// The next turn's prompt as a continuation of the tokens the model already holds: the previous
// prompt's tokens, then the reply's tokens as generated (as far as the new rendering repeats
// their text), then the rest encoded. Re-encoding the whole conversation would re-tokenise the
// reply (BPE need not reproduce generated tokens), and the cache, token-exact, would miss from
// there on; a hybrid model, whose cache holds states only at checkpoints, would miss entirely.
// llama.cpp's chat keeps its tokens the same way. Falls back to encoding the whole text when the
// rendering does not extend the previous one (e.g. an exchange was dropped). Used by `chat` and
// by the Responses API's previous_response_id.
std::vector<int32_t> ContinueTokens(const Tokenizer& tok, const std::string& prev_text, const std::vector<int32_t>& prev_tokens,
                                    const std::vector<int32_t>& reply, const std::string& text);

}  // namespace radixlm::tokenizer
