#include "tokenizer/scoring_inputs.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace radixlm::tokenizer {

namespace {

using nlohmann::json;

// A parser's message cut to a readable length: for an unterminated string nlohmann quotes
// everything it read, which can be a whole megabyte line.
std::string Brief(const std::string& what) { return what.size() <= 300 ? what : what.substr(0, 300) + "..."; }

}  // namespace

// JSONL of {"query", "documents": [...]}, or a JSON array of {"query", "hits": [{"content"}]}
// (rank_llm's BM25 run files, as in ../shared/data/rerank).
core::StatusOr<std::vector<RerankQuery>> ReadRerankQueries(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<RerankQuery> out;
  // One query; a shape other than the two above is an error, not a query with no passages.
  auto add = [&](const json& j, const std::string& where) -> core::Status {
    auto bad = [&](const std::string& why) { return core::InvalidArgument(where + ": " + why); };
    if (!j.is_object() || !j.contains("query") || !j["query"].is_string()) return bad("needs a string 'query'");
    RerankQuery q;
    q.query = j["query"].get<std::string>();
    if (j.contains("documents")) {
      if (!j["documents"].is_array()) return bad("'documents' must be a list of strings");
      for (const auto& d : j["documents"]) {
        if (!d.is_string()) return bad("'documents' must be a list of strings");
        q.documents.push_back(d.get<std::string>());
      }
    } else if (j.contains("hits") && j["hits"].is_array()) {
      for (const auto& h : j["hits"]) {
        if (!h.is_object() || !h.contains("content") || !h["content"].is_string())
          return bad("each of 'hits' needs a string 'content'");
        q.documents.push_back(h["content"].get<std::string>());
      }
    } else {
      return bad("needs 'documents' (a list of strings) or 'hits' (a list of {content})");
    }
    out.push_back(std::move(q));
    return core::Status::Ok();
  };
  try {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
      const json all = json::parse(text);
      for (size_t i = 0; i < all.size(); ++i)
        if (core::Status st = add(all[i], path + " element " + std::to_string(i)); !st.ok()) return st;
    } else {
      std::istringstream lines(text);
      int line_no = 0;
      for (std::string line; std::getline(lines, line);) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(line_no);
        try {
          if (core::Status st = add(json::parse(line), where); !st.ok()) return st;
        } catch (const json::exception& e) {
          return core::InvalidArgument(where + ": " + Brief(e.what()));
        }
      }
    }
  } catch (const json::exception& e) {
    return core::InvalidArgument(path + ": " + Brief(e.what()));
  }
  if (out.empty()) return core::InvalidArgument(path + ": no queries");
  return out;
}

// embed --input: one JSON string or {"text": string} per line, each text with its line (for errors).

core::StatusOr<EmbedTexts> ReadEmbedTexts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound("cannot open " + path);
  EmbedTexts out;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    try {
      const json j = json::parse(line);
      if (j.is_string()) out.texts.push_back(j.get<std::string>());
      else if (j.is_object() && j.contains("text") && j["text"].is_string()) out.texts.push_back(j["text"].get<std::string>());
      else return core::InvalidArgument(where + "expected a JSON string or {\"text\": string}");
    } catch (const json::exception& e) {
      return core::InvalidArgument(where + Brief(e.what()));
    }
    out.lines.push_back(line_no);
  }
  if (out.texts.empty()) return core::InvalidArgument(path + ": no inputs");
  return out;
}

// Each text in the Qwen3-Embedding format; an input too long or empty is an error naming its line.
core::StatusOr<std::vector<std::vector<int32_t>>> RenderEmbedInputs(const EmbedTexts& in, const Tokenizer& tok,
                                                                    const std::string& instruction, bool last,
                                                                    int64_t max_tokens, bool truncate,
                                                                    const std::string& path) {
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < in.texts.size(); ++i) {
    auto ids = RenderEmbeddingInput(tok, instruction, in.texts[i], last, max_tokens, truncate);
    const std::string where = path + ":" + std::to_string(in.lines[i]) + ": ";
    if (!ids.ok()) return core::OutOfRange(where + ids.status().message());
    if (ids->empty()) return core::InvalidArgument(where + "empty input");
    inputs.push_back(std::move(*ids));
  }
  return inputs;
}

// rerank: the query/passage pairs rendered, each with its query's index.

RerankPairs RenderRerankPairs(const std::vector<RerankQuery>& queries, size_t nq, int passages, const RerankerFormat& format,
                              const Tokenizer& tok, const std::string& instruction, int64_t max_tokens) {
  RerankPairs out;
  for (size_t qi = 0; qi < nq; ++qi) {
    const RerankQuery& q = queries[qi];
    const size_t nd = passages > 0 ? std::min<size_t>(passages, q.documents.size()) : q.documents.size();
    for (size_t di = 0; di < nd; ++di) {
      out.pairs.push_back(RenderRerankPair(format, tok, instruction, q.query, q.documents[di], max_tokens));
      out.query_of.push_back(qi);
    }
  }
  return out;
}

}  // namespace radixlm::tokenizer
