#include "tokenizer/scoring_format.h"

#include <algorithm>

namespace radixlm::tokenizer {
namespace {

core::StatusOr<int32_t> SingleToken(const Tokenizer& tok, const std::string& word) {
  const std::vector<int32_t> ids = tok.Encode(word, /*add_special=*/false);
  if (ids.size() != 1) return core::InvalidArgument("'" + word + "' is not a single token of this tokenizer");
  return ids[0];
}

// The end-of-text token Qwen3-Embedding's tokenizer appends; the tokenizer's EOS otherwise.
int32_t EndOfText(const Tokenizer& tok) {
  const int32_t id = tok.TokenId("<|endoftext|>");
  return id >= 0 ? id : tok.eos_id();
}

}  // namespace

core::StatusOr<RerankerFormat> MakeRerankerFormat(const Tokenizer& tok) {
  RerankerFormat f;
  auto yes = SingleToken(tok, "yes");
  if (!yes.ok()) return yes.status();
  auto no = SingleToken(tok, "no");
  if (!no.ok()) return no.status();
  f.yes_id = *yes;
  f.no_id = *no;
  f.prefix = tok.Encode(
      "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
      "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n",
      false);
  f.suffix = tok.Encode("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", false);
  return f;
}

std::vector<int32_t> RenderRerankPair(const RerankerFormat& format, const Tokenizer& tok,
                                      std::string_view instruction, std::string_view query,
                                      std::string_view document, int64_t max_tokens) {
  std::string body = "<Instruct>: ";
  body.append(instruction).append("\n<Query>: ").append(query).append("\n<Document>: ").append(document);
  const std::vector<int32_t> ids = tok.Encode(body, false);
  std::vector<int32_t> out = format.prefix;
  const int64_t room = std::max<int64_t>(0, max_tokens - static_cast<int64_t>(format.prefix.size() + format.suffix.size()));
  out.insert(out.end(), ids.begin(), ids.begin() + std::min<int64_t>(room, static_cast<int64_t>(ids.size())));
  out.insert(out.end(), format.suffix.begin(), format.suffix.end());
  return out;
}

core::StatusOr<std::vector<int32_t>> RenderEmbeddingInput(const Tokenizer& tok,
                                                          std::string_view instruction, std::string_view text,
                                                          bool append_eos, int64_t max_tokens, bool truncate) {
  std::string s;
  if (!instruction.empty()) s.append("Instruct: ").append(instruction).append("\nQuery:");
  s.append(text);
  std::vector<int32_t> ids = tok.Encode(s, false);
  const int64_t total = static_cast<int64_t>(ids.size()) + (append_eos ? 1 : 0);
  if (total > max_tokens) {
    if (!truncate)
      return core::OutOfRange("input has " + std::to_string(total) + " tokens; the limit is " + std::to_string(max_tokens) +
                              " (set truncate to cut it)");
    ids.resize(std::max<int64_t>(0, max_tokens - (append_eos ? 1 : 0)));
  }
  if (append_eos) ids.push_back(EndOfText(tok));
  return ids;
}

}  // namespace radixlm::tokenizer
