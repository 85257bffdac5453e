// The input files of the offline scoring commands (`radixlm rerank`, `radixlm embed`), read and
// rendered in the Qwen3-Reranker / Qwen3-Embedding formats (scoring_format.h). Errors name the
// file and line (or array element).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/scoring_format.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::tokenizer {

struct RerankQuery {
  std::string query;
  std::vector<std::string> documents;
};

// JSONL of {"query", "documents": [...]}, or a JSON array of {"query", "hits": [{"content"}]}
// (rank_llm's BM25 run files). No queries, or a line of another shape, is an error.
core::StatusOr<std::vector<RerankQuery>> ReadRerankQueries(const std::string& path);

struct RerankPairs {
  std::vector<std::vector<int32_t>> pairs;
  std::vector<size_t> query_of;
};
// The pairs of the first nq queries (at most `passages` passages each; 0: all), rendered.
RerankPairs RenderRerankPairs(const std::vector<RerankQuery>& queries, size_t nq, int passages, const RerankerFormat& format,
                              const Tokenizer& tok, const std::string& instruction, int64_t max_tokens);

// embed --input: one JSON string or {"text": string} per line, each text with its line.
struct EmbedTexts {
  std::vector<std::string> texts;
  std::vector<int> lines;
};
core::StatusOr<EmbedTexts> ReadEmbedTexts(const std::string& path);
// Each text in the Qwen3-Embedding format; an input too long (unless truncate) or empty is an
// error naming its line.
core::StatusOr<std::vector<std::vector<int32_t>>> RenderEmbedInputs(const EmbedTexts& in, const Tokenizer& tok,
                                                                    const std::string& instruction, bool last,
                                                                    int64_t max_tokens, bool truncate,
                                                                    const std::string& path);

}  // namespace radixlm::tokenizer
