// The chat and output fields of a completion request (completion_request.h): messages with tool
// calls and results, tools, tool_choice, the template's keyword arguments, response_format,
// grammar, logprobs. Each is checked against OpenAI's shapes; what the template is handed is the
// client's messages as sent, normalised the way vLLM hands them to a Hugging Face template
// (content parts joined into a string; a tool call's arguments parsed into an object).
#include <algorithm>

#include "serve/completion_request.h"

namespace radixlm::serve {
namespace {

using json = nlohmann::ordered_json;

bool Bad(ApiError* err, const std::string& message, const char* param, const char* code = "invalid_value") {
  *err = {400, message, "invalid_request_error", param, code};
  return false;
}

bool ValidFunctionName(const std::string& n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

// A message's content as the template sees it: a string, or null (assistant turns that only
// call tools). Text parts are joined; other parts are refused (this server reads text only).
bool Content(const json& m, json* out, std::string* text, ApiError* err) {
  if (!m.contains("content") || m["content"].is_null()) {
    *out = nullptr;
    return true;
  }
  const json& c = m["content"];
  if (c.is_string()) {
    *text = c.get<std::string>();
    *out = *text;
    return true;
  }
  if (!c.is_array()) return Bad(err, "each message needs 'content' (a string or a list of text parts)", "messages", "invalid_type");
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
      return Bad(err, "content parts must be {\"type\": \"text\", \"text\": string}; this model reads text only", "messages",
                 "invalid_type");
    *text += part["text"].get<std::string>();
  }
  *out = *text;
  return true;
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
bool ToolCalls(const json& calls, json* out, ApiError* err) {
  if (!calls.is_array()) return Bad(err, "'tool_calls' must be a list", "messages", "invalid_type");
  *out = json::array();
  for (const json& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string())
      return Bad(err, "each tool call needs 'function' with a string 'name'", "messages", "invalid_type");
    json call = c;
    const json& f = c["function"];
    // Templates iterate arguments as a mapping (|items) or print it with tojson: hand them the
    // object when the text is one (vLLM does the same).
    if (f.contains("arguments") && f["arguments"].is_string()) {
      const json args = json::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (args.is_object()) call["function"]["arguments"] = args;
    }
    if (!call.contains("type")) call["type"] = "function";
    out->push_back(std::move(call));
  }
  return true;
}

bool Messages(const json& body, CompletionRequest* out, ApiError* err) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return Bad(err, "'messages' must be a non-empty list", "messages", "invalid_type");
  json messages = json::array();
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  for (const json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return Bad(err, "each message needs a string 'role'", "messages", "invalid_type");
    const std::string role = m["role"].get<std::string>();
    if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return role == r; }))
      return Bad(err, "unknown message role '" + role + "' (system, developer, user, assistant, tool)", "messages");
    json msg = {{"role", role}};
    std::string text;
    json content;
    if (!Content(m, &content, &text, err)) return false;
    if (content.is_null() && !(role == "assistant" && m.contains("tool_calls")) && !(m.contains("content") && m["content"].is_null()))
      return Bad(err, "each message needs 'content' (a string or a list of text parts)", "messages", "invalid_type");
    // null (an assistant turn that only calls tools) is handed over as "", as vLLM does: the
    // templates test content with `in` and `+`, which fail on None.
    msg["content"] = content.is_null() ? json("") : content;
    if (!text.empty()) out->literal_texts.push_back(text);
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (role != "assistant") return Bad(err, "only assistant messages carry 'tool_calls'", "messages");
      if (!ToolCalls(m["tool_calls"], &msg["tool_calls"], err)) return false;
    }
    for (const char* key : {"name", "tool_call_id", "reasoning_content", "thinking"})
      if (m.contains(key) && !m[key].is_null()) {
        if (!m[key].is_string()) return Bad(err, std::string("'") + key + "' must be a string", "messages", "invalid_type");
        msg[key] = m[key];
      }
    messages.push_back(std::move(msg));
  }
  out->chat_vars["messages"] = std::move(messages);
  return true;
}

