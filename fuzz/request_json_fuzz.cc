// HTTP request bodies (serve/completion_request.h, serve/scoring_api.h, serve/batch_file.h): the
// input is a request body, parsed as the server parses it (serve::ParseBody: no exceptions, NUL,
// nesting and memory bounds),
// then checked by
//  - ParseCompletionRequest as /v1/chat/completions and as /v1/completions; a request that
//    passes has its prompt built (BuildPrompt: ChatML render + encode, or text encode) and its
//    size checked, as the server does next;
//  - ScoringApi::Prepare as /v1/embeddings, /embed and /rerank (validation and tokenization; no
//    model: the scoring service is only asked for its input limit);
//  - ParseBatchLine, the input as one line of an OpenAI Batch file, whose body then goes to the
//    route the line names, as `radixlm batch` does.
// The tokenizer is fuzz_common.h's small real one (yes/no and ChatML's special tokens).
#include <future>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "serve/batch_file.h"
#include "serve/completion_request.h"
#include "serve/http_common.h"
#include "serve/scoring_api.h"

namespace {

using nlohmann::json;
namespace serve = radixlm::serve;

// The scoring service seam (engine/scoring_service.h): Prepare reads only the input limit; no
// job is submitted here.
class NoModelScoring : public radixlm::engine::ScoringService {
 public:
  std::future<radixlm::core::StatusOr<radixlm::engine::ScoringResult>> Submit(radixlm::engine::ScoringJob) override {
    radixlm::fuzz::Fail("Submit called: the fuzz target only prepares scoring calls");
  }
  radixlm::engine::ScoringStats stats() const override { return {}; }
  int64_t max_input_tokens() const override { return 512; }
};

void Completion(const json& body, bool chat, bool allow_special) {
  const auto& tok = radixlm::fuzz::MinimalTokenizer();
  const serve::CompletionLimits limits{.model_name = "radixlm", .stop_ids = {tok.TokenId("<|im_end|>")},
                                       .allow_special_in_content = allow_special};
  serve::CompletionRequest request;
  serve::ApiError err;
  if (!serve::ParseCompletionRequest(body, chat, limits, &request, &err)) {
    (void)radixlm::core::JsonText(serve::ErrorBody(err));
    return;
  }
  if (request.n < 1 || request.best_of < request.n || request.params.max_tokens < 1)
    radixlm::fuzz::Fail("a parsed request with n, best_of or max_tokens out of range");
  std::vector<int32_t> ids;
  static const std::optional<radixlm::tokenizer::ChatTemplate> chatml = radixlm::tokenizer::ChatTemplate::Named("chatml").value();
  if (!serve::BuildPrompt(request, tok, chatml, &ids, &err)) return;
  request.params.prompt = std::move(ids);
  (void)serve::CheckRequestSize(request, limits, &err);
}

void Scoring(serve::ScoringRoute route, const json& body) {
  static NoModelScoring service;
  static const serve::ScoringApi api(radixlm::fuzz::MinimalTokenizer(), service, {.max_inputs = 64});
  const serve::ScoringCall call = api.Prepare(route, body);
  if (call.refused) {
    (void)radixlm::core::JsonText(call.refused->body);
    return;
  }
  if (call.job.inputs.empty()) radixlm::fuzz::Fail("a prepared scoring call without inputs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // As serve/server.cc parses bodies (ParseBody: NUL, depth and memory bounds).
  serve::ApiError parse_error;
  const std::optional<json> parsed = serve::ParseBody(text, &parse_error);
  if (!parsed) (void)radixlm::core::JsonText(serve::ErrorBody(parse_error));
  const json body = parsed ? *parsed : json(json::value_t::discarded);
  if (!body.is_discarded()) {
    const bool allow_special = size % 2 == 1;  // the server's --allow-special-in-content, either way
    Completion(body, /*chat=*/true, allow_special);
    Completion(body, /*chat=*/false, allow_special);
    Scoring(serve::ScoringRoute::kEmbeddings, body);
    Scoring(serve::ScoringRoute::kEmbed, body);
    Scoring(serve::ScoringRoute::kRerank, body);
  }
  serve::BatchLine line;
  serve::BatchLineError error;
  if (!serve::ParseBatchLine(text, 0, 1, &line, &error)) {
    (void)radixlm::core::JsonText(serve::BatchErrorLine(0, error));
    return 0;
  }
  switch (line.route) {
    case serve::BatchRoute::kChatCompletions: Completion(line.body, true, false); break;
    case serve::BatchRoute::kCompletions: Completion(line.body, false, false); break;
    case serve::BatchRoute::kEmbeddings: Scoring(serve::ScoringRoute::kEmbeddings, line.body); break;
    case serve::BatchRoute::kEmbed: Scoring(serve::ScoringRoute::kEmbed, line.body); break;
    case serve::BatchRoute::kRerank: Scoring(serve::ScoringRoute::kRerank, line.body); break;
  }
  return 0;
}
