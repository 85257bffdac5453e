// JSON Schema -> GBNF (json_schema.h): dispatch, references, allOf merging, unions, enums,
// objects and arrays. Strings, numbers and regexes are in json_schema_text.cc / _regex.cc.
#include "grammar/json_schema.h"

#include "core/json_text.h"

#include "grammar/json_schema_compiler.h"

namespace radixlm::grammar::schema_internal {

using schema_internal::SchemaError;
using Json = nlohmann::ordered_json;
namespace si = schema_internal;

std::string Compiler::Builtin(const std::string& name) {
  const std::string p = prefix_;
  auto def = [&](const std::string& n, const std::string& body) {
    if (builtins_.insert(p + n).second) rules_.push_back({p + n, body});
    return p + n;
  };
  if (name == "space") return def("space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}");
  if (name == "char") return def("char", JsonCharExpr({{0, 0x10FFFF}}));
  if (name == "string") return def("string", "\"\\\"\" " + Builtin("char") + "* \"\\\"\" " + Builtin("space"));
  if (name == "integer") return def("integer", "\"-\"? (\"0\" | [1-9] [0-9]*) " + Builtin("space"));
  if (name == "number") {
    return def("number", "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [\\-+]? [0-9]+)? " + Builtin("space"));
  }
  if (name == "boolean") return def("boolean", "(\"true\" | \"false\") " + Builtin("space"));
  if (name == "null") return def("null", "\"null\" " + Builtin("space"));
  if (name == "value") {
    const std::string n = p + "value";
    if (!builtins_.insert(n).second) return n;
    rules_.push_back({n, ""});  // placeholder: object and array refer back to value
    const size_t at = rules_.size() - 1;
    rules_[at].second = Builtin("object") + " | " + Builtin("array") + " | " + Builtin("string") + " | " +
                        Builtin("number") + " | " + Builtin("boolean") + " | " + Builtin("null");
    return n;
  }
  const std::string sp = Builtin("space");
  if (name == "object") {
    const std::string v = p + "value";
    const std::string kv = Builtin("string") + " \":\" " + sp + " " + v;
    const std::string o = def("object", "\"{\" " + sp + " (" + kv + " (\",\" " + sp + " " + kv + ")*)? \"}\" " + sp);
    Builtin("value");
    return o;
  }
  if (name == "array") {
    const std::string v = p + "value";
    const std::string a = def("array", "\"[\" " + sp + " (" + v + " (\",\" " + sp + " " + v + ")*)? \"]\" " + sp);
    Builtin("value");
    return a;
  }
  RADIXLM_CHECK_MSG(false, name);
}

std::string Compiler::Visit(const Json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return Builtin("value");
    Empty(path, "the schema false (no value is valid)");
  }
  if (!s.is_object()) Fail(path, "a schema must be an object or a boolean");
  if (merger_.HasForeign(s)) return Visit(merger_.Native(s), path);
  if (++visits_ > kMaxVisits) Fail(path, "more than " + std::to_string(kMaxVisits) + " subschemas to compile: too costly");
  if (++depth_ > 200) Fail(path, "schema nesting too deep");
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  if (auto bad = RefusedKeyword(s); !bad.empty()) Fail(path, "unsupported keyword '" + bad + "'");
  if (s.contains("not") || s.contains("dependencies") || s.contains("dependentRequired") || s.contains("dependentSchemas")) {
    Json parts = Json::array();  // the rest of s, and each of these as a schema of its own
    Json rest = s;
    for (const char* k : {"not", "dependencies", "dependentRequired", "dependentSchemas"}) rest.erase(k);
    parts.push_back(rest);
    Json merged;
    try {
      if (s.contains("not")) parts.push_back(Negate(s["not"]));
      for (Json& c : DependencyConstraints(s)) parts.push_back(std::move(c));
      merged = merger_.MergeAllOf(Json{{"allOf", parts}});
    } catch (const Unsatisfiable&) {
      throw;
    } catch (const SchemaError& e) {
      Fail(path, e.what());
    }
    return Visit(merged, path);
  }
  if (s.contains("$ref")) return VisitRef(s, path);
  if (s.contains("allOf")) {
    Json merged;
    try {
      merged = merger_.MergeAllOf(s);
    } catch (const SchemaError& e) {
      Fail(path, std::string("unsupported keyword 'allOf': ") + e.what());
    }
    return Visit(merged, path);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return VisitUnion(s, path);
  return VisitFlat(s, path);
}

std::string Compiler::VisitRef(const Json& s, const std::string& path) {
  if (!s["$ref"].is_string()) Fail(path, "'$ref' must be a string");
  const std::string ref = s["$ref"].get<std::string>();
  const Json* target = merger_.Resolve(ref);
  if (!target) Fail(path, "unsupported keyword '$ref': '" + ref + "' is not a local reference found in the document");
  if (HasConstraints(s, /*ignore_ref=*/true) && !merger_.old_draft()) {
    Json merged;
    try {
      merged = merger_.Merge(merger_.WithoutRef(s), *target);
    } catch (const SchemaError& e) {
      Fail(path, std::string("unsupported keyword '$ref' with sibling keywords: ") + e.what());
    }
    return Visit(merged, path);
  }
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return it->second;
  const std::string name = Reserve("ref" + ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/')));
  ref_rules_.emplace(ref, name);
  const size_t slot = rules_.size();
  rules_.push_back({name, ""});
  try {
    rules_[slot].second = Visit(*target, ref);
  } catch (const SchemaError&) {
    // Unusable: the name matches nothing and is forgotten (rules made meanwhile stay unused).
    rules_[slot].second = "[^\\x00-\\U0010FFFF]";
    ref_rules_.erase(ref);
    throw;
  }
  return name;
}

std::string Compiler::VisitUnion(const Json& s, const std::string& path) {
  if (s.contains("anyOf") && s.contains("oneOf")) Fail(path, "unsupported keyword 'oneOf' together with 'anyOf'");
  const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& list = s[key];
  if (!list.is_array() || list.empty()) Fail(path, std::string("'") + key + "' must be a non-empty array");
  Json rest = s;
  rest.erase(key);
  if (std::string(key) == "oneOf") {  // exactly one of some `required` lists: an exact anyOf
    if (auto any = OneOfByPresence(list)) {
      try {
        return Visit(HasConstraints(rest, false) ? merger_.Merge(rest, *any) : *any, path);
      } catch (const Unsatisfiable&) {
        Empty(path, "'oneOf': no value satisfies exactly one alternative");
      } catch (const SchemaError& e) {
        Fail(path, std::string("unsupported keyword 'oneOf': ") + e.what());
      }
    }
  }
  const bool constrained = HasConstraints(rest, false);
  std::vector<Json> alts;
  for (const Json& sub : list) {
    if (!constrained) {
      alts.push_back(sub);
      continue;
    }
    try {
      alts.push_back(merger_.Merge(rest, sub));
    } catch (const SchemaError& e) {
      Fail(path, std::string("unsupported keyword '") + key + "' with sibling keywords: " + e.what());
    }
  }
  if (std::string(key) == "oneOf") {
    for (size_t i = 0; i < alts.size(); ++i) {
      for (size_t j = i + 1; j < alts.size(); ++j) {
        if (!merger_.Disjoint(alts[i], alts[j])) {
          Fail(path, "unsupported keyword 'oneOf': alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                         " are not provably disjoint");
        }
      }
    }
  }
  std::string body;
  for (size_t i = 0; i < alts.size(); ++i) {
    // An alternative with no instance (a false schema, an empty enum after merging) drops out.
    if (alts[i].is_boolean() && !alts[i].get<bool>()) continue;
    try {
      body += (body.empty() ? "" : " | ") + Visit(alts[i], path + "/" + key + "/" + std::to_string(i));
    } catch (const Unsatisfiable&) {
    }
  }
  if (body.empty()) Empty(path, std::string("'") + key + "' has no satisfiable alternative");
  return Rule(key, body);
}

std::string Compiler::VisitFlat(const Json& s, const std::string& path) {
  std::set<std::string> types;
  try {
    types = TypeSet(s);
  } catch (const SchemaError& e) {
    Fail(path, e.what());
  }
  if (s.contains("enum") || s.contains("const")) return EnumRule(s, types, path);
  // Each type's keywords constrain only values of that type: a type whose keywords no value
  // satisfies (minLength above maxLength, a required member with the schema false) drops out,
  // and the others stay (`{"minLength": 2, "maxLength": 1}` still allows 0 and null).
  std::vector<std::string> alts;
  std::string empty_why;
  auto add = [&](auto&& rule) {
    try {
      alts.push_back(rule());
    } catch (const Unsatisfiable& e) {
      if (empty_why.empty()) empty_why = e.what();
    }
  };
  if (types.count("object")) add([&] { return ObjectRule(s, path); });
  if (types.count("array")) add([&] { return ArrayRule(s, path); });
  if (types.count("string")) add([&] { return StringRule(s, path); });
  if (types.count("number")) {
    add([&] { return NumberRule(s, path); });
  } else if (types.count("integer")) {
    add([&] { return IntegerRule(s, path); });
  }
  if (types.count("boolean")) alts.push_back(Builtin("boolean"));
  if (types.count("null")) alts.push_back(Builtin("null"));
  if (alts.empty()) throw Unsatisfiable(empty_why.empty() ? path + ": no type is allowed" : empty_why);
  if (alts.size() == 1) return alts[0];
  std::string body;
  for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
  if (body == Builtin("object") + " | " + Builtin("array") + " | " + Builtin("string") + " | " + Builtin("number") +
                 " | " + Builtin("boolean") + " | " + Builtin("null")) {
    return Builtin("value");
  }
  return Rule("alt", body);
}

std::string Compiler::ValueLiteral(const Json& v) {
  const std::string sp = Builtin("space");
  if (v.is_string()) return JsonStringLiteral(v.get<std::string>());
  if (v.is_array()) {
    std::string out = "\"[\" " + sp;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? " \",\" " + sp + " " : " ") + ValueLiteral(v[i]) + " " + sp;
    return "(" + out + " \"]\")";
  }
  if (v.is_object()) {
    std::string out = "\"{\" " + sp;
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? " " : " \",\" " + sp + " ") + JsonStringLiteral(k) + " " + sp + " \":\" " + sp + " " +
             ValueLiteral(x) + " " + sp;
      first = false;
    }
    return "(" + out + " \"}\")";
  }
  return GbnfLiteral(v.dump());
}