bool Tools(const json& body, CompletionRequest* out, ApiError* err) {
  if (!body.contains("tools") || body["tools"].is_null()) return true;
  const json& tools = body["tools"];
  if (!tools.is_array()) return Bad(err, "'tools' must be a list", "tools", "invalid_type");
  for (const json& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
      return Bad(err, "each tool must be {\"type\": \"function\", \"function\": {...}}", "tools", "invalid_type");
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !ValidFunctionName(f["name"].get<std::string>()))
      return Bad(err, "a tool's function name must be 1-64 letters, digits, '_', '-' or '.'", "tools");
    Tool tool;
    tool.name = f["name"].get<std::string>();
    if (f.contains("description") && f["description"].is_string()) tool.description = f["description"].get<std::string>();
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      if (!f["parameters"].is_object()) return Bad(err, "a tool's 'parameters' must be a JSON Schema object", "tools", "invalid_type");
      tool.parameters = f["parameters"];
    }
    for (const Tool& other : out->tools)
      if (other.name == tool.name) return Bad(err, "two tools are named '" + tool.name + "'", "tools");
    out->tools.push_back(std::move(tool));
  }
  if (!tools.empty()) out->chat_vars["tools"] = tools;
  return true;
}

bool ToolChoiceField(const json& body, CompletionRequest* out, ApiError* err) {
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) return Bad(err, "'parallel_tool_calls' must be a boolean", "parallel_tool_calls", "invalid_type");
    out->parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) {
    out->tool_choice = out->tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
    return true;
  }
  const json& c = body["tool_choice"];
  if (c == "none") out->tool_choice = ToolChoice::kNone;
  else if (c == "auto") out->tool_choice = ToolChoice::kAuto;
  else if (c == "required") out->tool_choice = ToolChoice::kRequired;
  else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") && c["function"].is_object() &&
           c["function"].contains("name") && c["function"]["name"].is_string()) {
    out->tool_choice = ToolChoice::kNamed;
    out->tool_name = c["function"]["name"].get<std::string>();
    if (std::none_of(out->tools.begin(), out->tools.end(), [&](const Tool& t) { return t.name == out->tool_name; }))
      return Bad(err, "tool_choice names '" + out->tool_name + "', which is not in 'tools'", "tool_choice");
  } else {
    return Bad(err, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}",
               "tool_choice", "invalid_type");
  }
  if (out->tools.empty() && out->tool_choice != ToolChoice::kNone && out->tool_choice != ToolChoice::kAuto)
    return Bad(err, "'tool_choice' requires 'tools'", "tool_choice");
  if (out->tools.empty()) out->tool_choice = ToolChoice::kNone;
  return true;
}

bool TemplateKwargs(const json& body, CompletionRequest* out, ApiError* err) {
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    const json& kw = body["chat_template_kwargs"];
    if (!kw.is_object()) return Bad(err, "'chat_template_kwargs' must be an object", "chat_template_kwargs", "invalid_type");
    for (auto it = kw.begin(); it != kw.end(); ++it) {
      if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt")
        return Bad(err, "'chat_template_kwargs' may not set '" + it.key() + "'", "chat_template_kwargs");
      out->chat_vars[it.key()] = it.value();
    }
  }
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    const json& r = body["reasoning_effort"];
    if (!r.is_string() || (r != "low" && r != "medium" && r != "high" && r != "minimal"))
      return Bad(err, "'reasoning_effort' must be \"minimal\", \"low\", \"medium\" or \"high\"", "reasoning_effort");
    out->chat_vars["reasoning_effort"] = r;
  }
  return true;
}

