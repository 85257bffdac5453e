// OpenAI's /v1/chat/completions and /v1/completions as a front door (serve/front_door.h): the
// body is parsed by ParseCompletionRequest (completion_request.h); the answer is
// CompletionResponse, or a stream of CompletionChunks (completion_stream.h) ending with the
// usage chunk (stream_options.include_usage) and [DONE]. Errors: {"error": {message, type,
// param, code}}.
#pragma once

#include "serve/front_door.h"

namespace radixlm::serve {

class OpenAiDoor : public FrontDoor {
 public:
  OpenAiDoor(bool chat, CompletionLimits limits, const tokenizer::Tokenizer& tok)
      : chat_(chat), limits_(std::move(limits)), tok_(tok) {}
  std::unique_ptr<Exchange> Parse(const HttpRequest& req, const nlohmann::ordered_json& body, ApiError* err) override;
  std::string ErrorBody(const ApiError& e) const override;

 private:
  bool chat_;
  CompletionLimits limits_;
  const tokenizer::Tokenizer& tok_;  // echo of a prompt given as ids
};

// A fresh id "<prefix><time>-<counter>" (chatcmpl-, cmpl-).
std::string NewCompletionId(const char* prefix);
int64_t UnixNow();

}  // namespace radixlm::serve
