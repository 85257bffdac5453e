#include "serve/tool_calls.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

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

// --- pythonic (LFM2) -----------------------------------------------------------------------
// <|tool_call_start|>[name(key=value, ...), ...]<|tool_call_end|>, the values Python literals
// (strings in ' or ", numbers, True / False / None, lists, dicts; JSON's true / false / null
// read too).

// A minimal reader of Python call lists: what LFM2 writes, nothing more (no expressions, no
// positional arguments: those are not calls, the output stays content).
class PythonCalls {
 public:
  explicit PythonCalls(const std::string& s) : s_(s) {}
  bool Parse(std::vector<ToolCall>* calls) {
    Skip();
    if (!Eat('[')) return false;
    Skip();
    if (Eat(']')) return AtEnd();
    do {
      ToolCall call;
      if (!Call(&call)) return false;
      calls->push_back(std::move(call));
      Skip();
    } while (Eat(','));
    return Eat(']') && AtEnd();
  }

 private:
  bool AtEnd() {
    Skip();
    return i_ == s_.size();
  }
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string Identifier(bool dotted) {
    Skip();
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '-' ||
                              (dotted && s_[i_] == '.')))
      ++i_;
    return s_.substr(b, i_ - b);
  }
  bool Call(ToolCall* call) {
    call->name = Identifier(true);
    if (call->name.empty() || !Eat('(')) return false;
    ojson args = ojson::object();
    if (!Eat(')')) {
      do {
        const std::string key = Identifier(false);
        if (key.empty() || !Eat('=')) return false;
        ojson v;
        if (!Value(&v, 0)) return false;
        args[key] = std::move(v);
      } while (Eat(','));
      if (!Eat(')')) return false;
    }
    call->arguments = args.dump();
    return true;
  }
  bool String(ojson* out) {
    const char q = s_[i_++];
    std::string v;
    while (i_ < s_.size() && s_[i_] != q) {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        const char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case '0': c = '\0'; break;
          case 'u': {  // \uXXXX, through JSON's decoder (surrogates included)
            if (i_ + 4 > s_.size()) return false;
            const ojson u = ojson::parse("\"\\u" + s_.substr(i_, 4) + "\"", nullptr, false);
            if (!u.is_string()) return false;
            v += u.get<std::string>();
            i_ += 4;
            continue;
          }
          default: c = e;  // \\, \', \", \/
        }
      }
      v.push_back(c);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    *out = v;
    return true;
  }
  bool Value(ojson* out, int depth) {
    Skip();
    if (i_ >= s_.size() || depth > 64) return false;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return String(out);
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++i_;
      *out = ojson::array();
      if (Eat(close)) return true;
      for (;;) {
        ojson v;
        if (!Value(&v, depth + 1)) return false;
        out->push_back(std::move(v));
        if (Eat(close)) return true;
        if (!Eat(',')) return false;
        if (Eat(close)) return true;  // a trailing comma
      }
    }
    if (c == '{') {
      ++i_;
      *out = ojson::object();
      if (Eat('}')) return true;
      do {
        ojson k, v;
        Skip();
        if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'') || !String(&k) || !Eat(':') || !Value(&v, depth + 1))
          return false;
        (*out)[k.get<std::string>()] = std::move(v);
      } while (Eat(','));
      return Eat('}');
    }
    const std::string word = Identifier(false);
    if (word == "True" || word == "true") *out = true;
    else if (word == "False" || word == "false") *out = false;
    else if (word == "None" || word == "null") *out = nullptr;
    else {
      i_ -= word.size();
      return Number(out);
    }
    return true;
  }
  bool Number(ojson* out) {
    const size_t b = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || std::strchr("+-.eE", s_[i_]))) ++i_;
    const ojson n = ojson::parse(s_.substr(b, i_ - b), nullptr, false);
    if (!n.is_number()) return false;
    *out = n;
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

ParsedOutput ParsePythonic(const std::string& text, std::span<const Tool>) {
  ParsedOutput out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find("<|tool_call_start|>", pos);
    if (open == std::string::npos) break;
    const size_t body = open + 19;
    const size_t close = text.find("<|tool_call_end|>", body);
    const size_t end = close == std::string::npos ? text.size() : close;
    if (!PythonCalls(text.substr(body, end - body)).Parse(&out.calls)) return {text, "", {}};
    content += text.substr(pos, open - pos);
    pos = close == std::string::npos ? text.size() : close + 17;
  }
  content += text.substr(pos);
  out.content = out.calls.empty() ? text : Trim(content);
  return out;
}

std::string GrammarPythonic(std::span<const std::string> names, std::span<const std::string> args, bool parallel) {
  // args[i] is tool i's keyword arguments (PythonArgsGrammar).
  return CallAlternatives(names, args, "", "(", ")") +
         (parallel ? "tool-calls ::= \"<|tool_call_start|>[\" tool-call (\", \" tool-call)* \"]<|tool_call_end|>\"\n"
                   : "tool-calls ::= \"<|tool_call_start|>[\" tool-call \"]<|tool_call_end|>\"\n");
}