bool ResponseFormat(const json& body, CompletionRequest* out, ApiError* err) {
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const json& f = body["response_format"];
    const std::string type = f.is_object() && f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
    if (type == "text") {
      out->format = OutputFormat::kText;
    } else if (type == "json_object") {
      out->format = OutputFormat::kJsonObject;
    } else if (type == "json_schema") {
      if (!f.contains("json_schema") || !f["json_schema"].is_object() || !f["json_schema"].contains("schema") ||
          !(f["json_schema"]["schema"].is_object() || f["json_schema"]["schema"].is_boolean()))
        return Bad(err, "response_format json_schema needs {\"json_schema\": {\"name\", \"schema\": {...}}}", "response_format", "invalid_type");
      const json& js = f["json_schema"];
      if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
        return Bad(err, "'strict' must be a boolean", "response_format", "invalid_type");
      // strict or not, the output is generated under the schema (an exact grammar or a 400);
      // strict also closes objects (no members beyond `properties`), as OpenAI's strict mode.
      out->format = OutputFormat::kJsonSchema;
      const bool strict = js.contains("strict") && js["strict"] == true;
      out->format_text = (strict ? StrictObjects(js["schema"]) : js["schema"]).dump();
    } else {
      return Bad(err, "'response_format' type must be \"text\", \"json_object\" or \"json_schema\"", "response_format", "invalid_type");
    }
  }
  if (body.contains("grammar") && !body["grammar"].is_null()) {
    if (!body["grammar"].is_string() || body["grammar"].get<std::string>().empty())
      return Bad(err, "'grammar' must be a non-empty GBNF string", "grammar", "invalid_type");
    if (out->format != OutputFormat::kText) return Bad(err, "'grammar' and 'response_format' cannot both constrain the output", "grammar");
    out->format = OutputFormat::kGrammar;
    out->format_text = body["grammar"].get<std::string>();
  }
  return true;
}

bool Logprobs(const json& body, CompletionRequest* out, ApiError* err) {
  if (out->chat) {
    bool on = false;
    if (body.contains("logprobs") && !body["logprobs"].is_null()) {
      if (!body["logprobs"].is_boolean()) return Bad(err, "'logprobs' must be a boolean", "logprobs", "invalid_type");
      on = body["logprobs"].get<bool>();
    }
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
      if (!IntegerFits<int, json>(body["top_logprobs"])) return Bad(err, "'top_logprobs' must be an integer", "top_logprobs", "invalid_type");
      const int k = body["top_logprobs"].get<int>();
      if (k < 0 || k > 20) return Bad(err, "'top_logprobs' must be in [0, 20]", "top_logprobs");
      if (!on) return Bad(err, "'top_logprobs' requires 'logprobs': true", "top_logprobs");
      out->top_logprobs = k;
    } else if (on) {
      out->top_logprobs = 0;
    }
    if (body.contains("echo") && !body["echo"].is_null() && body["echo"] != false) return Bad(err, "'echo' is for /v1/completions", "echo");
    return true;
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {  // completions: the number of alternatives
    if (!IntegerFits<int, json>(body["logprobs"])) return Bad(err, "'logprobs' must be an integer", "logprobs", "invalid_type");
    const int k = body["logprobs"].get<int>();
    if (k < 0 || k > 20) return Bad(err, "'logprobs' must be in [0, 20]", "logprobs");
    out->top_logprobs = k;
  }
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) return Bad(err, "'top_logprobs' is for chat; use 'logprobs'", "top_logprobs");
  if (body.contains("echo") && !body["echo"].is_null()) {
    if (!body["echo"].is_boolean()) return Bad(err, "'echo' must be a boolean", "echo", "invalid_type");
    out->echo = body["echo"].get<bool>();
  }
  return true;
}

}  // namespace

bool ParseChatFields(const nlohmann::ordered_json& body, CompletionRequest* out, ApiError* err) {
  out->chat_vars = json::object();
  return Messages(body, out, err) && Tools(body, out, err) && ToolChoiceField(body, out, err) && TemplateKwargs(body, out, err);
}

bool ParseOutputFields(const nlohmann::ordered_json& body, CompletionRequest* out, ApiError* err) {
  if (!out->chat)
    for (const char* key : {"tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort"})
      if (body.contains(key) && !body[key].is_null()) return Bad(err, std::string("'") + key + "' is for /v1/chat/completions", key);
  return ResponseFormat(body, out, err) && Logprobs(body, out, err);
}

}  // namespace radixlm::serve
