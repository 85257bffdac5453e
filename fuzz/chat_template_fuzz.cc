// Chat templates (tokenizer/chat_template.h): DetectChatFormat on a model's template text and
// RenderChat on messages. The input is text:
//   line 1: the override name ("", chatml, llama3, llama2 or anything); a leading '+' asks for
//           the generation prompt
//   then the template text, up to a line "%%"
//   then messages separated by lines "%%", each "role\ncontent".
// A render must give content ranges that are sorted, disjoint and inside the text (what
// Tokenizer::Encode requires of them), each covering text of its message; the text is then
// encoded with them as the server does (BuildPrompt).
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "tokenizer/chat_template.h"

namespace {

using radixlm::tokenizer::ChatFormat;
using radixlm::tokenizer::ChatMessage;
using radixlm::tokenizer::TextRange;

std::vector<std::string_view> SplitOn(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t next = s.find(sep, at);
    parts.push_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return parts;
    at = next + sep.size();
  }
}

std::string Trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  return b == std::string::npos ? std::string() : s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void CheckRanges(ChatFormat f, const std::string& text, const std::vector<TextRange>& ranges,
                 std::span<const ChatMessage> messages) {
  if (ranges.size() > messages.size()) radixlm::fuzz::Fail("more content ranges than messages");
  size_t end = 0;
  for (const TextRange& r : ranges) {
    if (r.begin < end || r.end < r.begin || r.end > text.size())
      radixlm::fuzz::Fail("content ranges not sorted, disjoint and inside the text");
    end = r.end;
  }
  if (f == ChatFormat::kLlama2) return;  // (the system message is folded into the first turn)
  // ChatML and Llama 3: one range per message with content (Llama 3 trims it), exactly over it.
  std::vector<std::string> contents;
  for (const ChatMessage& m : messages) {
    std::string c = f == ChatFormat::kLlama3 ? Trimmed(m.content) : m.content;
    if (!c.empty()) contents.push_back(std::move(c));
  }
  if (contents.size() != ranges.size()) radixlm::fuzz::Fail("a content range per message with content");
  for (size_t i = 0; i < ranges.size(); ++i)
    if (text.compare(ranges[i].begin, ranges[i].end - ranges[i].begin, contents[i]) != 0)
      radixlm::fuzz::Fail("content range " + std::to_string(i) + " does not cover its message's content");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  std::string_view override_name = input.substr(0, eol);
  const std::string_view rest = eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1);
  const bool add_generation_prompt = !override_name.empty() && override_name[0] == '+';
  if (add_generation_prompt) override_name.remove_prefix(1);
  const std::vector<std::string_view> parts = SplitOn(rest, "\n%%\n");
  std::vector<ChatMessage> messages;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t nl = parts[i].find('\n');
    messages.push_back({std::string(parts[i].substr(0, nl)),
                        nl == std::string_view::npos ? std::string() : std::string(parts[i].substr(nl + 1))});
  }

  auto format = radixlm::tokenizer::DetectChatFormat(std::string(parts[0]), std::string(override_name));
  // Undetected: every family still renders these messages (an explicit name picks one).
  std::vector<ChatFormat> formats = {ChatFormat::kChatMl, ChatFormat::kLlama3, ChatFormat::kLlama2};
  if (format.ok()) formats = {*format};
  for (ChatFormat f : formats) {
    std::vector<TextRange> ranges;
    auto text = radixlm::tokenizer::RenderChat(f, messages, add_generation_prompt, &ranges);
    if (!text.ok()) continue;
    CheckRanges(f, *text, ranges, messages);
    const auto& tok = radixlm::fuzz::MinimalTokenizer();
    (void)tok.Encode(*text, /*add_special=*/false, ranges);
    (void)radixlm::tokenizer::ChatFormatName(f);
  }
  return 0;
}
