// The embedding and reranking APIs without a transport: a request body in, an HTTP status and a
// JSON body out. The server's routes (serve/scoring_routes.cc) and `radixlm batch` call the same
// code, so a batch line answers exactly what the route would.
//   /v1/embeddings {input: str | [str] | [int] | [[int]], encoding_format?: float|base64,
//                   dimensions?: n (leading dimensions, re-normalised), instruction?: str}
//   /embed  {inputs: str | [str], normalize?: true, truncate?: false, instruction?: str} -> [[f]]
//   /rerank {query, texts: [str], raw_scores?: false, return_text?: false, truncate?: false,
//            instruction?: str} -> [{index, score[, text]}] by descending score
// ("instruction" is radixlm's extension: the query instruction of the two formats.)
// Errors: OpenAI's object for /v1/embeddings, text-embeddings-inference's ({"error",
// "error_type"}) for /embed and /rerank, so each API's clients parse the errors they expect.
// Thread-safe: jobs go to the scoring service, which merges concurrent ones into batches.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/scoring_service.h"
#include "tokenizer/scoring_format.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

struct ApiAnswer {
  int status = 200;
  nlohmann::json body;
};

struct ScoringApiConfig {
  std::string model_name = "radixlm";
  std::string rerank_instruction = "Given a web search query, retrieve relevant passages that answer the query";
  std::string embed_query_instruction;  // empty: inputs are embedded as documents (bare text)
  engine::Pooling embed_pooling = engine::Pooling::kLastToken;
  // Inputs (texts, or passages of a rerank) one request may hold: a 2 MB request of tiny
  // inputs must not become a response and a batch hundreds of times its size.
  int64_t max_inputs = 2048;
};

// text-embeddings-inference's error body; error_type: "Validation" (422 / 413), "Overloaded"
// (429), "Backend" (500, 501), "Unhealthy" (503).
nlohmann::json TeiErrorBody(const std::string& message, const std::string& error_type);

enum class ScoringRoute { kEmbeddings, kEmbed, kRerank };

// A request made into a scoring job (validated and tokenized), with what shapes its answer; or,
// when invalid, the answer that refuses it. Batch jobs merge the jobs of requests that share
// prefixes into one (RadixMLP then computes the shared part once) and answer each from its part.
struct ScoringCall {
  ScoringRoute route = ScoringRoute::kEmbeddings;
  std::optional<ApiAnswer> refused;
  engine::ScoringJob job;
  std::string encoding = "float";  // /v1/embeddings
  int64_t dimensions = 0;          // /v1/embeddings: 0 = all
  bool raw_scores = false, return_text = false;  // /rerank
  nlohmann::json texts;            // /rerank with return_text
  int64_t tokens = 0;              // of all inputs
};

class ScoringApi {
 public:
  // Borrows both.
  ScoringApi(const tokenizer::Tokenizer& tok, engine::ScoringService& scoring, ScoringApiConfig config);
  ApiAnswer Embeddings(const nlohmann::json& body) const { return Call(ScoringRoute::kEmbeddings, body); }
  ApiAnswer Embed(const nlohmann::json& body) const { return Call(ScoringRoute::kEmbed, body); }
  ApiAnswer Rerank(const nlohmann::json& body) const { return Call(ScoringRoute::kRerank, body); }
  // Prepare, run on the scoring service, Answer.
  ApiAnswer Call(ScoringRoute route, const nlohmann::json& body) const;
  ScoringCall Prepare(ScoringRoute route, const nlohmann::json& body) const;
  // The answer to a prepared call from its job's result (or why the job failed).
  ApiAnswer Answer(const ScoringCall& call, core::StatusOr<engine::ScoringResult> result) const;
  engine::ScoringService& service() const { return scoring_; }

 private:
  // Each route's request into call->job (and the call's output options); the refusal, if any.
  std::optional<ApiAnswer> PrepareEmbeddings(const nlohmann::json& body, ScoringCall* call) const;
  std::optional<ApiAnswer> PrepareEmbed(const nlohmann::json& body, ScoringCall* call) const;
  std::optional<ApiAnswer> PrepareRerank(const nlohmann::json& body, ScoringCall* call) const;
  // One embedding input as the model reads it (/v1/embeddings, /embed): after the query
  // instruction, EOS appended for last-token pooling, at most the service's input limit.
  core::StatusOr<std::vector<int32_t>> EmbeddingInput(const std::string& instruction, const std::string& text,
                                                      bool truncate) const;

  const tokenizer::Tokenizer& tok_;
  engine::ScoringService& scoring_;
  ScoringApiConfig config_;
  core::StatusOr<tokenizer::RerankerFormat> rerank_format_;  // tokenized once; an error is answered per request
};

}  // namespace radixlm::serve
