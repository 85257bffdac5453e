#include "serve/choice_output.h"

#include <algorithm>
#include <string_view>

#include "core/random.h"

namespace radixlm::serve {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kThinkOpen = "<think>";
constexpr const char* kThinkClose = "</think>";

// The longest suffix of `text` (from `from`) that is a proper prefix of `marker`.
size_t PartialSuffix(const std::string& text, size_t from, const std::string& marker) {
  const size_t avail = text.size() - from;
  for (size_t k = std::min(avail, marker.size() - 1); k > 0; --k)
    if (text.compare(text.size() - k, k, marker, 0, k) == 0) return k;
  return 0;
}

// Valid UTF-8 for JSON (invalid bytes of a token that splits a character become U+FFFD).
std::string Utf8Lossy(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

ojson Bytes(const std::string& s) {
  ojson b = ojson::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

ChoiceOutput::ChoiceOutput(const tokenizer::Tokenizer& tok, ChoiceSetup setup)
    : tok_(tok), setup_(std::move(setup)),
      text_(tok, setup_.stop_strings, setup_.min_tokens,
            setup_.harmony || (setup_.tool_format && setup_.tool_format->special_token_markers), setup_.stop_ids) {
  if (setup_.reasoning && setup_.starts_in_reasoning) phase_ = Phase::kReasoning;
}

const std::string& ChoiceOutput::TokenText(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && id < tok_.vocab_size() ? tok_.TokenBytes(id) : kNone;  // ids past the tokenizer: padding rows
}

ojson ChoiceOutput::LogprobEntry(const engine::TokenEvent& ev) const {
  const std::string& bytes = TokenText(ev.token);
  ojson top = ojson::array();
  for (const auto& [id, lp] : ev.top_logprobs) {
    const std::string& b = TokenText(id);
    top.push_back({{"token", Utf8Lossy(b)}, {"logprob", lp}, {"bytes", Bytes(b)}});
  }
  return {{"token", Utf8Lossy(bytes)}, {"logprob", ev.logprob}, {"bytes", Bytes(bytes)}, {"top_logprobs", std::move(top)}};
}

// The first tool-call marker at or after `from` (npos: none); *held: how much of the end could
// still grow into one.
size_t ChoiceOutput::MarkerAt(size_t from, size_t* held) const {
  *held = 0;
  size_t best = std::string::npos;
  for (const std::string& m : setup_.tool_format->markers) {
    if (m == "{") {  // only as the output's first non-space character
      if (saw_content_) continue;
      const size_t b = raw_.find_first_not_of(" \t\r\n", from);
      if (b != std::string::npos && raw_[b] == '{') best = std::min(best, b);
      continue;
    }
    const size_t at = raw_.find(m, from);
    if (at != std::string::npos) best = std::min(best, at);
    else *held = std::max(*held, PartialSuffix(raw_, from, m));
  }
  return best;
}

void ChoiceOutput::Route(bool last, ChoiceDelta* d) {
  for (;;) {
    if (phase_ == Phase::kReasoning) {
      const size_t close = raw_.find(kThinkClose, routed_);
      if (close == std::string::npos) {
        const size_t hold = last ? 0 : PartialSuffix(raw_, routed_, kThinkClose);
        d->reasoning += raw_.substr(routed_, raw_.size() - hold - routed_);
        routed_ = raw_.size() - hold;
        return;
      }
      d->reasoning += raw_.substr(routed_, close - routed_);
      routed_ = close + std::char_traits<char>::length(kThinkClose);
      while (routed_ < raw_.size() && (raw_[routed_] == '\n' || raw_[routed_] == ' ')) ++routed_;
      phase_ = Phase::kContent;
      continue;
    }
    if (phase_ == Phase::kCalls) return;
    // Content. A reasoning block may open the output.
    if (setup_.reasoning && !saw_content_) {
      const size_t b = raw_.find_first_not_of(" \t\r\n", routed_);
      if (b == std::string::npos && !last) return;  // only spaces so far
      if (b != std::string::npos) {
        const std::string rest = raw_.substr(b);
        if (rest.compare(0, 7, kThinkOpen) == 0) {
          routed_ = b + 7;
          phase_ = Phase::kReasoning;
          continue;
        }
        if (!last && std::string(kThinkOpen).compare(0, rest.size(), rest) == 0) return;  // maybe "<think>"
      }
    }
    size_t held = 0, marker = std::string::npos;
    if (setup_.tool_format) marker = MarkerAt(routed_, &held);
    const size_t end = marker != std::string::npos ? marker : raw_.size() - (last ? 0 : held);
    std::string piece = raw_.substr(routed_, end - routed_);
    if (!saw_content_) {  // no leading spaces before the first content
      const size_t b = piece.find_first_not_of(" \t\r\n");
      piece = b == std::string::npos ? "" : piece.substr(b);
    }
    if (!piece.empty()) saw_content_ = true;
    d->content += piece;
    routed_ = end;
    if (marker != std::string::npos) phase_ = Phase::kCalls;
    return;
  }
}

void ChoiceOutput::RouteHarmony(bool last, ChoiceDelta* d) {
  static constexpr std::string_view kMessage = "<|message|>", kStart = "<|start|>";
  static constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
  for (;;) {
    if (harmony_part_ == HarmonyPart::kHeader) {
      const size_t msg = raw_.find(kMessage, routed_);
      if (msg == std::string::npos) return;  // the header is not complete yet
      const std::string header = raw_.substr(routed_, msg - routed_);
      harmony_part_ = header.find(" to=") != std::string::npos           ? HarmonyPart::kCall
                      : header.find("<|channel|>analysis") != std::string::npos ? HarmonyPart::kReasoning
                                                                                  : HarmonyPart::kContent;
      routed_ = msg + kMessage.size();
      continue;
    }
    size_t end = std::string::npos, hold = 0;
    std::string_view ended;
    for (std::string_view t : kEnds) {
      const size_t at = raw_.find(t, routed_);
      if (at < end) end = at, ended = t;
      if (at == std::string::npos) hold = std::max(hold, PartialSuffix(raw_, routed_, std::string(t)));
    }
    const size_t stop = end != std::string::npos ? end : raw_.size() - (last ? 0 : hold);
    const std::string piece = raw_.substr(routed_, stop - routed_);
    if (harmony_part_ == HarmonyPart::kReasoning) d->reasoning += piece;
    if (harmony_part_ == HarmonyPart::kContent) d->content += piece;
    routed_ = stop;
    if (end == std::string::npos) return;
    routed_ = ended == kStart ? end : end + ended.size();  // <|start|> opens the next header
    harmony_part_ = HarmonyPart::kHeader;
  }
}

// The whole output parsed (ParseHarmony); the deltas add what streaming has not sent (all of it
// when the message did not stream as parsed, e.g. a call whose arguments are no JSON object).
void ChoiceOutput::FinishHarmony(ChoiceDelta* d) {
  const std::string content = streamed_ + d->content, reasoning = streamed_reasoning_ + d->reasoning;
  if (final_.content.compare(0, content.size(), content) == 0) d->content += final_.content.substr(content.size());
  if (final_.reasoning.compare(0, reasoning.size(), reasoning) == 0) d->reasoning += final_.reasoning.substr(reasoning.size());
}

void ChoiceOutput::Finish(ChoiceDelta* d) {
  finished_ = true;
  std::string rest = raw_;
  if (setup_.harmony) {
    final_ = FindToolFormat("harmony")->parse(raw_, setup_.tools);
  } else {
    if (setup_.reasoning) SplitReasoning(raw_, setup_.starts_in_reasoning, &final_.reasoning, &rest);
    if (setup_.tool_format) {
      ParsedOutput p = setup_.tool_format->parse(rest, setup_.tools);
      final_.content = std::move(p.content);
      final_.calls = std::move(p.calls);
    } else {
      final_.content = rest;
    }
  }
  core::Rng rng(setup_.id_seed);
  if (setup_.tool_format) AssignCallIds(*setup_.tool_format, &rng, &final_.calls);
  if (setup_.harmony) {
    FinishHarmony(d);
  } else if (phase_ == Phase::kCalls && final_.calls.empty()) {
    d->content += raw_.substr(routed_);  // what looked like a call is content
  }
  if (final_.calls.empty()) return;
  d->tool_calls = ojson::array();
  for (size_t i = 0; i < final_.calls.size(); ++i) {
    const ToolCall& c = final_.calls[i];
    d->tool_calls.push_back({{"index", i}, {"id", c.id}, {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
}

void ChoiceOutput::SetPromptLogprobs(const std::vector<int32_t>& prompt, const std::vector<engine::TokenLogprob>& scored) {
  ojson tokens = ojson::array(), lps = ojson::array(), tops = ojson::array(), offsets = ojson::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string& b = TokenText(prompt[i]);
    tokens.push_back(Utf8Lossy(b));
    offsets.push_back(text_offset_);
    text_offset_ += b.size();
    if (i == 0 || i - 1 >= scored.size()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(scored[i - 1].logprob);
    ojson top = ojson::object();
    for (const auto& [id, lp] : scored[i - 1].top) top[Utf8Lossy(TokenText(id))] = lp;
    tops.push_back(std::move(top));
  }
  prompt_bytes_ = text_offset_;
  prompt_entries_ = {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

ChoiceDelta ChoiceOutput::Push(const engine::TokenEvent& ev) {
  ChoiceDelta d;
  if (finished_) return d;
  if (!prompt_sent_ && !prompt_entries_.is_null()) {  // the first chunk carries the prompt's
    d.logprobs = prompt_entries_;
    prompt_sent_ = true;
  }
  const bool was_stopped = text_.stopped();
  const std::string piece = text_.Push(ev);
  raw_ += piece;
  const bool stop_token = std::find(setup_.stop_ids.begin(), setup_.stop_ids.end(), ev.token) != setup_.stop_ids.end();
  if (setup_.top_logprobs >= 0 && ev.token >= 0 && !was_stopped && !stop_token) {
    ojson e = LogprobEntry(ev);
    if (setup_.chat) {
      d.logprobs = {{"content", ojson::array({e})}};
    } else {
      ojson top = ojson::object();
      for (const ojson& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
      if (d.logprobs.is_null()) d.logprobs = {{"tokens", ojson::array()}, {"token_logprobs", ojson::array()},
                                              {"top_logprobs", ojson::array()}, {"text_offset", ojson::array()}};
      d.logprobs["tokens"].push_back(e["token"]);
      d.logprobs["token_logprobs"].push_back(e["logprob"]);
      d.logprobs["top_logprobs"].push_back(top);
      d.logprobs["text_offset"].push_back(text_offset_);
    }
    text_offset_ += TokenText(ev.token).size();
    entries_.push_back(std::move(e));
  }
  const bool last = ev.finish != engine::FinishReason::kNone;
  if (!setup_.reasoning && !setup_.tool_format && !setup_.harmony) {
    d.content = piece;
    if (last) Finish(&d);
  } else {
    if (setup_.harmony) RouteHarmony(last, &d);
    else Route(last, &d);
    if (last) Finish(&d);
  }
  streamed_ += d.content;
  streamed_reasoning_ += d.reasoning;
  return d;
}

CompletionChoice ChoiceOutput::ToChoice(engine::FinishReason reason, bool return_token_ids, const std::string& prefix) const {
  CompletionChoice c;
  c.text = setup_.chat ? final_.content : prefix + streamed_;
  c.finish_reason = FinishReason(reason);
  c.token_ids = return_token_ids ? &ids() : nullptr;
  c.reasoning = final_.reasoning;
  c.logprobs = AllLogprobs();
  if (!final_.calls.empty()) {
    c.tool_calls = ojson::array();
    for (const ToolCall& call : final_.calls)
      c.tool_calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return c;
}

const char* ChoiceOutput::FinishReason(engine::FinishReason reason) const {
  if (!final_.calls.empty()) return "tool_calls";
  return FinishReasonText(text_.stopped(), reason);
}

ojson ChoiceOutput::AllLogprobs() const {
  if (setup_.top_logprobs < 0) return nullptr;
  if (setup_.chat) return {{"content", entries_}};
  ojson tokens = ojson::array(), lps = ojson::array(), tops = ojson::array(), offsets = ojson::array();
  size_t offset = 0;
  if (!prompt_entries_.is_null()) {
    tokens = prompt_entries_["tokens"];
    lps = prompt_entries_["token_logprobs"];
    tops = prompt_entries_["top_logprobs"];
    offsets = prompt_entries_["text_offset"];
    offset = prompt_bytes_;
  }
  for (const ojson& e : entries_) {
    tokens.push_back(e["token"]);
    lps.push_back(e["logprob"]);
    ojson top = ojson::object();
    for (const ojson& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += e["bytes"].size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

nlohmann::ordered_json AssistantMessage(const ParsedOutput& p, bool arguments_as_objects) {
  nlohmann::ordered_json m = {{"role", "assistant"}, {"content", p.content}};
  if (!p.reasoning.empty()) m["reasoning_content"] = p.reasoning;
  if (p.calls.empty()) return m;
  m["tool_calls"] = nlohmann::ordered_json::array();
  for (const ToolCall& c : p.calls) {
    nlohmann::ordered_json args = c.arguments;
    if (arguments_as_objects) {
      auto parsed = nlohmann::ordered_json::parse(c.arguments, nullptr, false);
      if (parsed.is_object()) args = std::move(parsed);
    }
    m["tool_calls"].push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
  }
  return m;
}

}  // namespace radixlm::serve
