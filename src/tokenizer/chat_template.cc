#include "tokenizer/chat_template.h"

#include <vector>

namespace radixlm::tokenizer {
namespace {

std::string Trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

core::Status CheckRoles(std::span<const ChatMessage> messages, bool allow_tool) {
  for (const ChatMessage& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && !(allow_tool && m.role == "tool"))
      return core::InvalidArgument("unknown chat role '" + m.role + "'");
  return core::Status::Ok();
}

}  // namespace

const char* ChatFormatName(ChatFormat f) {
  switch (f) {
    case ChatFormat::kChatMl: return "chatml";
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kLlama2: return "llama2";
  }
  return "?";
}

core::StatusOr<ChatFormat> DetectChatFormat(const std::string& t, const std::string& override_name) {
  if (override_name == "chatml") return ChatFormat::kChatMl;
  if (override_name == "llama3") return ChatFormat::kLlama3;
  if (override_name == "llama2") return ChatFormat::kLlama2;
  if (!override_name.empty())
    return core::InvalidArgument("unknown chat template '" + override_name + "' (chatml, llama3, llama2)");
  if (t.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatMl;
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatFormat::kLlama3;
  if (t.find("[INST]") != std::string::npos) return ChatFormat::kLlama2;
  if (t.empty())
    return core::NotFound("the model has no chat template; pass one of chatml, llama3, llama2 explicitly");
  return core::Unimplemented("unrecognised chat template (not ChatML, Llama-3 or Llama-2); pass one explicitly");
}

core::StatusOr<std::string> RenderChat(ChatFormat format, std::span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::vector<TextRange>* content_ranges) {
  std::string out;
  std::vector<TextRange> ranges;
  auto content = [&](std::string_view text) {  // appends a message's content, noting where it went
    if (!text.empty()) ranges.push_back({out.size(), out.size() + text.size()});
    out += text;
  };
  auto done = [&]() -> core::StatusOr<std::string> {
    if (content_ranges) *content_ranges = std::move(ranges);
    return out;
  };
  switch (format) {
    case ChatFormat::kChatMl:
      RADIXLM_RETURN_IF_ERROR(CheckRoles(messages, /*allow_tool=*/true));
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n";
        content(m.content);
        out += "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return done();
    case ChatFormat::kLlama3:
      RADIXLM_RETURN_IF_ERROR(CheckRoles(messages, /*allow_tool=*/false));
      out = "<|begin_of_text|>";
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        content(Trim(m.content));
        out += "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return done();
    case ChatFormat::kLlama2: {
      RADIXLM_RETURN_IF_ERROR(CheckRoles(messages, /*allow_tool=*/false));
      // Meta's format: an optional system message folded into the first user turn; turns must
      // alternate user/assistant.
      size_t first = 0;
      std::string system;
      if (!messages.empty() && messages[0].role == "system") {
        system = messages[0].content;
        first = 1;
      }
      for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const bool expect_user = (i - first) % 2 == 0;
        if ((m.role == "user") != expect_user || m.role == "system")
          return core::InvalidArgument("Llama-2 chat turns must alternate user/assistant after an optional system message");
        std::string text = m.content;
        if (i == first && first == 1) text = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + text;
        out += m.role == "user" ? "<s>[INST] " : " ";
        content(Trim(text));  // (the system message and its <<SYS>> markers, plain text, included)
        out += m.role == "user" ? " [/INST]" : " </s>";
      }
      // The template ends after [/INST]; the assistant's answer follows without a header.
      (void)add_generation_prompt;
      return done();
    }
  }
  return core::InvalidArgument("unknown chat format");
}

}  // namespace radixlm::tokenizer