// A JSON value as a Python literal (strings and keys as JSON writes them, which Python reads).
std::string PythonLiteral(const ojson& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + PythonLiteral(v[i]);
    return s + "]";
  }
  if (v.is_object()) {
    std::string s = "{";
    for (auto it = v.begin(); it != v.end(); ++it) s += (it == v.begin() ? "" : ", ") + ojson(it.key()).dump() + ": " + PythonLiteral(it.value());
    return s + "}";
  }
  return v.dump();
}

std::string PythonicCallsText(const ojson& tool_calls) {
  std::string s = "<|tool_call_start|>[";
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const ojson& f = tool_calls[i]["function"];
    s += (i ? ", " : "") + f["name"].get<std::string>() + "(";
    ojson args = f.contains("arguments") ? f["arguments"] : ojson::object();
    if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
    if (args.is_object())
      for (auto it = args.begin(); it != args.end(); ++it)
        s += (it == args.begin() ? "" : ", ") + it.key() + "=" + PythonLiteral(it.value());
    s += ")";
  }
  return s + "]<|tool_call_end|>";
}

// JSON's literals true / false / null in a compiled JSON grammar, as Python's: everything else
// JSON writes (strings in ", numbers, lists, dicts with string keys) is a Python literal already.
std::string PythonLiterals(std::string gbnf) {
  for (const auto& [json_lit, py_lit] : {std::pair<std::string, std::string>{"\"true\"", "\"True\""},
                                         {"\"false\"", "\"False\""}, {"\"null\"", "\"None\""}}) {
    for (size_t at = gbnf.find(json_lit); at != std::string::npos; at = gbnf.find(json_lit, at + py_lit.size()))
      if (at == 0 || gbnf[at - 1] != '\\') gbnf.replace(at, json_lit.size(), py_lit);
  }
  return gbnf;
}

// Tool i's keyword arguments: each declared parameter (required ones mandatory, optional ones
// optional, in schema order, ", " between) as KEY=VALUE, VALUE the property's JSON grammar with
// Python's literals.
core::StatusOr<std::string> PythonArgsGrammar(const Tool& tool, const std::string& prefix) {
  const ojson& params = tool.parameters;
  std::vector<std::string> required;
  if (params.contains("required") && params["required"].is_array())
    for (const ojson& r : params["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  std::vector<std::pair<std::string, bool>> items;  // "KEY=" value rule, required
  std::string defs;
  if (params.contains("properties") && params["properties"].is_object()) {
    int k = 0;
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it, ++k) {
      const std::string rule = prefix + "p" + std::to_string(k) + "-";
      grammar::JsonSchemaOptions o;
      o.rule_prefix = rule;
      RADIXLM_ASSIGN_OR_RETURN(std::string sub, grammar::JsonSchemaToGbnf(StrictObjects(it.value()).dump(), o));
      defs += PythonLiterals(sub) + "\n";
      const bool req = std::find(required.begin(), required.end(), it.key()) != required.end();
      items.push_back({"\"" + it.key() + "=\" " + rule + "root", req});
    }
  }
  // Sequences of the present items with ", " between: item_i then the rest from i + 1 on.
  std::string g;
  const int n = static_cast<int>(items.size());
  for (int i = n - 1; i >= 0; --i) {
    const std::string rest = prefix + "after" + std::to_string(i);
    std::string alts;  // what may follow item i: the next present item, or nothing
    bool later_required = false;
    for (int j = i + 1; j < n && !later_required; ++j) {
      alts += std::string(alts.empty() ? "" : " | ") + "\", \" " + items[j].first + " " + prefix + "after" + std::to_string(j);
      later_required = items[j].second;
    }
    if (!later_required) alts += std::string(alts.empty() ? "" : " | ") + "\"\"";
    g += rest + " ::= " + alts + "\n";
  }
  std::string root;  // the first present item, or none when every item is optional
  bool required_seen = false;
  for (int j = 0; j < n && !required_seen; ++j) {
    root += std::string(root.empty() ? "" : " | ") + items[j].first + " " + prefix + "after" + std::to_string(j);
    required_seen = items[j].second;
  }
  if (!required_seen) root += std::string(root.empty() ? "" : " | ") + "\"\"";
  return prefix + "root ::= " + root + "\n" + g + defs;
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
    {"pythonic", {"<|tool_call_start|>"}, true, false, ParsePythonic, GrammarPythonic, false, PythonArgsGrammar,
     PythonicCallsText},
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
    {"<|tool_call_start|>", "pythonic"},  {"List of tools: [", "pythonic"},  // LFM2 / LFM2.5
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

void CallsIntoContent(const std::string& template_source, nlohmann::ordered_json* chat_vars) {
  const ToolFormat* format = DetectToolFormat(template_source);
  if (!format || !format->calls_text || template_source.find("tool_calls") != std::string::npos) return;
  if (!chat_vars->contains("messages") || !(*chat_vars)["messages"].is_array()) return;
  for (ojson& m : (*chat_vars)["messages"]) {
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array() || m["tool_calls"].empty()) continue;
    std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    m["content"] = content + format->calls_text(m["tool_calls"]);
    m.erase("tool_calls");
  }
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
