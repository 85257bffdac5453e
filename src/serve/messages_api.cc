#include "serve/messages_api.h"

#include <random>
#include <set>

#include "core/json_text.h"
#include "serve/completion_stream.h"

namespace radixlm::serve {
namespace {

using ojson = nlohmann::ordered_json;

bool Bad(ApiError* err, const std::string& message, const std::string& param) {
  *err = {400, param + ": " + message, "invalid_request_error", param, "invalid_value"};
  return false;
}

// What the door does with each top-level field of a Messages request.
enum class Field { kRead, kSkip };
const std::map<std::string, Field>& Fields() {
  static const std::map<std::string, Field> f = {
      {"model", Field::kRead}, {"max_tokens", Field::kRead}, {"messages", Field::kRead}, {"system", Field::kRead},
      {"stop_sequences", Field::kRead}, {"stream", Field::kRead}, {"temperature", Field::kRead}, {"top_p", Field::kRead},
      {"top_k", Field::kRead}, {"tools", Field::kRead}, {"tool_choice", Field::kRead}, {"thinking", Field::kRead},
      {"output_config", Field::kRead}, {"cache_control", Field::kRead},
      // Nothing a local server can act on: skipped, named in the Warning header.
      {"metadata", Field::kSkip}, {"context_management", Field::kSkip}, {"container", Field::kSkip},
      {"mcp_servers", Field::kSkip}, {"service_tier", Field::kSkip}, {"inference_geo", Field::kSkip},
  };
  return f;
}

// A prompt mark's lifetime: cache_control {"type": "ephemeral", "ttl": "5m" | "1h"}.
bool MarkTtl(const ojson& block, double* ttl) {
  if (!block.is_object() || !block.contains("cache_control") || block["cache_control"].is_null()) return false;
  const ojson& c = block["cache_control"];
  *ttl = std::max(*ttl, c.is_object() && FieldString(c, "ttl", "") == "1h" ? 3600.0 : 300.0);
  return true;
}

struct Translation {
  ojson body = ojson::object();  // the chat-completions form
  bool marked = false;
  double mark_ttl = 0;
  std::vector<std::string> skipped;
  std::string model;
  bool prewarm = false;  // max_tokens 0
};

// Text of a list of blocks that must all be text (a tool result's, a system prompt's).
bool BlockTexts(const ojson& blocks, const std::string& where, std::vector<std::string>* out, Translation* t, ApiError* err) {
  if (blocks.is_string()) {
    out->push_back(blocks.get<std::string>());
    return true;
  }
  if (!blocks.is_array()) return Bad(err, "must be a string or a list of content blocks", where);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ojson& b = blocks[i];
    const std::string at = where + "." + std::to_string(i);
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return Bad(err, "a content block needs a string 'type'", at);
    if (b["type"] != "text") return Bad(err, "block type '" + b["type"].get<std::string>() + "' here: this model reads text only", at + ".type");
    if (!b.contains("text") || !b["text"].is_string()) return Bad(err, "a text block needs a string 'text'", at + ".text");
    t->marked |= MarkTtl(b, &t->mark_ttl);
    out->push_back(b["text"].get<std::string>());
  }
  return true;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "\n\n") + p;
  return s;
}

bool System(const ojson& system, Translation* t, ApiError* err) {
  std::vector<std::string> texts;
  if (!BlockTexts(system, "system", &texts, t, err)) return false;
  // Claude Code's first system block carries a billing header whose suffix changes with every
  // prompt; kept, it would make every session's prefix differ from its first token.
  std::erase_if(texts, [](const std::string& s) { return s.rfind("x-anthropic-billing-header:", 0) == 0; });
  if (!texts.empty()) t->body["messages"].push_back({{"role", "system"}, {"content", Join(texts)}});
  return true;
}

// What a message's blocks hold besides its tool results: text, reasoning, tool calls.
struct MessageParts {
  std::vector<std::string> texts, thinking;
  ojson calls = ojson::array();
};

