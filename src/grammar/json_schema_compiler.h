// Internal to the JSON Schema compiler (json_schema.h): the compiler object, its rules and the
// helpers shared by json_schema.cc (dispatch, references, unions, enums) and
// json_schema_types.cc (strings, numbers, objects, arrays).
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema_merge.h"
#include "grammar/json_schema_text.h"

namespace radixlm::grammar::schema_internal {

using Json = nlohmann::ordered_json;

// Standard formats a validator may check that this compiler does not express: refused.
inline const std::set<std::string> kRefusedFormats = {"hostname", "idn-hostname", "ipv6", "iri", "iri-reference",
                                                      "uri-template", "json-pointer", "relative-json-pointer",
                                                      "regex", "duration"};

// The most subschema visits one schema may take: far above the largest JSONSchemaBench schema
// (a few thousand), bounding compile time for schemas built to blow up.
inline constexpr int64_t kMaxVisits = 100000;

class Compiler {
 public:
  Compiler(const Json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)), merger_(root) {
    // Built-in rule names are taken up front, so no schema rule can take them.
    for (const char* b : {"space", "char", "string", "integer", "number", "boolean", "null", "value", "object", "array"}) {
      names_.insert(prefix_ + b);
    }
  }

  std::string Run() {
    const std::string start = Visit(root_, "#");
    std::string out = prefix_ + "root ::= " + start + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void Fail(const std::string& path, const std::string& what) { throw SchemaError(path + ": " + what); }
  [[noreturn]] static void Empty(const std::string& path, const std::string& what) { throw Unsatisfiable(path + ": " + what); }

  std::string Sanitize(const std::string& hint) const {
    std::string s;
    for (char c : hint) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (s.size() > 40) s.resize(40);
    return s.empty() ? "r" : s;
  }
  std::string Reserve(const std::string& hint) {
    std::string base = prefix_ + Sanitize(hint), name = base;
    // Numbered from where this base's last name stopped (a count from 2 each time would make n
    // rules of one hint cost n^2).
    int& next = next_suffix_[base];
    for (int i = std::max(next, 2); names_.count(name) || name == prefix_ + "root"; ++i) {
      name = base + "-" + std::to_string(i);
      next = i + 1;
    }
    names_.insert(name);
    return name;
  }
  // A rule with this body (one rule per distinct body: equal subschemas share positions and so
  // token mask entries).
  std::string Rule(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string name = Reserve(hint);
    // The grammar may not outgrow what ParseGbnf accepts: stop before building more of it.
    text_bytes_ += name.size() + body.size() + 6;
    if (text_bytes_ > GrammarLimits{}.max_text_bytes)
      Fail("#", "the schema's grammar would exceed " + std::to_string(GrammarLimits{}.max_text_bytes) + " bytes");
    rules_.push_back({name, body.empty() ? "\"\"" : body});
    by_body_.emplace(body, name);
    return name;
  }
  RuleDefiner Definer() {
    return [this](const std::string& hint, const std::string& body) { return Rule(hint, body); };
  }

  std::string Builtin(const std::string& name);
  std::string Visit(const Json& s, const std::string& path);
  std::string VisitRef(const Json& s, const std::string& path);
  std::string VisitUnion(const Json& s, const std::string& path);
  std::string VisitFlat(const Json& s, const std::string& path);
  std::string EnumRule(const Json& s, const std::set<std::string>& types, const std::string& path);
  std::string ValueLiteral(const Json& v);
  std::string StringRule(const Json& s, const std::string& path);
  std::string IntegerRule(const Json& s, const std::string& path);
  std::string NumberRule(const Json& s, const std::string& path);
  std::string MultipleOfRule(const Json& s, const std::string& path);
  struct ObjectShape {
    std::vector<std::string> required, names;  // names: every declared name (no additional member takes one)
    std::vector<std::pair<std::string, Json>> members;
    Json additional;
    bool extra = true;             // additional members allowed
    std::string additional_value;  // their values' rule
    std::vector<std::string> patterns;  // patternProperties (one schema): additional names match one
    Json names_schema;                  // propertyNames (null when absent): every name satisfies it
    std::string names_key;              // propertyNames' key rule, for additional members
    Json broken_value_schema;           // "^.*$" patterns: names with a line break take this schema
    std::string broken_value;           // ... as a rule ("" when no such member is allowed)
    uint64_t min_count = 0;                 // minProperties, where more than the required names
    std::optional<uint64_t> max_count;      // maxProperties, where fewer than the possible members
    bool IsRequired(const std::string& n) const { return std::find(required.begin(), required.end(), n) != required.end(); }
  };
  ObjectShape ObjectMembers(const Json& s, const std::string& path);
  std::optional<Json> PatternMembers(const Json& s, const Json& props, const std::string& path, ObjectShape* o);
  void AdditionalValues(const std::string& path, ObjectShape* o);
  void MemberList(const Json& s, const Json& props, const std::string& path, ObjectShape* o);
  void PropertyNames(const Json& names, const Json& props, const std::string& path, ObjectShape* o);
  std::string ObjectExtraKv(const ObjectShape& o, const std::string& sp, const std::string& path);
  std::vector<std::pair<std::string, std::string>> ObjectMemberKvs(const ObjectShape& o, const std::string& sp, const std::string& path);
  std::optional<std::string> ObjectChain(const ObjectShape& o, const std::vector<std::pair<std::string, std::string>>& kvs,
                                         const std::string& extra_kv, const std::string& sp, const std::string& path);
  std::string ObjectRule(const Json& s, const std::string& path);
  std::string KeyNotIn(const std::vector<std::string>& names);
  void ArrayTuple(const Json& s, const std::string& path, Json* prefix, Json* rest);
  std::string ArrayRule(const Json& s, const std::string& path);

  const Json& root_;
  std::string prefix_;
  Merger merger_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_map<std::string, std::string> by_body_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, int> next_suffix_;  // per base name: the next number to try
  std::unordered_set<std::string> builtins_;  // built-in rules already defined
  std::unordered_map<std::string, std::string> ref_rules_;
  int depth_ = 0;
  int64_t visits_ = 0;   // subschemas compiled (each $ref use and union alternative counts)
  size_t text_bytes_ = 0;  // the rules' GBNF so far
};

}  // namespace radixlm::grammar::schema_internal
