// The server's memory of the turns it generated, so a history that comes back holds the exact
// tokens the model produced instead of the chat template's re-rendering of them.
//
// Why: a client re-sends the whole conversation every turn (chat completions, Messages), or the
// server continues a stored one (Responses' previous_response_id). The template renders each
// earlier assistant turn from its parsed form (a tool call's arguments re-serialised by tojson,
// reasoning dropped or kept by the template's rules), which need not be the tokens generated,
// and the prefix cache, token-exact, would miss from the first such turn on: for an agent, most
// of a 10-30K-token context every turn. So each finished chat completion is remembered by its
// conversation's text (rendered without the generation prompt): the prompt's tokens, the tokens
// generated, the reply as the client received it, and how many messages the conversation had.
// A new prompt whose rendered text starts with a remembered conversation, followed by that reply
// (the client's copy of the assistant turn renders exactly as the remembered reply does, so the
// client sent back what it was given), is built as the remembered prompt's tokens (generation
// prompt included: Qwen3's empty think block, which the template leaves out of the history) +
// the tokens generated before the end-of-turn token + the rest encoded from the template's own
// end-of-turn marker on (so the turn ends with the marker the template writes, whichever stop
// token the model chose). Chains splice at every turn, since each remembered prompt was itself
// built that way.
// llama.cpp's own chat keeps its tokens the same way.
// What changes against re-rendering the whole conversation: the tokens of the server's own turns
// are the generated ones (the text the client holds renders the same). `serve --no-turn-reuse`
// renders everything anew (the plain path).
//
// Bounded: at most max_entries turns and max_bytes, least recently used dropped first. Scoped by
// cache_salt. Thread-safety: internally locked.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace radixlm::serve {

struct RememberedTurn {
  std::string scope;                 // cache_salt
  std::string base_text;             // the conversation rendered without the generation prompt (the key)
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> generated;    // before the end-of-turn token the generation ended with
  nlohmann::ordered_json reply;      // the assistant message as the client got it (chat form)
  size_t messages = 0;               // the conversation's messages before the reply
  size_t bytes = 0;
};

class TurnMemory {
 public:
  struct Config {
    size_t max_entries = 4096;
    size_t max_bytes = size_t{256} << 20;
  };
  explicit TurnMemory(Config config) : config_(config) {}

  void Remember(std::shared_ptr<RememberedTurn> turn);
  // The remembered turns whose conversation text `text` starts with, longest first (at most `limit`).
  std::vector<std::shared_ptr<const RememberedTurn>> Prefixes(const std::string& text, const std::string& scope, size_t limit) const;
  size_t size() const;

 private:
  using Entry = std::shared_ptr<const RememberedTurn>;
  Config config_;
  mutable std::mutex mu_;
  using Keyed = std::pair<uint64_t, Entry>;  // (hash of scope + base text, the turn)
  mutable std::list<Keyed> lru_;  // most recent first
  std::unordered_map<uint64_t, std::list<Keyed>::iterator> by_hash_;
  std::map<size_t, int> lengths_;  // base text lengths remembered (how many entries each)
  size_t bytes_ = 0;
};

// The splice (see the file comment) for a chat prompt: `rendered` is the new prompt's text,
// `messages` the conversation it rendered; render(m) renders a message list with the request's
// other variables, without the generation prompt. Where the remembered turn ends in `rendered`
// is found with a probe: the turn followed by a message of the next one's role whose content is
// a private-use sentinel (so the template treats the turn as it does in the whole conversation),
// and the turn's end-of-turn marker is the last of end_texts before the sentinel. encode(text)
// tokenizes a piece as BuildPrompt would. Returns the spliced tokens, or nothing (not a
// continuation of a remembered turn).
using RenderMessages = std::function<core::StatusOr<std::string>(const nlohmann::ordered_json& messages)>;
std::optional<std::vector<int32_t>> SpliceRemembered(const TurnMemory& memory, const std::string& scope,
                                                     const std::string& rendered, const nlohmann::ordered_json& messages,
                                                     const RenderMessages& render,
                                                     const std::function<std::vector<int32_t>(const std::string&)>& encode,
                                                     const std::vector<std::string>& end_texts);

}  // namespace radixlm::serve
