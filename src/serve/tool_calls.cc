#include "serve/tool_calls.h"

#include <algorithm>
#include <array>

#include "grammar/json_schema.h"

namespace radixlm::serve {
namespace {

using ojson = nlohmann::ordered_json;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

const Tool* FindTool(std::span<const Tool> tools, const std::string& name) {
  for (const Tool& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

// {"name": s, <args_key>: object-or-JSON-string} -> a call (false when it is not one).
bool CallFromJson(const ojson& j, const char* args_key, ToolCall* call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call->name = j["name"].get<std::string>();
  const ojson* args = j.contains(args_key) ? &j[args_key] : j.contains("arguments") ? &j["arguments"] : nullptr;
  if (!args || args->is_null()) {
    call->arguments = "{}";
    return true;
  }
  if (args->is_string()) {  // arguments already JSON text
    const ojson inner = ojson::parse(args->get<std::string>(), nullptr, false);
    if (!inner.is_object()) return false;
    call->arguments = inner.dump();
    return true;
  }
  if (!args->is_object()) return false;
  call->arguments = args->dump();
  return true;
}

// --- hermes --------------------------------------------------------------------------------

ParsedOutput ParseHermes(const std::string& text, std::span<const Tool>) {
  ParsedOutput out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find("<tool_call>", pos);
    if (open == std::string::npos) break;
    const size_t body = open + 11;
    size_t close = text.find("</tool_call>", body);
    const size_t end = close == std::string::npos ? text.size() : close;
    ToolCall call;
    const ojson j = ojson::parse(Trim(text.substr(body, end - body)), nullptr, false);
    if (!CallFromJson(j, "arguments", &call)) return {text, "", {}};  // not calls: all content
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(call));
    pos = close == std::string::npos ? text.size() : close + 12;
  }
  content += text.substr(pos);
  out.content = out.calls.empty() ? text : Trim(content);
  return out;
}

std::string CallAlternatives(std::span<const std::string> names, std::span<const std::string> args,
                             const std::string& before_name, const std::string& between, const std::string& after) {
  std::string g = "tool-call ::= ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) g += " | ";
    g += "\"" + before_name + names[i] + between + "\" " + args[i] + " \"" + after + "\"";
  }
  return g + "\n";
}

// The rule of the calls: one, or (parallel) one or more joined by `separator` (a GBNF literal).
std::string CallSequence(const std::string& separator, bool parallel) {
  return parallel ? "tool-calls ::= tool-call (" + separator + " tool-call)*\n" : "tool-calls ::= tool-call\n";
}

std::string GrammarHermes(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  return CallAlternatives(names, args, "<tool_call>\\n{\\\"name\\\": \\\"", "\\\", \\\"arguments\\\": ", "}\\n</tool_call>") +
         CallSequence("\"\\n\"", parallel);
}

// --- qwen3_coder (XML) ---------------------------------------------------------------------

// A parameter's value as the schema types it: strings stay text, other types are JSON when
// they parse as such.
ojson XmlValue(const std::string& raw, const Tool* tool, const std::string& param) {
  std::string v = raw;
  if (!v.empty() && v.front() == '\n') v.erase(0, 1);
  if (!v.empty() && v.back() == '\n') v.pop_back();
  std::string type;
  if (tool && tool->parameters.contains("properties") && tool->parameters["properties"].contains(param)) {
    const ojson& p = tool->parameters["properties"][param];
    if (p.contains("type") && p["type"].is_string()) type = p["type"].get<std::string>();
  }
  if (type == "string") return v;
  const ojson parsed = ojson::parse(v, nullptr, false);
  if (!parsed.is_discarded() && (type.empty() ? !parsed.is_string() : true)) return parsed;
  return v;
}

bool ParseXmlFunction(const std::string& body, std::span<const Tool> tools, ToolCall* call) {
  const size_t f = body.find("<function=");
  if (f == std::string::npos) return false;
  const size_t name_end = body.find('>', f);
  if (name_end == std::string::npos) return false;
  call->name = Trim(body.substr(f + 10, name_end - f - 10));
  const Tool* tool = FindTool(tools, call->name);
  ojson args = ojson::object();
  size_t pos = name_end + 1;
  for (;;) {
    const size_t p = body.find("<parameter=", pos);
    if (p == std::string::npos) break;
    const size_t pe = body.find('>', p);
    if (pe == std::string::npos) return false;
    const std::string param = Trim(body.substr(p + 11, pe - p - 11));
    size_t close = body.find("</parameter>", pe);
    const size_t next = body.find("<parameter=", pe);
    const size_t fn_end = body.find("</function>", pe);
    if (close == std::string::npos || (next != std::string::npos && next < close)) close = std::min(next, fn_end);
    if (close == std::string::npos) close = body.size();
    args[param] = XmlValue(body.substr(pe + 1, close - pe - 1), tool, param);
    pos = close;
  }
  call->arguments = args.dump();
  return true;
}

ParsedOutput ParseQwen3Coder(const std::string& text, std::span<const Tool> tools) {
  ParsedOutput out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    size_t open = text.find("<tool_call>", pos);
    const size_t bare = text.find("<function=", pos);  // models sometimes drop the outer tag
    const bool wrapped = open != std::string::npos && (bare == std::string::npos || open < bare);
    if (!wrapped) open = bare;
    if (open == std::string::npos) break;
    const std::string closer = wrapped ? "</tool_call>" : "</function>";
    const size_t close = text.find(closer, open);
    const size_t end = close == std::string::npos ? text.size() : close + closer.size();
    ToolCall call;
    if (!ParseXmlFunction(text.substr(open, end - open), tools, &call)) return {text, "", {}};
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(call));
    pos = end;
  }
  content += text.substr(pos);
  out.content = out.calls.empty() ? text : Trim(content);
  return out;
}