// One content block of a `role` message, into *parts (a tool result straight into t's messages,
// as a tool message).
bool MessageBlock(const ojson& b, const std::string& at, const std::string& role, std::set<std::string>* call_ids,
                  MessageParts* parts, Translation* t, ApiError* err) {
  if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return Bad(err, "a content block needs a string 'type'", at);
  const std::string type = b["type"].get<std::string>();
  t->marked |= MarkTtl(b, &t->mark_ttl);
  if (type == "text") {
    if (!b.contains("text") || !b["text"].is_string()) return Bad(err, "a text block needs a string 'text'", at + ".text");
    parts->texts.push_back(b["text"].get<std::string>());
  } else if (type == "tool_use" && role == "assistant") {
    if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
      return Bad(err, "a tool_use block needs string 'id' and 'name'", at);
    const ojson input = b.contains("input") ? b["input"] : ojson::object();
    if (!input.is_object()) return Bad(err, "a tool_use block's 'input' must be an object", at + ".input");
    call_ids->insert(b["id"].get<std::string>());
    parts->calls.push_back({{"id", b["id"]}, {"type", "function"}, {"function", {{"name", b["name"]}, {"arguments", input}}}});
  } else if (type == "tool_result" && role == "user") {
    if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) return Bad(err, "a tool_result block needs a string 'tool_use_id'", at);
    const std::string id = b["tool_use_id"].get<std::string>();
    if (!call_ids->count(id)) return Bad(err, "no earlier tool_use block has the id '" + id + "'", at + ".tool_use_id");
    std::vector<std::string> result;
    if (b.contains("content") && !b["content"].is_null() && !BlockTexts(b["content"], at + ".content", &result, t, err)) return false;
    t->body["messages"].push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", Join(result)}});
  } else if (type == "thinking" && role == "assistant") {
    if (!b.contains("thinking") || !b["thinking"].is_string()) return Bad(err, "a thinking block needs a string 'thinking'", at);
    parts->thinking.push_back(b["thinking"].get<std::string>());
  } else if (type == "redacted_thinking" && role == "assistant") {
    // Encrypted reasoning of another model: nothing this one can read.
  } else {
    return Bad(err, "block type '" + type + "' is not one a " + role +
                        " message can carry here (text, tool_use and thinking in assistant turns; text and tool_result "
                        "in user turns; this model reads text only)", at + ".type");
  }
  return true;
}

// A system message's texts mid-conversation (most chat templates refuse a late system message):
// appended to the user message it follows, else folded into the next one. Appending keeps the
// conversation's prefix the same when it comes back longer (Claude Code sends one after its
// first user message, the last message of the first turn), so the whole history stays a cache hit.
void LateSystem(const std::vector<std::string>& texts, std::string* pending_system, Translation* t) {
  ojson& msgs = t->body["messages"];
  if (pending_system->empty() && !msgs.empty() && msgs.back()["role"] == "user" && msgs.back()["content"].is_string()) {
    msgs.back()["content"] = msgs.back()["content"].get<std::string>() + "\n\n" + Join(texts);
    return;
  }
  *pending_system += (pending_system->empty() ? "" : "\n\n") + Join(texts);
}

// One message's blocks into chat messages (tool results first, as tool messages).
bool Message(const ojson& m, size_t index, std::set<std::string>* call_ids, std::string* pending_system, Translation* t,
             ApiError* err) {
  const std::string where = "messages." + std::to_string(index);
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return Bad(err, "each message needs a string 'role'", where);
  const std::string role = m["role"].get<std::string>();
  if (role != "user" && role != "assistant" && role != "system")
    return Bad(err, "unexpected role '" + role + "' (user or assistant)", where + ".role");
  if (!m.contains("content")) return Bad(err, "each message needs 'content'", where);
  ojson blocks = m["content"];
  if (blocks.is_string()) blocks = ojson::array({{{"type", "text"}, {"text", blocks.get<std::string>()}}});
  if (!blocks.is_array()) return Bad(err, "must be a string or a list of content blocks", where + ".content");
  MessageParts parts;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!MessageBlock(blocks[i], where + ".content." + std::to_string(i), role, call_ids, &parts, t, err)) return false;
  if (role == "system") {
    LateSystem(parts.texts, pending_system, t);
    return true;
  }
  if (role == "user" && !pending_system->empty()) {
    parts.texts.insert(parts.texts.begin(), *pending_system);
    pending_system->clear();
  }
  if (role == "user" && parts.texts.empty()) return true;  // only tool results
  ojson msg = {{"role", role}, {"content", Join(parts.texts)}};
  if (!parts.thinking.empty()) msg["reasoning_content"] = Join(parts.thinking);
  if (!parts.calls.empty()) msg["tool_calls"] = parts.calls;
  t->body["messages"].push_back(std::move(msg));
  return true;
}

