#include "serve/openai_api.h"

#include <atomic>
#include <chrono>
#include <optional>

#include "core/json_text.h"
#include "serve/completion_stream.h"

namespace radixlm::serve {

std::string NewCompletionId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" +
         std::to_string(counter++);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

using nlohmann::json;

class OpenAiExchange : public Exchange {
 public:
  explicit OpenAiExchange(CompletionMeta meta) : meta_(std::move(meta)) {}

  // Completions with echo: the prompt's text before the completion.
  std::string echo;

  std::string StreamStart(const AnswerStart& start) override {
    first_.assign(static_cast<size_t>(start.choices), true);
    ids_sent_.assign(static_cast<size_t>(start.choices), 0);
    return "";
  }

  // One chunk per delta of a choice (the first one even when empty: it carries the role).
  std::string StreamDelta(int i, const ChoiceOutput& out, const ChoiceDelta& d) override {
    if (d.empty() && !first_[i]) return "";
    ChoiceDelta delta = d;
    if (first_[i] && !echo.empty()) delta.content = echo + delta.content;
    const auto fresh = NewIds(i, out);
    const std::string chunk = SseEvent(CompletionChunk(meta_, delta, nullptr, first_[i], fresh ? &*fresh : nullptr, i));
    first_[i] = false;
    return chunk;
  }

  // Each choice's last chunk carries its finish reason.
  std::string StreamChoiceEnd(int i, const ChoiceDelta& d, const ChoiceEnd& end) override {
    ChoiceDelta delta = d;
    if (first_[i] && !echo.empty()) delta.content = echo + delta.content;
    const auto fresh = NewIds(i, *end.output);
    return SseEvent(CompletionChunk(meta_, delta, end.output->FinishReason(end.reason), first_[i], fresh ? &*fresh : nullptr, i));
  }

  std::string StreamEnd(const engine::Usage& usage) override {
    std::string out;
    if (request.include_usage) out += SseEvent(UsageChunk(meta_, usage));
    return out + kSseDone;
  }

  std::string StreamError(const ApiError& e) override { return SseEvent(ErrorBody(e)); }

  std::string Whole(const std::vector<ChoiceEnd>& ends, const engine::Usage& usage) override {
    std::vector<CompletionChoice> choices;
    for (const ChoiceEnd& e : ends) choices.push_back(e.output->ToChoice(e.reason, request.return_token_ids, echo));
    return core::JsonText(CompletionResponse(meta_, choices, usage));
  }

 private:
  // return_token_ids: a chunk carries every id since the choice's previous chunk.
  std::optional<std::vector<int32_t>> NewIds(int i, const ChoiceOutput& out) {
    if (!request.return_token_ids) return std::nullopt;
    const std::vector<int32_t>& all = out.ids();
    std::vector<int32_t> fresh(all.begin() + static_cast<std::ptrdiff_t>(ids_sent_[i]), all.end());
    ids_sent_[i] = all.size();
    return fresh;
  }

  CompletionMeta meta_;
  std::vector<bool> first_;
  std::vector<size_t> ids_sent_;
};

}  // namespace

std::unique_ptr<Exchange> OpenAiDoor::Parse(const HttpRequest&, const nlohmann::ordered_json& body, ApiError* err) {
  auto ex = std::make_unique<OpenAiExchange>(
      CompletionMeta{NewCompletionId(chat_ ? "chatcmpl-" : "cmpl-"), limits_.model_name, UnixNow(), chat_});
  if (!ParseCompletionRequest(body, chat_, limits_, &ex->request, err)) return nullptr;
  const CompletionRequest& r = ex->request;
  if (r.echo) ex->echo = r.prompt_is_ids ? tok_.Decode(r.prompt_ids) : r.prompt_text;
  return ex;
}

std::string OpenAiDoor::ErrorBody(const ApiError& e) const { return core::JsonText(serve::ErrorBody(e)); }

}  // namespace radixlm::serve