std::string GrammarQwen3Coder(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  // args[i] is the rule of tool i's parameters written as XML (ToolCallGrammar builds them).
  return CallAlternatives(names, args, "<tool_call>\\n<function=", ">\\n", "</function>\\n</tool_call>") +
         CallSequence("\"\\n\"", parallel);
}

// --- llama3_json ---------------------------------------------------------------------------

ParsedOutput ParseLlama3(const std::string& text, std::span<const Tool>) {
  std::string body = text;
  const size_t tag = body.find("<|python_tag|>");
  if (tag != std::string::npos) body = body.substr(tag + 14);
  body = Trim(body);
  if (body.empty() || body[0] != '{') return {text, "", {}};
  ParsedOutput out;
  // One object, or several separated by ";" (Llama 3.1's parallel form).
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find(';', pos);
    std::string piece = Trim(body.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    ToolCall call;
    const ojson j = ojson::parse(piece, nullptr, false);
    if (!CallFromJson(j, "parameters", &call)) {
      if (end == std::string::npos || out.calls.empty()) return {text, "", {}};
      break;
    }
    out.calls.push_back(std::move(call));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

std::string GrammarLlama3(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  return CallAlternatives(names, args, "{\\\"name\\\": \\\"", "\\\", \\\"parameters\\\": ", "}") +
         CallSequence("\"; \"", parallel);
}

// --- mistral -------------------------------------------------------------------------------

ParsedOutput ParseMistral(const std::string& text, std::span<const Tool>) {
  const size_t at = text.find("[TOOL_CALLS]");
  if (at == std::string::npos) return {text, "", {}};
  const ojson arr = ojson::parse(Trim(text.substr(at + 12)), nullptr, false);
  ParsedOutput out;
  const ojson items = arr.is_array() ? arr : arr.is_object() ? ojson::array({arr}) : ojson();
  if (!items.is_array() || items.empty()) return {text, "", {}};
  for (const ojson& j : items) {
    ToolCall call;
    if (!CallFromJson(j, "arguments", &call)) return {text, "", {}};
    out.calls.push_back(std::move(call));
  }
  out.content = Trim(text.substr(0, at));
  return out;
}

std::string GrammarMistral(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  std::string g = CallAlternatives(names, args, "{\\\"name\\\": \\\"", "\\\", \\\"arguments\\\": ", "}");
  g += parallel ? "tool-calls ::= \"[TOOL_CALLS][\" tool-call (\", \" tool-call)* \"]\"\n"
                : "tool-calls ::= \"[TOOL_CALLS][\" tool-call \"]\"\n";
  return g;
}

// --- harmony (gpt-oss) ---------------------------------------------------------------------

// Messages: [<|start|>assistant] header <|message|> body (<|end|> | <|call|> | <|return|> | end).
ParsedOutput ParseHarmony(const std::string& text, std::span<const Tool>) {
  ParsedOutput out;
  size_t pos = 0;
  bool any = false;
  while (pos < text.size()) {
    size_t msg = text.find("<|message|>", pos);
    if (msg == std::string::npos) break;
    std::string header = text.substr(pos, msg - pos);
    const size_t start = header.rfind("<|start|>");
    if (start != std::string::npos) header = header.substr(start);
    const size_t body = msg + 11;
    size_t end = text.size();
    for (const char* t : {"<|end|>", "<|call|>", "<|return|>", "<|start|>"}) end = std::min(end, text.find(t, body));
    const std::string content = text.substr(body, end - body);
    const size_t ch = header.find("<|channel|>");
    std::string channel = ch == std::string::npos ? "" : header.substr(ch + 11);
    channel = channel.substr(0, channel.find_first_of(" <"));
    const size_t to = header.find("to=functions.");
    any = true;
    if (to != std::string::npos) {
      ToolCall call;
      call.name = header.substr(to + 13);
      call.name = call.name.substr(0, call.name.find_first_of(" <"));
      const ojson args = ojson::parse(Trim(content), nullptr, false);
      call.arguments = args.is_object() ? args.dump() : "{}";
      if (!args.is_object()) return {text, "", {}};
      out.calls.push_back(std::move(call));
    } else if (channel == "analysis") {
      out.reasoning += content;
    } else {
      out.content += content;
    }
    pos = end;
    for (const char* t : {"<|end|>", "<|call|>", "<|return|>"})
      if (text.compare(pos, std::char_traits<char>::length(t), t) == 0) pos += std::char_traits<char>::length(t);
  }
  if (!any) out.content = text;
  return out;
}

std::string GrammarHarmony(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  (void)parallel;  // gpt-oss calls one function per message
  std::string g = "tool-call ::= ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) g += " | ";
    g += "\"<|channel|>commentary to=functions." + names[i] + " <|constrain|>json<|message|>\" " + args[i] + " \"<|call|>\"";
  }
  g += "\ntool-calls ::= (\"<|channel|>analysis<|message|>\" [^<]* \"<|end|><|start|>assistant\")? tool-call\n";
  return g;
}

// Tool i's parameters as qwen3_coder XML: each declared parameter (required ones mandatory, in
// schema order) as <parameter=NAME>\nVALUE\n</parameter>\n; a string value is text without
// "<", other types their JSON by the schema.
core::StatusOr<std::string> XmlArgsGrammar(const Tool& tool, const std::string& prefix) {
  std::string g = prefix + "root ::=";
  std::string defs;
  const ojson& params = tool.parameters;
  std::vector<std::string> required;
  if (params.contains("required") && params["required"].is_array())
    for (const ojson& r : params["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  if (params.contains("properties") && params["properties"].is_object()) {
    int k = 0;
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it, ++k) {
      const std::string rule = prefix + "p" + std::to_string(k) + "-";
      const bool is_string = it.value().contains("type") && it.value()["type"] == "string" && !it.value().contains("enum");
      std::string value;
      if (is_string) {
        value = rule + "text";
        defs += value + " ::= [^<]*\n";
      } else {
        grammar::JsonSchemaOptions o;
        o.rule_prefix = rule;
        RADIXLM_ASSIGN_OR_RETURN(std::string sub, grammar::JsonSchemaToGbnf(StrictObjects(it.value()).dump(), o));
        defs += sub + "\n";
        value = rule + "root";
      }
      const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
      g += std::string(" ") + (req ? "" : "(") + "\"<parameter=" + it.key() + ">\\n\" " + value + " \"\\n</parameter>\\n\"" + (req ? "" : ")?");
    }
  }
  if (g.back() == '=') g += " \"\"";
  return g + "\n" + defs;
}

// One row per format (tool_calls.h says what each field means).
const ToolFormat kFormats[] = {
    {"hermes", {"<tool_call>"}, false, false, ParseHermes, GrammarHermes},
    {"qwen3_coder", {"<tool_call>", "<function="}, false, false, ParseQwen3Coder, GrammarQwen3Coder, false, XmlArgsGrammar},
    {"llama3_json", {"{", "<|python_tag|>"}, false, false, ParseLlama3, GrammarLlama3},
    {"mistral", {"[TOOL_CALLS]"}, true, true, ParseMistral, GrammarMistral},
    {"harmony", {"<|channel|>", "<|start|>", " to="}, true, false, ParseHarmony, GrammarHarmony, /*channels=*/true},
};

// Marker -> format, most specific first.
struct Detection {
  const char* marker;
  const char* format;
};
constexpr Detection kDetections[] = {
    {"<|channel|>", "harmony"},       {"<function=", "qwen3_coder"},  {"[TOOL_CALLS]", "mistral"},
    {"<tool_call>", "hermes"},        {"<|python_tag|>", "llama3_json"},
    {"\"parameters\": ", "llama3_json"},  // Llama 3.2's JSON instructions ({"name", "parameters"})
};

std::string ArgsRuleName(size_t i) { return "args" + std::to_string(i) + "-"; }

}  // namespace

