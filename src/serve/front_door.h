// One HTTP API's wire format over the server's one completion path: OpenAI's chat completions
// and completions, Anthropic's Messages, OpenAI's Responses are three front doors to the same
// rooms. A door reads its API's body into the internal chat request (a CompletionRequest: the
// chat-completions form, so every API shares one validation of sampling, tools, tool_choice and
// output formats), and writes what the shared pipeline produced (the model's template, the
// output plan's grammar, the engine, each choice's ChoiceOutput: stop strings, reasoning, tool
// calls, logprobs) in its own format, whole or as server-sent events while the choice goes.
// The server (server.cc) owns the path in between; a door never touches the engine.
//
// Adding an API: a FrontDoor whose Parse makes an Exchange (the request, and the writer of its
// answer), and one route in Server::Routes naming it (docs/architecture.md, "where to add").
// Thread-safety: a FrontDoor is shared by the worker threads (stateless or internally locked);
// an Exchange belongs to one request.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "serve/choice_output.h"
#include "serve/completion_request.h"
#include "serve/http_common.h"
#include "serve/http_server.h"

namespace radixlm::serve {

// A request's field read leniently: j[key] when j is an object holding a value of the wanted
// type, else the fallback. (nlohmann's value() throws type_error on a field of another type, and
// the doors read untrusted bodies: a wrong type is the door's 400 to give, never an exception.)
inline std::string FieldString(const nlohmann::ordered_json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}
inline bool FieldBool(const nlohmann::ordered_json& j, const char* key, bool fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// An id as the Anthropic and OpenAI APIs write them: prefix + 24 random alphanumerics.
inline std::string RandomId(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id.push_back(kAlnum[rng() % 62]);
  return id;
}

// What the pipeline knows when an answer starts: the prompt, and the choices that will come.
struct AnswerStart {
  int64_t prompt_tokens = 0;
  int choices = 1;
};

// One choice as it ended.
struct ChoiceEnd {
  const ChoiceOutput* output = nullptr;
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::Usage usage;  // this choice's (the prompt's counts are the request's)
};

// One request and its answer, in one API's wire format.
class Exchange {
 public:
  virtual ~Exchange() = default;

  CompletionRequest request;         // what runs (the chat-completions form)
  std::vector<std::string> ignored;  // fields this server skipped: named in a Warning header
  // Tokens of the prompt the client marks as one it will send again (Anthropic's cache_control,
  // Responses' prompt_cache_key): kept ahead of unmarked ones for ttl_seconds. 0: no mark;
  // kWholePrompt: the whole prompt (resolved by the server once the prompt is built).
  static constexpr int64_t kWholePrompt = -1;
  int64_t cache_mark_tokens = 0;
  double cache_mark_ttl_seconds = 300;

  // Streaming: the bytes to send at the start, for each delta of a choice, at a choice's end,
  // after every choice ended (the usage is the request's), for an error after the start, and
  // as a keepalive while nothing else is sent (a long prefill).
  // (StreamDelta is called for every event that does not end its choice; "" sends nothing.)
  virtual std::string StreamStart(const AnswerStart& start) = 0;
  virtual std::string StreamDelta(int choice, const ChoiceOutput& out, const ChoiceDelta& delta) = 0;
  virtual std::string StreamChoiceEnd(int choice, const ChoiceDelta& last, const ChoiceEnd& end) = 0;
  virtual std::string StreamEnd(const engine::Usage& usage) = 0;
  virtual std::string StreamError(const ApiError& error) = 0;
  virtual std::string StreamKeepalive() { return ": keepalive\n\n"; }
  // The whole answer's body (not streamed): the choices returned, in order.
  virtual std::string Whole(const std::vector<ChoiceEnd>& choices, const engine::Usage& usage) = 0;
  // Once the answer is complete: a door that stores answers keeps this one (the prompt's
  // tokens and each generated token).
  virtual void Finished(const std::vector<int32_t>& prompt, const std::vector<ChoiceEnd>& choices, const engine::Usage& usage) {}
};

class FrontDoor {
 public:
  virtual ~FrontDoor() = default;
  // The body (parsed JSON) into an exchange; false and *err (in the API's terms) when refused.
  virtual std::unique_ptr<Exchange> Parse(const HttpRequest& req, const nlohmann::ordered_json& body, ApiError* err) = 0;
  // An error answer's body in this API's shape.
  virtual std::string ErrorBody(const ApiError& e) const = 0;
};

}  // namespace radixlm::serve
