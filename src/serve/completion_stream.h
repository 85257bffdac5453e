// From the engine's token events to what a completion answers: the text, cut at the first stop
// string, in deltas that never show a stop string or the start of one; the finish reason; and
// the OpenAI JSON / server-sent-event framing of the response and its stream chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

// Stop strings over streamed text: Push returns what may be emitted now. Text that could still
// grow into a stop string is held back until the next piece decides it (or the last one comes);
// at a stop string the text ends there and stopped() turns true (the request is then cancelled).
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // can_stop false: the text is emitted without looking for stop strings (min_tokens not yet
  // reached).
  std::string Push(const std::string& piece, bool last, bool can_stop = true);
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that ended the text

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

// Token events to text deltas: incremental UTF-8-safe detokenisation, then the stop filter.
class CompletionText {
 public:
  // Stop strings count only from the min_tokens-th token on (vLLM's min_tokens).
  // keep_special: special tokens are decoded into the text (formats whose markers are special
  // tokens), except `silent` ones (the stop tokens that end the text).
  CompletionText(const tokenizer::Tokenizer& tok, std::vector<std::string> stops, int min_tokens = 0,
                 bool keep_special = false, std::vector<int32_t> silent = {})
      : decoder_(tok, !keep_special), filter_(std::move(stops)), min_tokens_(min_tokens), silent_(std::move(silent)) {}
  // The delta this event adds (empty once stopped).
  std::string Push(const engine::TokenEvent& ev);
  bool stopped() const { return filter_.stopped(); }
  const std::string& matched_stop() const { return filter_.matched(); }
  const std::string& text() const { return text_; }
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  tokenizer::StreamDecoder decoder_;
  StopStringFilter filter_;
  int min_tokens_ = 0;
  std::vector<int32_t> silent_;
  std::string text_;
  std::vector<int32_t> ids_;
};

// "stop" for a stop string or a stop token, "length" when max_tokens ran out.
const char* FinishReasonText(bool stopped_by_string, engine::FinishReason reason);

nlohmann::json UsageJson(const engine::Usage& u);

// The response's identity, shared by every chunk of a stream.
struct CompletionMeta {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

// One choice of a whole response. token_ids: attached when non-null. Chat: `text` is the
// message content (null in the JSON when empty and there are tool calls), `reasoning` its
// reasoning_content (omitted when empty), `tool_calls` an array or null; `logprobs` null or
// the choice's logprobs object.
struct CompletionChoice {
  std::string text;
  const char* finish_reason = "stop";
  const std::vector<int32_t>* token_ids = nullptr;
  std::string reasoning;
  nlohmann::ordered_json tool_calls;
  nlohmann::ordered_json logprobs;
};

// What one stream chunk of a choice adds (serve/choice_output.h makes them).
struct ChoiceDelta {
  std::string content, reasoning;
  nlohmann::ordered_json tool_calls;  // null, or the stream's delta.tool_calls array
  nlohmann::ordered_json logprobs;    // null, or this delta's entries (chat: {"content": [...]})
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.is_null() && logprobs.is_null(); }
};
// The whole (non-streamed) response, choices in index order.
nlohmann::json CompletionResponse(const CompletionMeta& meta, const std::vector<CompletionChoice>& choices,
                                  const engine::Usage& usage);
// One stream chunk of choice `index`: a delta (the first chat chunk carries the assistant role),
// with the finish reason on the last one (nullptr before). token_ids: the ids since the
// previous chunk.
nlohmann::json CompletionChunk(const CompletionMeta& meta, const std::string& delta, const char* finish_reason,
                               bool first, const std::vector<int32_t>* token_ids, int index = 0);
// The same with reasoning, tool calls and logprobs (chat: delta.reasoning_content,
// delta.tool_calls; the choice's logprobs).
nlohmann::json CompletionChunk(const CompletionMeta& meta, const ChoiceDelta& delta, const char* finish_reason, bool first,
                               const std::vector<int32_t>* token_ids, int index = 0);
// The usage chunk after the last delta (stream_options.include_usage).
nlohmann::json UsageChunk(const CompletionMeta& meta, const engine::Usage& usage);

// Server-sent-event framing.
std::string SseEvent(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace radixlm::serve