bool Tools(const ojson& tools, Translation* t, ApiError* err) {
  if (!tools.is_array()) return Bad(err, "must be a list", "tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& tool = tools[i];
    const std::string at = "tools." + std::to_string(i);
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) return Bad(err, "each tool needs a string 'name'", at);
    t->marked |= MarkTtl(tool, &t->mark_ttl);
    if (tool.contains("type") && !tool["type"].is_null() && tool["type"] != "custom") {
      t->skipped.push_back(at + " (server tool '" + core::JsonText(nlohmann::json(tool["type"])) + "')");  // run by Anthropic's servers, not here
      continue;
    }
    ojson f = {{"name", tool["name"]}};
    if (tool.contains("description") && tool["description"].is_string()) f["description"] = tool["description"];
    if (!tool.contains("input_schema") || !tool["input_schema"].is_object()) return Bad(err, "a custom tool needs an object 'input_schema'", at);
    f["parameters"] = tool["input_schema"];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  if (!out.empty()) t->body["tools"] = std::move(out);
  return true;
}

bool ToolChoice(const ojson& c, Translation* t, ApiError* err) {
  if (!c.is_object() || !c.contains("type") || !c["type"].is_string()) return Bad(err, "must be an object with a 'type'", "tool_choice");
  const std::string type = c["type"].get<std::string>();
  if (type == "auto") t->body["tool_choice"] = "auto";
  else if (type == "any") t->body["tool_choice"] = "required";
  else if (type == "none") t->body["tool_choice"] = "none";
  else if (type == "tool") {
    if (!c.contains("name") || !c["name"].is_string()) return Bad(err, "type 'tool' needs a string 'name'", "tool_choice.name");
    t->body["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
  } else {
    return Bad(err, "unknown type '" + type + "' (auto, any, tool, none)", "tool_choice.type");
  }
  if (FieldBool(c, "disable_parallel_tool_use", false) && type != "none") t->body["parallel_tool_calls"] = false;
  return true;
}

// The Messages body into the chat-completions form (the table above Fields()).
bool Translate(const ojson& body, bool count, Translation* t, ApiError* err) {
  if (!body.is_object()) return Bad(err, "the body must be a JSON object", "body");
  for (const auto& [key, v] : body.items()) {
    auto it = Fields().find(key);
    if (it == Fields().end()) return Bad(err, "Extra inputs are not permitted", key);
    if (it->second == Field::kSkip) t->skipped.push_back(key);
  }
  t->model = body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
  t->body["messages"] = ojson::array();
  if (body.contains("system") && !body["system"].is_null() && !System(body["system"], t, err)) return false;
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return Bad(err, "must be a non-empty list", "messages");
  std::set<std::string> call_ids;
  std::string pending_system;
  for (size_t i = 0; i < body["messages"].size(); ++i)
    if (!Message(body["messages"][i], i, &call_ids, &pending_system, t, err)) return false;
  if (!pending_system.empty()) t->body["messages"].push_back({{"role", "user"}, {"content", pending_system}});
  if (!count) {
    if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 0)
      return Bad(err, "a non-negative integer is required", "max_tokens");
    t->prewarm = body["max_tokens"].get<int64_t>() == 0;  // compute the prompt (for the cache), generate nothing
    t->body["max_tokens"] = t->prewarm ? ojson(1) : body["max_tokens"];
  }
  for (const char* k : {"temperature", "top_p", "top_k", "stream"})
    if (body.contains(k) && !body[k].is_null() && !count) t->body[k] = body[k];
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null() && !count) t->body["stop"] = body["stop_sequences"];
  if (body.contains("tools") && !body["tools"].is_null() && !Tools(body["tools"], t, err)) return false;
  if (body.contains("tool_choice") && !body["tool_choice"].is_null() && !ToolChoice(body["tool_choice"], t, err)) return false;
  if (body.contains("thinking") && body["thinking"].is_object()) {
    const std::string type = FieldString(body["thinking"], "type", "");
    if (type != "enabled" && type != "adaptive" && type != "disabled")
      return Bad(err, "unknown type '" + type + "' (enabled, adaptive, disabled)", "thinking.type");
    t->body["chat_template_kwargs"] = {{"enable_thinking", type != "disabled"}};
  }
  if (body.contains("output_config") && body["output_config"].is_object()) {
    const ojson& o = body["output_config"];
    if (o.contains("effort") && o["effort"].is_string()) {
      const std::string e = o["effort"].get<std::string>();
      t->body["reasoning_effort"] = e == "low" || e == "medium" ? e : "high";
    }
    if (o.contains("format") && o["format"].is_object() && !count)
      t->body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", o["format"].value("schema", ojson::object())}}}};
  }
  if (body.contains("cache_control") && !body["cache_control"].is_null()) t->marked |= MarkTtl(body, &t->mark_ttl);
  return true;
}

