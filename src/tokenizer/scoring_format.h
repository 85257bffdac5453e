// The prompt formats of Qwen3-Embedding and Qwen3-Reranker, rendered to token ids.
//
// Reranker (Qwen3-Reranker's model card): a system line asking for a "yes"/"no" judgement,
// then "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}" as the user turn,
// then the assistant turn with an empty think block; the relevance is softmax over the logits
// of the "yes" and "no" tokens at the last position, both looked up in the tokenizer.
// Embedding (Qwen3-Embedding): queries as "Instruct: {instruction}\nQuery:{text}", documents as
// the bare text; the tokenizer's end-of-text token appended (last-token pooling reads it).
// Callers: the rerank/embed commands and the server's /rerank, /embed, /v1/embeddings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::tokenizer {

inline constexpr std::string_view kDefaultRerankInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";

struct RerankerFormat {
  std::vector<int32_t> prefix, suffix;  // around the <Instruct>/<Query>/<Document> body
  int32_t yes_id = -1, no_id = -1;
};

// Errors when "yes" or "no" is not a single token of this tokenizer.
core::StatusOr<RerankerFormat> MakeRerankerFormat(const Tokenizer& tok);

// prefix + body + suffix; the body is cut so the whole fits max_tokens.
std::vector<int32_t> RenderRerankPair(const RerankerFormat& format, const Tokenizer& tok,
                                      std::string_view instruction, std::string_view query,
                                      std::string_view document, int64_t max_tokens);

// The input's ids (query format when `instruction` is non-empty) with the end-of-text token
// appended when `append_eos`. Longer than max_tokens: cut to fit when `truncate` (the
// end-of-text token kept), else OutOfRange.
core::StatusOr<std::vector<int32_t>> RenderEmbeddingInput(const Tokenizer& tok,
                                                          std::string_view instruction, std::string_view text,
                                                          bool append_eos, int64_t max_tokens, bool truncate);

}  // namespace radixlm::tokenizer
