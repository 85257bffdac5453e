#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

namespace radixlm::tokenizer {
namespace {

// The published templates, verbatim: ChatML as Qwen2 / OpenAI describe it (no tools),
// meta-llama/Meta-Llama-3-8B-Instruct's and meta-llama/Llama-2-7b-chat-hf's chat_template.
struct Builtin {
  const char* name;
  const char* source;
};
constexpr Builtin kBuiltins[] = {
    {"chatml",
     "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
     "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
     "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
     "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
};

std::string SpecialText(const Tokenizer& tok, int32_t id) { return id >= 0 ? tok.TokenBytes(id) : ""; }

}  // namespace

core::StatusOr<ChatTemplate> ChatTemplate::FromSource(const std::string& source, const std::string& bos, const std::string& eos) {
  RADIXLM_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
  ChatTemplate c;
  c.template_ = std::make_shared<const jinja::Template>(std::move(t));
  c.source_ = source;
  c.bos_ = bos;
  c.eos_ = eos;
  return c;
}

core::StatusOr<ChatTemplate> ChatTemplate::Named(const std::string& name, const std::string& bos, const std::string& eos) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return FromSource(b.source, bos, eos);
  return core::NotFound("no built-in chat template '" + name + "'");
}

std::vector<std::string> ChatTemplate::BuiltinNames() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.push_back(b.name);
  return names;
}

core::StatusOr<ChatTemplate> ChatTemplate::ForTokenizer(const Tokenizer& tok, const std::string& override_name) {
  const std::string bos = SpecialText(tok, tok.bos_id()), eos = SpecialText(tok, tok.eos_id());
  if (override_name.empty()) {
    if (tok.chat_template().empty())
      return core::NotFound("the model has no chat template; pass --chat-template (chatml, llama3, llama2 or a .jinja file)");
    return FromSource(tok.chat_template(), bos, eos);
  }
  if (auto b = Named(override_name, bos, eos); b.ok()) return b;
  std::ifstream in(override_name, std::ios::binary);
  if (!in) return core::InvalidArgument("unknown chat template '" + override_name + "' (chatml, llama3, llama2 or a .jinja file)");
  std::stringstream ss;
  ss << in.rdbuf();
  return FromSource(ss.str(), bos, eos);
}

core::StatusOr<std::string> ChatTemplate::Render(nlohmann::ordered_json variables, const jinja::RenderOptions& options,
                                                 jinja::JinjaError* error) const {
  if (!variables.is_object()) return core::InvalidArgument("chat template variables must be an object");
  if (!variables.contains("tools")) variables["tools"] = nullptr;
  if (!variables.contains("documents")) variables["documents"] = nullptr;
  if (!variables.contains("add_generation_prompt")) variables["add_generation_prompt"] = false;
  if (!bos_.empty() && !variables.contains("bos_token")) variables["bos_token"] = bos_;
  if (!eos_.empty() && !variables.contains("eos_token")) variables["eos_token"] = eos_;
  return template_->Render(variables, options, error);
}

core::StatusOr<std::string> ChatTemplate::RenderMessages(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) vars["messages"].push_back({{"role", m.role}, {"content", m.content}});
  vars["add_generation_prompt"] = add_generation_prompt;
  return Render(std::move(vars));
}

std::vector<TextRange> LocateContents(const std::string& text, const std::vector<std::string>& contents) {
  std::vector<TextRange> ranges;
  size_t from = 0;
  for (const std::string& c : contents) {
    // As given, else trimmed (templates that strip content).
    const size_t b = c.find_first_not_of(" \t\n\r"), e = c.find_last_not_of(" \t\n\r");
    if (b == std::string::npos) continue;
    for (const std::string& piece : {c, c.substr(b, e - b + 1)}) {
      const size_t at = text.find(piece, from);
      if (at == std::string::npos) continue;
      ranges.push_back({at, at + piece.size()});
      from = at + piece.size();
      break;
    }
  }
  return ranges;
}

std::vector<int32_t> ContinueTokens(const Tokenizer& tok, const std::string& prev_text,
                                    const std::vector<int32_t>& prev_tokens, const std::vector<int32_t>& reply,
                                    const std::string& text) {
  if (prev_tokens.empty() || text.compare(0, prev_text.size(), prev_text) != 0) return tok.Encode(text);
  const std::string tail = text.substr(prev_text.size());
  // The reply's raw bytes token by token (Decode would drop a SentencePiece leading space).
  size_t keep = 0, covered = 0;
  std::string bytes;
  for (size_t k = 0; k < reply.size(); ++k) {
    bytes += tok.TokenBytes(reply[k]);
    if (bytes.size() > tail.size()) break;
    if (tail.compare(0, bytes.size(), bytes) == 0) keep = k + 1, covered = bytes.size();
  }
  std::vector<int32_t> out = prev_tokens;
  out.insert(out.end(), reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(keep));
  const std::vector<int32_t> rest = tok.Encode(std::string_view(tail).substr(covered));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace radixlm::tokenizer
