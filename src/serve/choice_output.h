// One choice of a completion, from the engine's token events to what the API answers: the text
// (stop strings applied), split into reasoning_content (<think> blocks, harmony's analysis
// channel), content and tool_calls (serve/tool_calls.h), with OpenAI's logprobs; both as stream
// deltas and as the final message. Streaming sends reasoning and content as they come; text
// from a tool-call marker on is held and sent as delta.tool_calls when the choice ends (or as
// content, if it does not parse as calls). Harmony (gpt-oss) is routed message by message while
// it is generated: an analysis channel's body streams as reasoning, a final (or unnamed)
// channel's as content, and a message to=functions.NAME is held and sent as its call.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/scoring_service.h"
#include "serve/completion_stream.h"
#include "serve/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

struct ChoiceSetup {
  bool chat = false;
  std::vector<std::string> stop_strings;
  int min_tokens = 0;
  std::vector<int32_t> stop_ids;            // end the text; never content nor logprobs entries
  const ToolFormat* tool_format = nullptr;  // parse tool calls (the request has tools, choice != none)
  std::vector<Tool> tools;
  bool reasoning = false;                   // split <think> ... </think> into reasoning_content
  bool starts_in_reasoning = false;         // the prompt ended inside <think>
  bool harmony = false;                     // gpt-oss channels (reasoning, content and calls)
  int top_logprobs = -1;                    // -1: no logprobs
  uint64_t id_seed = 0;                     // tool call ids
};

class ChoiceOutput {
 public:
  ChoiceOutput(const tokenizer::Tokenizer& tok, ChoiceSetup setup);

  // Completions with echo and logprobs: the prompt's tokens and their log-probabilities
  // (scored[i] for prompt[i + 1]; the first token has none), listed before the generated ones.
  void SetPromptLogprobs(const std::vector<int32_t>& prompt, const std::vector<engine::TokenLogprob>& scored);

  // What this event adds (streaming).
  ChoiceDelta Push(const engine::TokenEvent& ev);

  // After the final event: the message (content, reasoning, calls with ids).
  const ParsedOutput& Final() const { return final_; }
  // "tool_calls" when calls were parsed, "stop" for a stop string or token, "length".
  const char* FinishReason(engine::FinishReason reason) const;
  // The non-streamed response's choice: the message (content, reasoning, tool calls) or, for
  // completions, `prefix` (echo) + the text.
  CompletionChoice ToChoice(engine::FinishReason reason, bool return_token_ids, const std::string& prefix = "") const;
  // All logprobs entries (the non-streamed response's "logprobs"), null without logprobs.
  nlohmann::ordered_json AllLogprobs() const;
  const std::vector<int32_t>& ids() const { return text_.ids(); }
  bool stopped() const { return text_.stopped(); }
  // The stop string that ended the text ("" when none did).
  const std::string& matched_stop() const { return text_.matched_stop(); }

 private:
  enum class Phase { kReasoning, kContent, kCalls };
  // Where harmony's routing stands: in a message header, or in the body of a message whose
  // header named its destination.
  enum class HarmonyPart { kHeader, kReasoning, kContent, kCall };
  void Route(bool last, ChoiceDelta* d);
  void RouteHarmony(bool last, ChoiceDelta* d);
  void FinishHarmony(ChoiceDelta* d);
  void Finish(ChoiceDelta* d);
  nlohmann::ordered_json LogprobEntry(const engine::TokenEvent& ev) const;
  const std::string& TokenText(int32_t id) const;
  size_t MarkerAt(size_t from, size_t* held) const;

  const tokenizer::Tokenizer& tok_;
  ChoiceSetup setup_;
  CompletionText text_;
  std::string raw_;         // the whole text so far
  std::string streamed_;    // the content deltas so far
  std::string streamed_reasoning_;  // the reasoning deltas so far (harmony)
  HarmonyPart harmony_part_ = HarmonyPart::kHeader;
  size_t routed_ = 0;       // raw_[0, routed_) has been sent to a channel
  Phase phase_ = Phase::kContent;
  bool saw_content_ = false;  // non-space content was sent (llama3_json's "{" marker needs none)
  std::vector<nlohmann::ordered_json> entries_;  // logprobs, per token
  nlohmann::ordered_json prompt_entries_;        // echo: the prompt's, completions format (null: none)
  bool prompt_sent_ = false;
  size_t prompt_bytes_ = 0;
  size_t text_offset_ = 0;  // completions' text_offset
  ParsedOutput final_;
  bool finished_ = false;
};

// A finished choice as the assistant message of a chat request's history (role, content,
// reasoning_content, tool_calls), for a conversation the server continues itself. Arguments as
// JSON text, as a client sends them; arguments_as_objects: parsed, as ParseChatFields hands a
// history to the template (text that is no object stays text).
nlohmann::ordered_json AssistantMessage(const ParsedOutput& p, bool arguments_as_objects);

}  // namespace radixlm::serve
