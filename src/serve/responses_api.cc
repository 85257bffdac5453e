#include "serve/responses_api.h"

#include <map>
#include <random>
#include <set>

#include "core/json_text.h"
#include "serve/openai_api.h"

namespace radixlm::serve {
namespace {

using ojson = nlohmann::ordered_json;

bool Bad(ApiError* err, const std::string& message, const std::string& param) {
  *err = {400, message, "invalid_request_error", param, "invalid_value"};
  return false;
}

// What the door does with each top-level field of a Responses request.
enum class Field { kRead, kSkip, kRefuse };
const std::map<std::string, Field>& Fields() {
  static const std::map<std::string, Field> f = {
      {"model", Field::kRead}, {"input", Field::kRead}, {"instructions", Field::kRead}, {"tools", Field::kRead},
      {"tool_choice", Field::kRead}, {"parallel_tool_calls", Field::kRead}, {"max_output_tokens", Field::kRead},
      {"temperature", Field::kRead}, {"top_p", Field::kRead}, {"text", Field::kRead}, {"reasoning", Field::kRead},
      {"store", Field::kRead}, {"previous_response_id", Field::kRead}, {"stream", Field::kRead},
      {"prompt_cache_key", Field::kRead}, {"prompt_cache_retention", Field::kRead}, {"metadata", Field::kRead},
      {"user", Field::kRead}, {"safety_identifier", Field::kRead}, {"truncation", Field::kRead},
      {"cache_salt", Field::kRead},  // radixlm's (as in chat completions): tenancy of the prefix cache
      // Nothing a local server can act on: skipped, named in the Warning header.
      {"include", Field::kSkip}, {"client_metadata", Field::kSkip}, {"service_tier", Field::kSkip},
      {"max_tool_calls", Field::kSkip}, {"stream_options", Field::kSkip}, {"context_management", Field::kSkip},
      {"top_logprobs", Field::kSkip},
      // Would change what the request means: refused.
      {"background", Field::kRefuse}, {"conversation", Field::kRefuse}, {"prompt", Field::kRefuse},
  };
  return f;
}

// The text of a message item's content: a string or input_text / output_text / refusal parts.
bool ContentText(const ojson& content, const std::string& where, std::string* text, ApiError* err) {
  if (content.is_string()) {
    *text = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) return Bad(err, "'content' must be a string or a list of parts", where);
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& p = content[i];
    const std::string type = p.is_object() ? FieldString(p, "type", "") : "";
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "refusal")
      return Bad(err, "content part type '" + type + "': this model reads text only (input_text, output_text, refusal)",
                 where + "[" + std::to_string(i) + "].type");
    if (!p.contains(key) || !p[key].is_string()) return Bad(err, std::string("a part needs a string '") + key + "'", where);
    *text += p[key].get<std::string>();
  }
  return true;
}

struct Conversation {
  ojson messages = ojson::array();  // the chat form (a leading system message from the input's own items)
  std::string instructions;         // not carried over by previous_response_id
  std::set<std::string> call_ids;
};

// Items' pass over the input: the assistant turn being gathered (content, reasoning, calls) and
// the system text not placed yet. One method per item type, each appending to *c.
class ItemReader {
 public:
  // leading: no earlier turn, so system text read now becomes the conversation's system message.
  ItemReader(Conversation* c, bool leading) : c_(c), leading_(leading) {}

  bool Message(const ojson& item, const std::string& at, ApiError* err) {
    const std::string role = FieldString(item, "role", "");
    std::string text;
    if (!item.contains("content")) return Bad(err, "a message needs 'content'", at);
    if (!ContentText(item["content"], at + ".content", &text, err)) return false;
    if (role == "system" || role == "developer") {
      std::string& to = leading_ ? leading_system_ : pending_system_;
      to += (to.empty() ? "" : "\n\n") + text;
    } else if (role == "user") {
      Flush();
      leading_ = false;
      if (!pending_system_.empty()) text = pending_system_ + "\n\n" + text;
      pending_system_.clear();
      c_->messages.push_back({{"role", "user"}, {"content", text}});
    } else if (role == "assistant") {
      leading_ = false;
      std::string& content = Turn()["content"].get_ref<std::string&>();
      content += text;
    } else {
      return Bad(err, "unknown role '" + role + "' (system, developer, user, assistant)", at + ".role");
    }
    return true;
  }

