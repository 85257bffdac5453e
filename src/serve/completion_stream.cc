#include "serve/completion_stream.h"

#include "core/json_text.h"

#include <algorithm>
#include <utility>

namespace radixlm::serve {

using nlohmann::json;

std::string StopStringFilter::Push(const std::string& piece, bool last, bool can_stop) {
  if (stopped_) return "";
  held_ += piece;
  if (!can_stop) return std::exchange(held_, std::string());
  // The earliest stop string wins.
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = stop.empty() ? std::string::npos : held_.find(stop);
    if (at < cut) {
      cut = at;
      matched_ = stop;
    }
  }
  if (cut != std::string::npos) {
    held_.resize(cut);
    stopped_ = true;
  }
  // Hold back a tail that could still grow into a stop string.
  size_t keep = 0;
  if (!stopped_ && !last)
    for (const std::string& stop : stops_)
      for (size_t k = std::min(stop.empty() ? 0 : stop.size() - 1, held_.size()); k > keep; --k)
        if (held_.compare(held_.size() - k, k, stop, 0, k) == 0) {
          keep = k;
          break;
        }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string CompletionText::Push(const engine::TokenEvent& ev) {
  if (filter_.stopped()) return "";
  if (ev.token >= 0) ids_.push_back(ev.token);
  const bool silent = std::find(silent_.begin(), silent_.end(), ev.token) != silent_.end();
  std::string piece = ev.token >= 0 && !silent ? decoder_.Push(ev.token) : "";
  const bool last = ev.finish != engine::FinishReason::kNone;
  if (last) piece += decoder_.Finish();
  std::string out = filter_.Push(piece, last, static_cast<int>(ids_.size()) >= min_tokens_);
  text_ += out;
  return out;
}

const char* FinishReasonText(bool stopped_by_string, engine::FinishReason reason) {
  if (!stopped_by_string && reason == engine::FinishReason::kLength) return "length";
  return "stop";
}

json UsageJson(const engine::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

namespace {
json Envelope(const CompletionMeta& meta, const char* object, json choices) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}, {"choices", std::move(choices)}};
}
}  // namespace

json CompletionResponse(const CompletionMeta& meta, const std::vector<CompletionChoice>& choices,
                        const engine::Usage& usage) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const CompletionChoice& c = choices[i];
    json choice = {{"index", i}, {"finish_reason", c.finish_reason}, {"logprobs", c.logprobs.is_null() ? json(nullptr) : json(c.logprobs)}};
    if (meta.chat) {
      const bool calls = c.tool_calls.is_array() && !c.tool_calls.empty();
      choice["message"] = {{"role", "assistant"}, {"content", calls && c.text.empty() ? json(nullptr) : json(c.text)}};
      if (!c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
      if (calls) choice["message"]["tool_calls"] = json(c.tool_calls);
    } else {
      choice["text"] = c.text;
    }
    if (c.token_ids) choice["token_ids"] = *c.token_ids;
    list.push_back(std::move(choice));
  }
  json out = Envelope(meta, meta.chat ? "chat.completion" : "text_completion", std::move(list));
  out["usage"] = UsageJson(usage);
  return out;
}

json CompletionChunk(const CompletionMeta& meta, const std::string& delta, const char* finish_reason, bool first,
                     const std::vector<int32_t>* token_ids, int index) {
  ChoiceDelta d;
  d.content = delta;
  return CompletionChunk(meta, d, finish_reason, first, token_ids, index);
}

json CompletionChunk(const CompletionMeta& meta, const ChoiceDelta& delta, const char* finish_reason, bool first,
                     const std::vector<int32_t>* token_ids, int index) {
  json choice = {{"index", index}, {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)},
                 {"logprobs", delta.logprobs.is_null() ? json(nullptr) : json(delta.logprobs)}};
  if (meta.chat) {
    choice["delta"] = json::object();
    if (first) choice["delta"]["role"] = "assistant";
    if (!delta.content.empty() || (first && delta.reasoning.empty() && delta.tool_calls.is_null())) choice["delta"]["content"] = delta.content;
    if (!delta.reasoning.empty()) choice["delta"]["reasoning_content"] = delta.reasoning;
    if (!delta.tool_calls.is_null()) choice["delta"]["tool_calls"] = json(delta.tool_calls);
  } else {
    choice["text"] = delta.content;
  }
  if (token_ids) choice["token_ids"] = *token_ids;
  return Envelope(meta, meta.chat ? "chat.completion.chunk" : "text_completion", json::array({choice}));
}

json UsageChunk(const CompletionMeta& meta, const engine::Usage& usage) {
  json out = Envelope(meta, meta.chat ? "chat.completion.chunk" : "text_completion", json::array());
  out["usage"] = UsageJson(usage);
  return out;
}

std::string SseEvent(const json& data) {
  return "data: " + core::JsonText(data) + "\n\n";
}

}  // namespace radixlm::serve
