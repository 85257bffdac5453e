// One interactive conversation on the engine (`radixlm chat`): the history, rendered by the
// model's chat template each turn, continues the previous turn's tokens (tokenizer::
// ContinueTokens: the reply as generated, so the radix cache holds the whole history and a turn
// computes only what is new). Past the request limit (the model's context, the KV pool) the
// oldest exchanges go, as chat clients do; the system message stays. A turn ends at an
// end-of-turn token or at an end marker written as text (a model whose tokenizer has no such
// special token), which ends the request early and keeps the reply cached.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::serve {

class ChatSession {
 public:
  // Borrows all three. `request`: the turns' sampling, max_tokens and stop ids (the seed is
  // offset by the turn's number).
  ChatSession(engine::Engine& engine, const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format,
              const std::string& system, engine::RequestParams request);

  struct Turn {
    bool fits = false;       // false: this message alone exceeds the limit (the history is kept)
    int dropped = 0;         // oldest exchanges dropped to fit
    int64_t prompt_tokens = 0;
  };
  // Renders the history with `message` as the next user turn and prepares its prompt.
  core::StatusOr<Turn> Prepare(const std::string& message);
  // Runs the prepared turn on the engine (its token callbacks on this thread), `on_text` gets
  // the reply's text as it grows; the turn's usage, or the engine's error.
  core::StatusOr<engine::Usage> Run(const std::function<void(const std::string&)>& on_text);

 private:
  engine::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  const tokenizer::ChatTemplate& format_;
  engine::RequestParams request_;
  size_t keep_ = 0;  // leading messages never dropped (the system message)
  std::vector<std::string> stops_;
  std::vector<tokenizer::ChatMessage> history_;
  int turn_ = 0;
  // The last prompt's text and tokens, and its reply's tokens as generated.
  std::string prev_text_;
  std::vector<int32_t> prev_tokens_, prev_reply_;
  // The prepared turn.
  std::string prompt_text_;
  std::vector<int32_t> prompt_;
};

}  // namespace radixlm::serve