std::string Compiler::EnumRule(const Json& s, const std::set<std::string>& types, const std::string& path) {
  std::vector<Json> values;
  try {
    values = EnumValues(s, types);
  } catch (const SchemaError& e) {
    Fail(path, e.what());
  }
  if (values.empty()) Empty(path, "no value of 'enum'/'const' satisfies the schema");
  // Many strings: one trie of their literals (a state then holds a stack per distinct next
  // character, not per value: an enum of 30,000 names costs what a few dozen do).
  constexpr size_t kTrieFrom = 9;
  std::vector<std::string> strings;
  for (const Json& v : values)
    if (v.is_string()) strings.push_back(v.get<std::string>());
  const bool trie = strings.size() >= kTrieFrom;
  std::string body = trie ? JsonStringLiteralTrie(strings, Definer()) : "";
  for (const Json& v : values)
    if (!trie || !v.is_string()) body += (body.empty() ? "" : " | ") + ValueLiteral(v);
  return Rule("enum", "(" + body + ") " + Builtin("space"));
}

}  // namespace radixlm::grammar::schema_internal

namespace radixlm::grammar {

core::StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json, std::string* gbnf,
                                            const JsonSchemaOptions& options) {
  // Linear in the text (nlohmann's own ordered parse is quadratic in an object's keys).
  core::JsonParse doc = core::ParseJsonBounded(schema_json, {}, /*ordered=*/true);
  if (doc.error != core::JsonParseError::kNone) return core::InvalidArgument("json schema: not valid JSON (or nested over 128 deep)");
  const schema_internal::Json schema = std::move(doc.ordered_value);
  try {
    *gbnf = schema_internal::Compiler(schema, options.rule_prefix).Run();
  } catch (const schema_internal::SchemaError& e) {
    return core::InvalidArgument(std::string("json schema: ") + e.what());
  }
  // The generated grammar must parse (it can still exceed the repetition limits).
  auto parsed = ParseGbnf(*gbnf, options.rule_prefix + "root");
  if (!parsed.ok()) return core::InvalidArgument("json schema: cannot be expressed as a grammar: " + parsed.status().message());
  return parsed;
}

core::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_json, const JsonSchemaOptions& options) {
  std::string gbnf;
  auto g = JsonSchemaToGrammar(schema_json, &gbnf, options);
  if (!g.ok()) return g.status();
  return gbnf;
}

std::string JsonObjectGbnf(const JsonSchemaOptions& options) {
  auto g = JsonSchemaToGbnf(R"({"type": "object"})", options);
  RADIXLM_CHECK_MSG(g.ok(), g.status().message());
  return *g;
}

}  // namespace radixlm::grammar
