#include "serve/chat_session.h"

#include "serve/completion_stream.h"

namespace radixlm::serve {

ChatSession::ChatSession(engine::Engine& engine, const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format,
                         const std::string& system, engine::RequestParams request)
    : engine_(engine), tok_(tok), format_(format), request_(std::move(request)) {
  for (const char* end : {"<|im_end|>", "<|eot_id|>", "</s>", "<|end|>", "<end_of_turn>"})
    if (format_.source().find(end) != std::string::npos) stops_.push_back(end);
  if (!system.empty()) history_.push_back({"system", system});
  keep_ = history_.size();
}

core::StatusOr<ChatSession::Turn> ChatSession::Prepare(const std::string& message) {
  Turn turn;
  std::vector<tokenizer::ChatMessage> trimmed = history_;  // the history changes only if the message fits
  trimmed.push_back({"user", message});
  const int64_t limit = engine_.max_request_tokens() - request_.max_tokens;
  for (;;) {
    auto rendered = format_.RenderMessages(trimmed, /*add_generation_prompt=*/true);
    if (!rendered.ok()) return rendered.status();
    prompt_text_ = std::move(*rendered);
    prompt_ = tokenizer::ContinueTokens(tok_, prev_text_, prev_tokens_, prev_reply_, prompt_text_);
    if (static_cast<int64_t>(prompt_.size()) <= limit) break;
    if (trimmed.size() < keep_ + 3) return turn;  // only this message left: it does not fit
    trimmed.erase(trimmed.begin() + static_cast<std::ptrdiff_t>(keep_), trimmed.begin() + static_cast<std::ptrdiff_t>(keep_ + 2));
    ++turn.dropped;
  }
  history_ = std::move(trimmed);
  turn.fits = true;
  turn.prompt_tokens = static_cast<int64_t>(prompt_.size());
  return turn;
}

core::StatusOr<engine::Usage> ChatSession::Run(const std::function<void(const std::string&)>& on_text) {
  engine::RequestParams params = request_;
  params.prompt = prompt_;
  params.sampling.seed = request_.sampling.seed + static_cast<uint64_t>(turn_);
  CompletionText text(tok_, stops_);
  bool done = false;
  engine::TokenEvent last;
  auto id = engine_.Submit(std::move(params), [&](const engine::TokenEvent& ev) {
    on_text(text.Push(ev));
    if (ev.finish == engine::FinishReason::kNone) return;
    done = true;
    last = ev;
  });
  if (!id.ok()) return id.status();
  bool ended = false;
  while (!done) {
    // A request alone always fits (Submit checked it against the pool), so a step with nothing
    // to do before it finished is a bug.
    if (!engine_.Step() && !done) return core::Status(core::StatusCode::kInternal, "the engine stopped before the reply finished");
    if (text.stopped() && !ended) {
      engine_.EndEarly(*id);  // the end marker came as text: finish, keeping the reply cached
      ended = true;
    }
  }
  if (last.finish == engine::FinishReason::kError) return core::Status(core::StatusCode::kInternal, last.error);
  history_.push_back({"assistant", text.text()});
  prev_text_ = prompt_text_;
  prev_tokens_ = prompt_;
  prev_reply_ = text.ids();
  ++turn_;
  return last.usage;
}

}  // namespace radixlm::serve