// ---- the answer -------------------------------------------------------------------------------

ojson UsageOf(const engine::Usage& u, int64_t marked_computed) {
  const int64_t creation = std::max<int64_t>(0, marked_computed);
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens - creation},
          {"cache_creation_input_tokens", creation},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

std::string Event(const char* name, const ojson& data) {
  return std::string("event: ") + name + "\ndata: " + data.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n\n";
}

// A parsed call's arguments as the tool_use input object ({} when they are not one).
ojson InputOf(const std::string& arguments) {
  ojson v = ojson::parse(arguments, nullptr, false);
  return v.is_object() ? v : ojson::object();
}

std::string ToolUseId(const std::string& call_id) {
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

class MessagesExchange : public Exchange {
 public:
  explicit MessagesExchange(std::string model) : id_(RandomId("msg_")), model_(std::move(model)) {}

  std::string StreamStart(const AnswerStart& start) override {
    ojson message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}, {"content", ojson::array()},
                     {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                     {"usage", {{"input_tokens", start.prompt_tokens}, {"cache_creation_input_tokens", 0},
                                {"cache_read_input_tokens", 0}, {"output_tokens", 0}}}};
    return Event("message_start", {{"type", "message_start"}, {"message", message}}) + StreamKeepalive();
  }

  std::string StreamDelta(int, const ChoiceOutput&, const ChoiceDelta& d) override { return Blocks(d); }

  std::string StreamChoiceEnd(int, const ChoiceDelta& last, const ChoiceEnd& end) override {
    std::string out = Blocks(last);  // (two statements: the operands of + run in any order)
    out += Close();
    const auto [reason, sequence] = StopReason(end);
    ojson usage = UsageOf(end.usage, MarkedComputed(end.usage));
    out += Event("message_delta", {{"type", "message_delta"}, {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                                   {"usage", usage}});
    return out + Event("message_stop", {{"type", "message_stop"}});
  }

  std::string StreamEnd(const engine::Usage&) override { return ""; }

  std::string StreamError(const ApiError& e) override {
    return Event("error", ojson::parse(AnthropicErrorBody(e)));
  }

  std::string StreamKeepalive() override { return Event("ping", {{"type", "ping"}}); }

  std::string Whole(const std::vector<ChoiceEnd>& ends, const engine::Usage& usage) override {
    const ParsedOutput& p = ends[0].output->Final();
    ojson content = ojson::array();
    if (!p.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", p.reasoning}, {"signature", ""}});
    if (!p.content.empty() || (p.reasoning.empty() && p.calls.empty())) content.push_back({{"type", "text"}, {"text", p.content}});
    for (const ToolCall& c : p.calls)
      content.push_back({{"type", "tool_use"}, {"id", ToolUseId(c.id)}, {"name", c.name}, {"input", InputOf(c.arguments)}});
    const auto [reason, sequence] = StopReason(ends[0]);
    const ojson message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}, {"content", content},
                           {"stop_reason", reason}, {"stop_sequence", sequence}, {"usage", UsageOf(usage, MarkedComputed(usage))}};
    return message.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }

 private:
  std::pair<ojson, ojson> StopReason(const ChoiceEnd& end) const {
    if (!end.output->Final().calls.empty()) return {"tool_use", nullptr};
    if (!end.output->matched_stop().empty()) return {"stop_sequence", end.output->matched_stop()};
    if (end.reason == engine::FinishReason::kLength) return {"max_tokens", nullptr};
    return {"end_turn", nullptr};
  }
  // Of a prompt the client marked (cache_control): the tokens computed now, i.e. written to
  // the cache for the next request (Anthropic's cache_creation_input_tokens).
  int64_t MarkedComputed(const engine::Usage& u) const {
    return request.params.cache_mark.tokens > 0 ? request.params.cache_mark.tokens - std::min(u.cached_tokens, request.params.cache_mark.tokens) : 0;
  }

  // Content blocks as the deltas come: thinking, text, then tool_use blocks (calls arrive
  // parsed, at the end); a block is closed before the next one opens.
  std::string Blocks(const ChoiceDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      out += Open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += Delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += Open("text", {{"type", "text"}, {"text", ""}});
      out += Delta({{"type", "text_delta"}, {"text", d.content}});
    }
    if (d.tool_calls.is_array()) {
      for (const ojson& c : d.tool_calls) {
        out += Close();
        const ojson& f = c["function"];
        out += Open("tool_use", {{"type", "tool_use"}, {"id", ToolUseId(FieldString(c, "id", ""))}, {"name", f["name"]}, {"input", ojson::object()}});
        out += Delta({{"type", "input_json_delta"}, {"partial_json", FieldString(f, "arguments", "{}")}});
        out += Close();
      }
    }
    return out;
  }
  std::string Open(const std::string& kind, const ojson& block) {
    if (open_ == kind && kind != "tool_use") return "";
    std::string out = Close();
    open_ = kind;
    out += Event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
    return out;
  }
  std::string Delta(const ojson& delta) {
    return Event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }
  std::string Close() {
    if (open_.empty()) return "";
    std::string out;
    if (open_ == "thinking") out += Delta({{"type", "signature_delta"}, {"signature", ""}});  // (Claude Code shows thinking on it)
    out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
    return out;
  }

  std::string id_, model_;
  std::string open_;  // the open block's kind ("" none)
  int index_ = 0;
};

}  // namespace

