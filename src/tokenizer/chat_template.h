// Chat templates of the supported families, rendered by hand rather than by a Jinja engine:
// ChatML (Qwen2/2.5/3), the Llama-3 header format and Llama-2 [INST]. The family is chosen
// from the model's own template text (tokenizer_config.json's chat_template or GGUF's
// tokenizer.chat_template) by its marker tokens; a template that matches none is an error,
// never a silent guess. An explicit name overrides detection.
#pragma once

#include <span>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::tokenizer {

enum class ChatFormat { kChatMl, kLlama3, kLlama2 };

struct ChatMessage {
  std::string role;     // system, user, assistant (ChatML also allows tool)
  std::string content;
};

// `override_name`: "", "chatml", "llama3" or "llama2".
core::StatusOr<ChatFormat> DetectChatFormat(const std::string& template_text, const std::string& override_name = "");
const char* ChatFormatName(ChatFormat f);

// The prompt text, with special tokens spelled out (encode it with the tokenizer, which never
// splits them). With add_generation_prompt, ends with the assistant turn's header.
// content_ranges (optional): where each message's content landed in the text, in order, to
// encode it with special-token strings as text (Tokenizer::Encode's `literal`).
core::StatusOr<std::string> RenderChat(ChatFormat format, std::span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::vector<TextRange>* content_ranges = nullptr);

}  // namespace radixlm::tokenizer