  bool FunctionCall(const ojson& item, const std::string& at, ApiError* err) {
    leading_ = false;
    if (!item.contains("call_id") || !item["call_id"].is_string() || !item.contains("name") || !item["name"].is_string() ||
        !item.contains("arguments") || !item["arguments"].is_string())
      return Bad(err, "a function_call needs string 'call_id', 'name' and 'arguments'", at);
    c_->call_ids.insert(item["call_id"].get<std::string>());
    ojson& t = Turn();
    if (!t.contains("tool_calls")) t["tool_calls"] = ojson::array();
    t["tool_calls"].push_back(
        {{"id", item["call_id"]}, {"type", "function"}, {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    return true;
  }

  bool FunctionCallOutput(const ojson& item, const std::string& at, ApiError* err) {
    Flush();
    leading_ = false;
    if (!item.contains("call_id") || !item["call_id"].is_string()) return Bad(err, "a function_call_output needs a string 'call_id'", at);
    const std::string id = item["call_id"].get<std::string>();
    if (!c_->call_ids.count(id)) return Bad(err, "no earlier function_call has the call_id '" + id + "'", at + ".call_id");
    std::string text;
    if (!item.contains("output")) return Bad(err, "a function_call_output needs 'output'", at);
    if (!ContentText(item["output"], at + ".output", &text, err)) return false;
    c_->messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
    return true;
  }

  void Reasoning(const ojson& item) {
    leading_ = false;
    Turn();
    std::string text;  // the raw reasoning text, else the summaries'
    for (const char* key : {"content", "summary"}) {
      if (!text.empty() || !item.contains(key) || !item[key].is_array()) continue;
      for (const ojson& p : item[key])
        if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
    }
    reasoning_ += text;
  }

  // After the last item: the open assistant turn, system text no turn followed (as a user
  // message) and the leading system message.
  void Finish() {
    Flush();
    if (!pending_system_.empty()) c_->messages.push_back({{"role", "user"}, {"content", pending_system_}});
    if (!leading_system_.empty()) c_->messages.insert(c_->messages.begin(), ojson{{"role", "system"}, {"content", leading_system_}});
  }

 private:
  void Flush() {
    if (assistant_.is_null()) return;
    if (!reasoning_.empty()) assistant_["reasoning_content"] = reasoning_;
    reasoning_.clear();
    c_->messages.push_back(std::move(assistant_));
    assistant_ = nullptr;
  }
  ojson& Turn() {
    if (assistant_.is_null()) assistant_ = {{"role", "assistant"}, {"content", ""}};
    return assistant_;
  }

  Conversation* c_;
  bool leading_;
  ojson assistant_;  // the assistant turn being gathered, null: none
  std::string pending_system_, reasoning_, leading_system_;
};

// Input items into chat messages, appended to *c (see the header for the rules).
bool Items(const ojson& input, bool continuing, Conversation* c, ApiError* err) {
  ItemReader reader(c, !continuing && c->messages.empty());
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return Bad(err, "each input item must be an object", at);
    const std::string type = item.contains("type") ? FieldString(item, "type", "") : item.contains("role") ? "message" : "";
    if (type == "message") {
      if (!reader.Message(item, at, err)) return false;
    } else if (type == "function_call") {
      if (!reader.FunctionCall(item, at, err)) return false;
    } else if (type == "function_call_output") {
      if (!reader.FunctionCallOutput(item, at, err)) return false;
    } else if (type == "reasoning") {
      reader.Reasoning(item);
    } else {
      return Bad(err, "input item type '" + type + "' is not one this server reads (message, function_call, "
                      "function_call_output, reasoning)", at + ".type");
    }
  }
  reader.Finish();
  return true;
}

ojson ChatTools(const ojson& tools, std::vector<std::string>* skipped, ApiError* err, bool* ok) {
  ojson out = ojson::array();
  *ok = true;
  if (!tools.is_array()) {
    *ok = Bad(err, "'tools' must be a list", "tools");
    return out;
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string type = t.is_object() ? FieldString(t, "type", "") : "";
    if (type != "function") {  // hosted tools (web_search, file_search, ...), namespaces, custom grammars
      skipped->push_back("tools[" + std::to_string(i) + "] (" + (type.empty() ? "?" : type) + ")");
      continue;
    }
    ojson f = {{"name", FieldString(t, "name", "")}};
    if (t.contains("description") && t["description"].is_string()) f["description"] = t["description"];
    f["parameters"] = t.contains("parameters") && t["parameters"].is_object() ? t["parameters"] : ojson::object();
    if (t.contains("strict") && t["strict"].is_boolean()) f["strict"] = t["strict"];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

// ---- the answer -------------------------------------------------------------------------------

class ResponsesExchange : public Exchange {
 public:
  ResponsesExchange(const tokenizer::Tokenizer& tok, ResponseStore& store) : tok_(tok), store_(store) {}

  std::string id = RandomId("resp_"), scope, model;
  int64_t created = UnixNow();
  ojson echo = ojson::object();   // request fields the Response object repeats
  ojson stored_messages;          // the conversation (chat form, no instructions) for the store
  bool store = true;
  std::shared_ptr<const StoredResponse> previous;

  std::string StreamStart(const AnswerStart&) override {
    std::string out = Event("response.created", {{"response", Response("in_progress", ojson::array())}});
    out += Event("response.in_progress", {{"response", Response("in_progress", ojson::array())}});
    return out;
  }

  std::string StreamDelta(int, const ChoiceOutput&, const ChoiceDelta& d) override { return Items(d); }

  std::string StreamChoiceEnd(int, const ChoiceDelta& last, const ChoiceEnd& end) override {
    std::string out = Items(last);
    out += Close();
    const bool cut = end.reason == engine::FinishReason::kLength && end.output->Final().calls.empty();
    final_ = Response(cut ? "incomplete" : "completed", output_, UsageOf(end));
    out += Event(cut ? "response.incomplete" : "response.completed", {{"response", final_}});
    return out;
  }

  std::string StreamEnd(const engine::Usage&) override { return ""; }

  std::string StreamError(const ApiError& e) override {
    ojson r = Response("failed", output_);
    r["error"] = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.message}};
    return Event("response.failed", {{"response", r}});
  }

  // Before any output: a whole in_progress Response (an event, which Codex's idle timer sees);
  // after: an SSE comment (a Response there would have to repeat every item so far).
  std::string StreamKeepalive() override {
    if (!output_.empty() || !open_.empty()) return ": keepalive\n\n";
    return Event("response.in_progress", {{"response", Response("in_progress", ojson::array())}});
  }

  std::string Whole(const std::vector<ChoiceEnd>& ends, const engine::Usage&) override {
    const ChoiceEnd& end = ends[0];
    const ParsedOutput& p = end.output->Final();
    ojson output = ojson::array();
    if (!p.reasoning.empty()) output.push_back(ReasoningItem(RandomId("rs_"), p.reasoning, "completed"));
    if (!p.content.empty() || (p.reasoning.empty() && p.calls.empty())) output.push_back(MessageItem(RandomId("msg_"), p.content, "completed"));
    for (const ToolCall& c : p.calls) output.push_back(CallItem(c.id, c.name, c.arguments, "completed"));
    const bool cut = end.reason == engine::FinishReason::kLength && p.calls.empty();
    final_ = Response(cut ? "incomplete" : "completed", output, UsageOf(end));
    return final_.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }

  void Finished(const std::vector<int32_t>& prompt, const std::vector<ChoiceEnd>& ends, const engine::Usage&) override {
    if (!store || ends.empty() || ends[0].reason == engine::FinishReason::kError || final_.is_null()) return;
    auto entry = std::make_shared<StoredResponse>();
    entry->id = id;
    entry->scope = scope;
    entry->response = final_;
    entry->messages = stored_messages;
    entry->messages.push_back(AssistantMessage(ends[0].output->Final(), /*arguments_as_objects=*/false));
    entry->Measure();
    store_.Put(std::move(entry));
  }

 private:
  std::string Event(const char* type, ojson data) {
    ojson e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : data.items()) e[k] = std::move(v);
    return std::string("event: ") + type + "\ndata: " + e.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n\n";
  }

  ojson UsageOf(const ChoiceEnd& end) const {
    const engine::Usage& u = end.usage;
    const std::string& reasoning = end.output->Final().reasoning;
    const int64_t reasoning_tokens = reasoning.empty() ? 0 : static_cast<int64_t>(tok_.Encode(reasoning).size());
    return {{"input_tokens", u.prompt_tokens}, {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
            {"output_tokens", u.completion_tokens}, {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  }

  // The Response object: in progress or failed (no usage), or ended (completed / incomplete).
  ojson Response(const char* status, const ojson& output, const ojson& usage = nullptr) const {
    ojson r = {{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status}};
    if (!usage.is_null()) r["completed_at"] = UnixNow();
    r["error"] = nullptr;
    r["incomplete_details"] = std::string(status) == "incomplete" ? ojson{{"reason", "max_output_tokens"}} : ojson(nullptr);
    r["model"] = model;
    r["output"] = output;
    for (auto& [k, v] : echo.items()) r[k] = v;
    r["usage"] = usage;
    return r;
  }

  static ojson ReasoningItem(const std::string& item_id, const std::string& text, const char* status) {
    ojson content = ojson::array();
    if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
    return {{"id", item_id}, {"type", "reasoning"}, {"summary", ojson::array()}, {"content", content},
            {"encrypted_content", nullptr}, {"status", status}};
  }
  static ojson MessageItem(const std::string& item_id, const std::string& text, const char* status) {
    ojson content = ojson::array();
    if (std::string(status) == "completed" || !text.empty())
      content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}});
    return {{"id", item_id}, {"type", "message"}, {"role", "assistant"}, {"status", status}, {"content", content}};
  }
  static ojson CallItem(const std::string& call_id, const std::string& name, const std::string& arguments, const char* status) {
    return {{"id", "fc_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id)}, {"type", "function_call"},
            {"status", status}, {"call_id", call_id}, {"name", name}, {"arguments", arguments}};
  }

  // Output items as the deltas come: a reasoning item, a message item, then function calls
  // (parsed, at the end); an item is closed (its .done events) before the next one opens.
  std::string Items(const ChoiceDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      out += Open("reasoning");
      text_ += d.reasoning;
      out += Event("response.reasoning_text.delta",
                   {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += Open("message");
      text_ += d.content;
      out += Event("response.output_text.delta", {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0},
                                                  {"delta", d.content}, {"logprobs", ojson::array()}});
    }
    if (d.tool_calls.is_array()) {
      for (const ojson& c : d.tool_calls) {
        out += Close();
        const ojson& f = c["function"];
        const std::string call_id = FieldString(c, "id", ""), name = FieldString(f, "name", ""), args = FieldString(f, "arguments", "{}");
        ojson item = CallItem(call_id, name, "", "in_progress");
        const std::string fc = item["id"];
        const size_t index = output_.size();
        out += Event("response.output_item.added", {{"output_index", index}, {"item", item}});
        out += Event("response.function_call_arguments.delta", {{"item_id", fc}, {"output_index", index}, {"delta", args}});
        out += Event("response.function_call_arguments.done", {{"item_id", fc}, {"output_index", index}, {"name", name}, {"arguments", args}});
        item = CallItem(call_id, name, args, "completed");
        out += Event("response.output_item.done", {{"output_index", index}, {"item", item}});
        output_.push_back(item);
      }
    }
    return out;
  }
  std::string Open(const std::string& kind) {
    if (open_ == kind) return "";
    std::string out = Close();
    open_ = kind;
    item_id_ = RandomId(kind == "reasoning" ? "rs_" : "msg_");
    text_.clear();
    const size_t index = output_.size();
    const bool reasoning = kind == "reasoning";
    out += Event("response.output_item.added",
                 {{"output_index", index}, {"item", reasoning ? ReasoningItem(item_id_, "", "in_progress") : MessageItem(item_id_, "", "in_progress")}});
    const ojson part = reasoning ? ojson{{"type", "reasoning_text"}, {"text", ""}}
                                 : ojson{{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}};
    out += Event("response.content_part.added", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    return out;
  }
  std::string Close() {
    if (open_.empty()) return "";
    const size_t index = output_.size();
    const bool reasoning = open_ == "reasoning";
    std::string out;
    if (reasoning) {
      out += Event("response.reasoning_text.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    } else {
      out += Event("response.output_text.done",
                   {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", text_}, {"logprobs", ojson::array()}});
    }
    const ojson part = reasoning ? ojson{{"type", "reasoning_text"}, {"text", text_}}
                                 : ojson{{"type", "output_text"}, {"text", text_}, {"annotations", ojson::array()}};
    out += Event("response.content_part.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    const ojson item = reasoning ? ReasoningItem(item_id_, text_, "completed") : MessageItem(item_id_, text_, "completed");
    out += Event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(item);
    open_.clear();
    return out;
  }

  const tokenizer::Tokenizer& tok_;
  ResponseStore& store_;
  int64_t seq_ = 0;
  ojson output_ = ojson::array();  // items done
  std::string open_, item_id_, text_;  // the open item: kind, id, its text so far
  ojson final_;                        // the last Response object (stored)
};

}  // namespace

std::string ResponseScope(const HttpRequest& req, const std::string& cache_salt) {
  std::string key = req.Header("Authorization");
  if (key.empty()) key = req.Header("x-api-key");
  return key + '\0' + cache_salt;
}

namespace {

// Every field of the body in the door's table: an unknown one is an error, a refused one set
// is an error, a skipped one is named in the Warning header.
bool CheckFields(const ojson& body, ResponsesExchange* ex, ApiError* err) {
  for (const auto& [key, v] : body.items()) {
    auto it = Fields().find(key);
    if (it == Fields().end()) return Bad(err, "Unknown parameter: '" + key + "'.", key);
    if (it->second == Field::kRefuse && !v.is_null() && v != false) return Bad(err, "'" + key + "' is not supported by this server", key);
    if (it->second == Field::kSkip) ex->ignored.push_back(key);
  }
  return true;
}

// previous_response_id: the stored conversation this one continues (in the caller's scope).
bool ContinuePrevious(const ojson& body, ResponseStore& store, ResponsesExchange* ex, Conversation* c, ApiError* err) {
  if (!body.contains("previous_response_id") || body["previous_response_id"].is_null()) return true;
  if (!body["previous_response_id"].is_string()) return Bad(err, "'previous_response_id' must be a string", "previous_response_id");
  ex->previous = store.Get(body["previous_response_id"].get<std::string>(), ex->scope);
  if (!ex->previous) {
    *err = {404, "Previous response with id '" + body["previous_response_id"].get<std::string>() + "' not found.",
            "invalid_request_error", "previous_response_id", "previous_response_not_found"};
    return false;
  }
  c->messages = ex->previous->messages;
  for (const ojson& m : c->messages)
    if (m.contains("tool_calls"))
      for (const ojson& call : m["tool_calls"]) c->call_ids.insert(FieldString(call, "id", ""));
  return true;
}

// The chat messages: the previous conversation, the input's items, and the instructions ahead
// of (joined with) the input's own system message.
bool ChatMessages(const ojson& body, ResponsesExchange* ex, Conversation* c, ojson* chat, ApiError* err) {
  if (body.contains("instructions") && body["instructions"].is_string()) c->instructions = body["instructions"].get<std::string>();
  if (!body.contains("input")) return Bad(err, "Missing required parameter: 'input'.", "input");
  ojson input = body["input"];
  if (input.is_string()) input = ojson::array({{{"role", "user"}, {"content", input.get<std::string>()}}});
  if (!input.is_array()) return Bad(err, "'input' must be a string or a list of items", "input");
  if (!Items(input, ex->previous != nullptr, c, err)) return false;
  ex->stored_messages = c->messages;
  (*chat)["messages"] = c->messages;
  if (!c->instructions.empty()) {
    ojson& first = (*chat)["messages"];
    if (!first.empty() && FieldString(first[0], "role", "") == "system")
      first[0]["content"] = c->instructions + "\n\n" + first[0]["content"].get<std::string>();
    else
      first.insert(first.begin(), ojson{{"role", "system"}, {"content", c->instructions}});
  }
  if ((*chat)["messages"].empty()) return Bad(err, "'input' has no message", "input");
  return true;
}

bool ChatToolFields(const ojson& body, ResponsesExchange* ex, ojson* chat, ApiError* err) {
  if (body.contains("tools") && !body["tools"].is_null()) {
    bool ok = true;
    ojson tools = ChatTools(body["tools"], &ex->ignored, err, &ok);
    if (!ok) return false;
    if (!tools.empty()) (*chat)["tools"] = std::move(tools);
  }
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return true;
  const ojson& tc = body["tool_choice"];
  if (tc.is_string()) (*chat)["tool_choice"] = tc;
  else if (tc.is_object() && FieldString(tc, "type", "") == "function" && tc.contains("name"))
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  else return Bad(err, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\"}", "tool_choice");
  return true;
}

// text.format (the output's JSON shape) and reasoning.effort, in the chat request's terms.
bool TextAndReasoning(const ojson& body, ResponsesExchange* ex, ojson* chat, ApiError* err) {
  if (body.contains("text") && body["text"].is_object()) {
    const ojson& t = body["text"];
    if (t.contains("verbosity")) ex->ignored.push_back("text.verbosity");
    if (t.contains("format") && t["format"].is_object()) {
      const std::string type = FieldString(t["format"], "type", "text");
      if (type == "json_object") (*chat)["response_format"] = {{"type", "json_object"}};
      else if (type == "json_schema")
        (*chat)["response_format"] = {{"type", "json_schema"},
                                      {"json_schema", {{"name", FieldString(t["format"], "name", "output")},
                                                       {"schema", t["format"].value("schema", ojson::object())},
                                                       {"strict", FieldBool(t["format"], "strict", false)}}}};
      else if (type != "text") return Bad(err, "unknown text.format type '" + type + "'", "text.format.type");
    }
  }
  if (!body.contains("reasoning") || !body["reasoning"].is_object()) return true;
  const ojson& r = body["reasoning"];
  if (r.contains("effort") && r["effort"].is_string()) {
    const std::string e = r["effort"].get<std::string>();
    (*chat)["reasoning_effort"] = e == "low" || e == "medium" || e == "high" ? e : e == "minimal" || e == "none" ? "low" : "high";
    // No reasoning asked for: the templates' switch for it (Qwen3's enable_thinking).
    if (e == "none" || e == "minimal") (*chat)["chat_template_kwargs"] = {{"enable_thinking", false}};
  }
  if (r.contains("summary") && !r["summary"].is_null()) ex->ignored.push_back("reasoning.summary");
  return true;
}

// The request fields the Response object repeats, with the API's defaults.
void EchoFields(const ojson& body, ResponsesExchange* ex) {
  for (const char* k : {"instructions", "max_output_tokens", "parallel_tool_calls", "previous_response_id", "temperature",
                        "tool_choice", "tools", "top_p", "metadata", "reasoning", "text", "truncation", "user", "store"})
    ex->echo[k] = body.contains(k) ? body[k] : ojson(nullptr);
  const std::pair<const char*, ojson> defaults[] = {
      {"tools", ojson::array()},    {"tool_choice", "auto"},      {"parallel_tool_calls", true},
      {"metadata", ojson::object()}, {"truncation", "disabled"},   {"text", {{"format", {{"type", "text"}}}}},
      {"temperature", 1.0},          {"top_p", 1.0}};
  for (const auto& [k, v] : defaults)
    if (ex->echo[k].is_null()) ex->echo[k] = v;
  ex->echo["store"] = ex->store;
}

}  // namespace

std::unique_ptr<Exchange> ResponsesDoor::Parse(const HttpRequest& req, const nlohmann::ordered_json& body, ApiError* err) {
  if (!body.is_object()) return Bad(err, "the body must be a JSON object", ""), nullptr;
  auto ex = std::make_unique<ResponsesExchange>(tok_, store_);
  if (!CheckFields(body, ex.get(), err)) return nullptr;
  ex->model = body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
  const std::string salt = body.contains("cache_salt") && body["cache_salt"].is_string() ? body["cache_salt"].get<std::string>() : "";
  ex->scope = ResponseScope(req, salt);
  ex->store = !body.contains("store") || body["store"].is_null() || body["store"] == true;
  Conversation c;
  ojson chat = ojson::object();
  if (!ContinuePrevious(body, store_, ex.get(), &c, err) || !ChatMessages(body, ex.get(), &c, &chat, err) ||
      !ChatToolFields(body, ex.get(), &chat, err))
    return nullptr;
  for (const char* k : {"parallel_tool_calls", "temperature", "top_p", "stream", "cache_salt", "user"})
    if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];
  // Unset: up to what the context leaves (the server cuts it), as the API's null means.
  chat["max_tokens"] = body.contains("max_output_tokens") && !body["max_output_tokens"].is_null() ? body["max_output_tokens"]
                                                                                                   : ojson(limits_.max_total_tokens);
  if (!TextAndReasoning(body, ex.get(), &chat, err)) return nullptr;
  CompletionLimits limits = limits_;
  limits.model_name.clear();
  if (!ParseCompletionRequest(chat, /*chat=*/true, limits, &ex->request, err)) {
    if (err->param == "max_tokens") err->param = "max_output_tokens";
    if (err->param == "response_format") err->param = "text.format";
    if (err->param == "messages") err->param = "input";
    return nullptr;
  }
  if (body.contains("prompt_cache_key") && body["prompt_cache_key"].is_string()) {
    ex->cache_mark_tokens = Exchange::kWholePrompt;
    ex->cache_mark_ttl_seconds = FieldString(body, "prompt_cache_retention", "") == "24h" ? 86400 : 300;
  }
  EchoFields(body, ex.get());
  return ex;
}

std::string ResponsesDoor::ErrorBody(const ApiError& e) const { return core::JsonText(serve::ErrorBody(e)); }

void ResponsesDoor::Get(const HttpRequest& req, HttpResponse& res) const {
  const std::string id = req.path.substr(std::string("/v1/responses/").size());
  std::string salt;  // ?cache_salt=... (the scope a stored response was made in)
  if (const size_t q = req.target.find("cache_salt="); q != std::string::npos) salt = req.target.substr(q + 11, req.target.find('&', q) - q - 11);
  auto r = store_.Get(id, ResponseScope(req, salt));
  if (!r) {
    res.status = 404;
    res.SetContent(ErrorBody({404, "No response found with id '" + id + "'.", "invalid_request_error", "response_id", "not_found"}),
                   "application/json");
    return;
  }
  res.SetContent(r->response.dump(-1, ' ', false, ojson::error_handler_t::replace), "application/json");
}

}  // namespace radixlm::serve