std::string AnthropicErrorBody(const ApiError& e) {
  const char* type = e.status == 401 ? "authentication_error" : e.status == 403 ? "permission_error"
                   : e.status == 404 ? "not_found_error" : e.status == 413 ? "request_too_large"
                   : e.status == 429 ? "rate_limit_error" : e.status == 503 ? "overloaded_error"
                   : e.status >= 500 ? "api_error" : "invalid_request_error";
  return core::JsonText(nlohmann::json({{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}}));
}

std::unique_ptr<Exchange> MessagesDoor::Parse(const HttpRequest&, const nlohmann::ordered_json& body, ApiError* err) {
  Translation t;
  if (!Translate(body, count_, &t, err)) return nullptr;
  auto ex = std::make_unique<MessagesExchange>(t.model);
  if (count_) t.body["max_tokens"] = 1;
  CompletionLimits limits = limits_;
  limits.model_name.clear();  // any model name: echoed, not checked
  if (!ParseCompletionRequest(t.body, /*chat=*/true, limits, &ex->request, err)) {
    // The chat form's names back to the Messages API's.
    if (err->param == "stop") err->param = "stop_sequences";
    if (err->param == "response_format") err->param = "output_config.format";
    return nullptr;
  }
  ex->ignored = std::move(t.skipped);
  if (t.prewarm) ex->request.params.continuation = std::vector<int32_t>{};
  if (t.marked) {
    ex->cache_mark_tokens = Exchange::kWholePrompt;
    ex->cache_mark_ttl_seconds = t.mark_ttl;
  }
  return ex;
}

std::string MessagesDoor::ErrorBody(const ApiError& e) const { return AnthropicErrorBody(e); }

}  // namespace radixlm::serve