const ToolFormat* FindToolFormat(const std::string& name) {
  for (const ToolFormat& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

const ToolFormat* DetectToolFormat(const std::string& source) {
  for (const Detection& d : kDetections)
    if (source.find(d.marker) != std::string::npos) return FindToolFormat(d.format);
  return nullptr;
}

void SplitReasoning(const std::string& text, bool starts_in_reasoning, std::string* reasoning, std::string* rest) {
  reasoning->clear();
  rest->clear();
  size_t pos = 0;
  bool inside = starts_in_reasoning;
  if (!inside) {
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b != std::string::npos && text.compare(b, 7, "<think>") == 0) {
      inside = true;
      pos = b + 7;
    }
  }
  if (inside) {
    const size_t close = text.find("</think>", pos);
    if (close == std::string::npos) {  // cut inside the reasoning
      *reasoning = text.substr(pos);
      return;
    }
    *reasoning = text.substr(pos, close - pos);
    pos = close + 8;
    while (pos < text.size() && (text[pos] == '\n' || text[pos] == ' ')) ++pos;
  }
  *rest = text.substr(pos);
}

core::StatusOr<std::string> ToolCallGrammar(const ToolFormat& format, std::span<const Tool> tools, bool parallel,
                                            bool reasoning_first) {
  std::vector<std::string> names, rules;
  std::string defs;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = ArgsRuleName(i);
    if (format.args_grammar) {
      RADIXLM_ASSIGN_OR_RETURN(std::string sub, format.args_grammar(tools[i], prefix));
      defs += sub;
    } else {
      grammar::JsonSchemaOptions o;
      o.rule_prefix = prefix;
      ojson schema = StrictObjects(tools[i].parameters);
      if (schema.is_object() && schema.empty()) schema = {{"type", "object"}, {"additionalProperties", false}};
      auto sub = grammar::JsonSchemaToGbnf(schema.dump(), o);
      if (!sub.ok()) return core::InvalidArgument("tool '" + tools[i].name + "': " + sub.status().message());
      defs += *sub + "\n";
    }
    names.push_back(tools[i].name);
    rules.push_back(prefix + "root");
  }
  std::string g = "root ::= ";
  g += reasoning_first ? "(\"<think>\" think-text \"</think>\" [\\n]*)? tool-calls\nthink-text ::= [^<]*\n" : "tool-calls\n";
  g += format.grammar(names, rules, parallel);
  return g + defs;
}

nlohmann::ordered_json StrictObjects(nlohmann::ordered_json s) {
  if (s.is_array()) {
    for (auto& x : s) x = StrictObjects(std::move(x));
    return s;
  }
  if (!s.is_object()) return s;
  for (auto it = s.begin(); it != s.end(); ++it)
    if (it.key() != "enum" && it.key() != "const" && it.key() != "default" && it.key() != "examples")
      it.value() = StrictObjects(std::move(it.value()));
  if (s.contains("properties") && s["properties"].is_object() && !s.contains("additionalProperties")) s["additionalProperties"] = false;
  return s;
}

void AssignCallIds(const ToolFormat& format, core::Rng* rng, std::vector<ToolCall>* calls) {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (ToolCall& c : *calls) {
    std::string id = format.short_ids ? "" : "call_";
    for (int i = 0; i < (format.short_ids ? 9 : 24); ++i) id.push_back(kAlnum[rng->Below(62)]);
    c.id = id;
  }
}

}  // namespace radixlm::serve
