// The agent APIs' request bodies (issue 46): Anthropic's Messages (serve/messages_api.h, also
// as count_tokens) and OpenAI's Responses (serve/responses_api.h), each parsed by its front door
// into the internal chat request, then rendered (ChatML) and tokenized as the server does. The
// input is a request body (JSON). Refusals are fine; a crash, a hang, an exception out of a
// door, or a parsed request the chat path could not take (n, best_of, max_tokens out of range)
// is a finding. Stored responses start empty, so previous_response_id takes the 404 path.
#include <optional>
#include <string>

#include "fuzz_common.h"
#include "serve/http_common.h"
#include "serve/messages_api.h"
#include "serve/response_store.h"
#include "serve/responses_api.h"

namespace serve = radixlm::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  serve::ApiError err;
  const std::optional<nlohmann::ordered_json> body = serve::ParseOrderedBody(text, &err);
  if (!body) return 0;
  const auto& tok = radixlm::fuzz::MinimalTokenizer();
  static const std::optional<radixlm::tokenizer::ChatTemplate> chatml = radixlm::tokenizer::ChatTemplate::Named("chatml").value();
  const serve::CompletionLimits limits{.model_name = "radixlm", .stop_ids = {tok.TokenId("<|im_end|>")}};
  static serve::ResponseStore store({.max_responses = 8, .max_bytes = 1 << 20});
  static serve::MessagesDoor messages(limits, false), count(limits, true);
  static serve::ResponsesDoor responses(limits, tok, store);
  serve::HttpRequest req;
  req.method = "POST";
  for (serve::FrontDoor* door : {static_cast<serve::FrontDoor*>(&messages), static_cast<serve::FrontDoor*>(&count),
                                 static_cast<serve::FrontDoor*>(&responses)}) {
    std::unique_ptr<serve::Exchange> ex = door->Parse(req, *body, &err);
    if (!ex) {
      (void)door->ErrorBody(err);
      continue;
    }
    const serve::CompletionRequest& r = ex->request;
    if (r.n < 1 || r.best_of < r.n || r.params.max_tokens < 1) radixlm::fuzz::Fail("a parsed request out of range");
    std::vector<int32_t> ids;
    std::string rendered;
    (void)serve::BuildPrompt(ex->request, tok, chatml, &ids, &err, &rendered);
  }
  return 0;
}
