// The JSON Schema compiler's per-type rules: strings (lengths, patterns, formats), integers and
// numbers (bounds), objects (properties in schema order, additional members) and arrays
// (tuples, item counts).
#include <cmath>
#include <map>
#include <optional>
#include <regex>

#include "grammar/json_schema_compiler.h"

namespace radixlm::grammar::schema_internal {
namespace {

std::optional<uint64_t> Count(const Json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return std::nullopt;
  const Json& v = s[key];
  if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
    throw SchemaError(path + ": '" + key + "' must be a non-negative integer");
  }
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  // An integral float (1e9, or 18446744073709551616, which no integer type holds): any count
  // from 2^63 on is beyond every real document, so it saturates there (never wraps to 0).
  const double d = v.get<double>();
  return d >= 9.2e18 ? uint64_t{1} << 63 : static_cast<uint64_t>(d);
}

std::string Repeat(uint64_t lo, std::optional<uint64_t> hi) {
  return "{" + std::to_string(lo) + "," + (hi ? std::to_string(*hi) : "") + "}";
}

// Integer bounds of s for values of an integer type, rounded inwards; nullopt when absent.
struct Bounds {
  std::optional<int64_t> lo, hi;
  bool lo_excl = false, hi_excl = false;  // only for number ranges (integers fold them in)
};

int64_t ToInt(double v, const std::string& path, const char* key) {
  if (!(std::fabs(v) < 9.2e18)) throw SchemaError(path + ": unsupported keyword '" + key + "': bound out of range");
  return static_cast<int64_t>(v);
}

// Whether ECMAScript regex `pattern` matches somewhere in `name` (std::regex's ECMAScript
// grammar; ASCII only, else refused).
bool PatternMatches(const std::string& pattern, const std::string& name, const std::string& path) {
  auto ascii = [](const std::string& t) { return std::all_of(t.begin(), t.end(), [](char c) { return (c & 0x80) == 0; }); };
  if (!ascii(pattern) || !ascii(name)) throw SchemaError(path + ": unsupported keyword 'patternProperties' (non-ASCII)");
  try {
    return std::regex_search(name, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::regex_error&) {
    throw SchemaError(path + ": unsupported keyword 'patternProperties': '" + pattern + "'");
  }
}

}  // namespace

std::string Compiler::StringRule(const Json& s, const std::string& path) {
  std::string format;
  if (s.contains("format") && s["format"].is_string()) {
    format = s["format"].get<std::string>();
    if (kRefusedFormats.count(format)) Fail(path, "unsupported keyword 'format': '" + format + "'");
    if (FormatBody(format == "idn-email" ? "email" : format).empty()) format.clear();  // an annotation
  }
  const auto min = Count(s, "minLength", path), max = Count(s, "maxLength", path);
  const bool length = (min && *min > 0) || max;
  const bool pattern = s.contains("pattern");
  if (pattern + !format.empty() + length > 1) {
    Fail(path, std::string("unsupported keyword '") + (pattern ? "pattern" : "format") + "' together with " +
                   (length ? "'minLength'/'maxLength'" : "'format'"));
  }
  const std::string quote = "\"\\\"\"";
  std::string body;
  if (pattern) {
    if (!s["pattern"].is_string()) Fail(path, "'pattern' must be a string");
    try {
      body = RegexBody(s["pattern"].get<std::string>(), Definer());
    } catch (const SchemaError& e) {
      Fail(path, std::string("unsupported keyword 'pattern': ") + e.what());
    }
  } else if (!format.empty()) {
    body = FormatBody(format == "idn-email" ? "email" : format);
  } else if (length) {
    const uint64_t lo = min.value_or(0);
    if (max && *max < lo) Empty(path, "'maxLength' below 'minLength'");
    if (lo > kMaxRepetition) Fail(path, "unsupported keyword 'minLength': above 2000");
    if (max && *max > kMaxRepetition) Fail(path, "unsupported keyword 'maxLength': above 2000");
    body = Builtin("char") + Repeat(lo, max);
  } else {
    return Builtin("string");
  }
  return Rule(format.empty() ? "string" : format, quote + " " + body + " " + quote + " " + Builtin("space"));
}

std::string Compiler::IntegerRule(const Json& s, const std::string& path) {
  std::optional<int64_t> lo, hi;
  auto num = [&](const char* k) -> std::optional<double> {
    if (!s.contains(k) || !s[k].is_number()) return std::nullopt;
    return s[k].get<double>();
  };
  auto flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
  auto raise_lo = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
  auto lower_hi = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
  if (auto v = num("minimum")) raise_lo(ToInt(flag("exclusiveMinimum") ? std::floor(*v) + 1 : std::ceil(*v), path, "minimum"));
  if (auto v = num("maximum")) lower_hi(ToInt(flag("exclusiveMaximum") ? std::ceil(*v) - 1 : std::floor(*v), path, "maximum"));
  if (auto v = num("exclusiveMinimum")) raise_lo(ToInt(std::floor(*v) + 1, path, "exclusiveMinimum"));
  if (auto v = num("exclusiveMaximum")) lower_hi(ToInt(std::ceil(*v) - 1, path, "exclusiveMaximum"));
  if (auto m = num("multipleOf"); m && *m != 1) {
    if (lo || hi) Fail(path, "unsupported keyword 'multipleOf' together with bounds");
    return MultipleOfRule(s, path);
  }
  if (!lo && !hi) return Builtin("integer");
  if (lo && hi && *lo > *hi) Empty(path, "'minimum' above 'maximum' (no integer is valid)");
  // -0 is 0: where 0 is allowed, so is its negative spelling.
  const bool zero = (!lo || *lo <= 0) && (!hi || *hi >= 0);
  return Rule("integer", "(" + IntegerRange(lo, hi) + (zero ? " | \"-0\"" : "") + ") " + Builtin("space"));
}

// multipleOf k (a positive integer up to kMaxDivisor, no bounds): the integers whose decimal
// digits lead a remainder automaton from 0 back to 0 (k states; a digit d takes r to
// (10 r + d) mod k). Written as integers (a narrowing for `number`: 6.0 is a multiple of 3).
std::string Compiler::MultipleOfRule(const Json& s, const std::string& path) {
  constexpr int64_t kMaxDivisor = 1000;
  const Json& m = s["multipleOf"];
  if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > kMaxDivisor) {
    Fail(path, "unsupported keyword 'multipleOf': only a whole divisor from 1 to " + std::to_string(kMaxDivisor));
  }
  const int64_t k = m.get<int64_t>();
  if (k == 1) return Builtin("integer");
  const std::string base = Reserve("mult" + std::to_string(k));
  auto state = [&](int64_t r) { return base + "-" + std::to_string(r); };
  for (int64_t r = 0; r < k; ++r) {
    std::map<int64_t, std::string> by_target;  // next remainder -> digits leading there
    for (int d = 0; d <= 9; ++d) by_target[(10 * r + d) % k] += static_cast<char>('0' + d);
    std::string body = r == 0 ? "\"\"" : "";
    for (const auto& [to, digits] : by_target) body += (body.empty() ? "" : " | ") + ("[" + digits + "] " + state(to));
    names_.insert(state(r));
    rules_.push_back({state(r), body});
    text_bytes_ += state(r).size() + body.size() + 6;
  }
  std::string start;  // a first digit 1-9, then the automaton from its remainder
  std::map<int64_t, std::string> first;
  for (int d = 1; d <= 9; ++d) first[d % k] += static_cast<char>('0' + d);
  for (const auto& [to, digits] : first) start += (start.empty() ? "" : " | ") + ("[" + digits + "] " + state(to));
  return Rule("multiple", "\"-\"? (\"0\" | " + start + ") " + Builtin("space"));
}

std::string Compiler::NumberRule(const Json& s, const std::string& path) {
  if (s.contains("multipleOf")) {
    if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
      Fail(path, "unsupported keyword 'multipleOf' together with bounds");
    }
    return MultipleOfRule(s, path);
  }
  Bounds b;
  auto integral = [&](const char* k) -> std::optional<int64_t> {
    if (!s.contains(k) || !s[k].is_number()) return std::nullopt;
    const double v = s[k].get<double>();
    if (std::floor(v) != v) Fail(path, std::string("unsupported keyword '") + k + "': a non-integer bound on a number");
    return ToInt(v, path, k);
  };
  auto flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
  if (auto v = integral("minimum")) b.lo = v, b.lo_excl = flag("exclusiveMinimum");
  if (auto v = integral("maximum")) b.hi = v, b.hi_excl = flag("exclusiveMaximum");
  if (auto v = integral("exclusiveMinimum"); v && (!b.lo || *v >= *b.lo)) b.lo = v, b.lo_excl = true;
  if (auto v = integral("exclusiveMaximum"); v && (!b.hi || *v <= *b.hi)) b.hi = v, b.hi_excl = true;
  if (!b.lo && !b.hi) return Builtin("number");
  if (b.lo && b.hi && (*b.lo > *b.hi || (*b.lo == *b.hi && (b.lo_excl || b.hi_excl)))) {
    Empty(path, "'minimum' above 'maximum' (no number is valid)");
  }
  // -0 (and -0.0) is 0: where 0 is allowed, so are its negative spellings.
  const bool zero = (!b.lo || *b.lo < 0 || (*b.lo == 0 && !b.lo_excl)) && (!b.hi || *b.hi > 0 || (*b.hi == 0 && !b.hi_excl));
  return Rule("number", "(" + NumberRange(b.lo, b.lo_excl, b.hi, b.hi_excl) + (zero ? " | \"-0\" (\".\" \"0\"+)?" : "") + ") " +
                            Builtin("space"));
}

// A member name (with quotes and trailing space) that is none of `names`: a trie over their
// code points, leaving it on a character no name continues with, or ending where no name ends.
std::string Compiler::KeyNotIn(const std::vector<std::string>& names) {
  struct Node {
    std::map<uint32_t, int> next;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& n : names) {
    int at = 0;
    for (size_t i = 0; i < n.size();) {
      const auto c = static_cast<unsigned char>(n[i]);
      const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
      for (int k = 1; k < len && i + k < n.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(n[i + k]) & 0x3F);
      i += len;
      auto it = trie[at].next.find(cp);
      if (it == trie[at].next.end()) {
        trie.push_back({});
        it = trie[at].next.emplace(cp, static_cast<int>(trie.size()) - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  // Each step reads one character in its canonical encodings (JsonCharExpr): whatever escape
  // spells a code point, it takes that code point's branch, so no declared name gets through.
  const std::string quote = "\"\\\"\"";
  const std::string rest = Rule("key-rest", "(" + Rule("key-char", JsonCharExpr({{0, 0x10FFFF}}, true)) + ")* " + quote);
  std::vector<std::string> rule_of(trie.size());
  for (size_t i = trie.size(); i-- > 0;) {  // children have larger indices
    std::vector<CharRange> used;
    std::string body;
    for (const auto& [cp, child] : trie[i].next) {
      used.push_back({cp, cp});
      body += (body.empty() ? "" : " | ") + JsonCharExpr({{cp, cp}}, true) + " " + rule_of[child];
    }
    Symbol other;
    other.ranges = used;
    other.negated = true;
    const std::vector<CharRange> others = SymbolCodePoints(other);
    if (!others.empty()) body += (body.empty() ? "" : " | ") + Rule("key-other", JsonCharExpr(others, true)) + " " + rest;
    if (!trie[i].terminal) body += (body.empty() ? "" : " | ") + quote;
    rule_of[i] = Rule("key-not", body);
  }
  return Rule("key", quote + " " + rule_of[0] + " " + Builtin("space"));
}

// propertyNames: the declared names it rejects drop out (required ones make the object
// unsatisfiable); additional members take keys from its string language, which is exact only
// where no declared name it allows could be taken again (else refused).
void Compiler::PropertyNames(const Json& names, const Json& props, const std::string& path, ObjectShape* o) {
  if (IsTrivialSchema(names)) return;
  if (names.is_boolean()) {  // false: no member at all (nor the names a one-line pattern leaves over)
    o->names_schema = Json{{"enum", Json::array()}};
    o->extra = false;
    o->broken_value_schema = Json();
    return;
  }
  if (!names.is_object() || !StringCheckable(names)) {
    Fail(path, "unsupported keyword 'propertyNames': only type, enum, const, pattern, minLength and maxLength");
  }
  o->names_schema = names;
  if (!o->extra) return;
  if (!o->patterns.empty()) Fail(path, "unsupported keyword 'propertyNames' together with 'patternProperties'");
  for (const auto& [n, x] : props.items()) {
    if (StringSatisfies(n, names)) Fail(path, "unsupported keyword 'propertyNames': it allows the property '" + n + "' beside additional members");
  }
  Json key = names;
  key["type"] = "string";  // a key is a string whatever names' type says (an allowed string type)
  if (!TypeSet(names).count("string")) {
    o->extra = false;
    return;
  }
  try {
    o->names_key = Visit(key, path + "/propertyNames");
  } catch (const Unsatisfiable&) {
    o->extra = false;
  }
}

// patternProperties: a pattern every name matches folds into the members and
// additionalProperties (the returned schema, compiled instead); a one-line-names pattern with no
// declared members types those names; with additional members closed, the names the patterns
// match become the extra members (RefusedKeyword says what is refused).
std::optional<Json> Compiler::PatternMembers(const Json& s, const Json& props, const std::string& path, ObjectShape* o) {
  if (s.contains("patternProperties") && s["patternProperties"].is_object() && s["patternProperties"].size() == 1) {
    const std::string pattern = s["patternProperties"].begin().key();
    const Json sub = s["patternProperties"].begin().value();
    const PatternKind kind = KindOfPattern(pattern);
    if (kind == PatternKind::kEveryName) {
      // Every member's name matches: each declared member also satisfies sub, and no member is
      // additional (every extra one is typed by sub).
      Json every = s;
      every.erase("patternProperties");
      if (every.contains("properties") && every["properties"].is_object()) {
        for (auto& [n, x] : every["properties"].items()) x = IsTrivialSchema(x) ? sub : Json{{"allOf", Json::array({x, sub})}};
      }
      every["additionalProperties"] = sub;
      return every;
    }
    if (kind == PatternKind::kOneLineNames && props.empty() && !(IsTrivialSchema(sub) && IsTrivialSchema(o->additional))) {
      // No declared members (RefusedKeyword): names without a line terminator are typed by sub,
      // the others by additionalProperties.
      o->patterns.push_back(pattern);
      o->broken_value_schema = o->additional;
      o->additional = sub;
      o->extra = true;
    }
  }
  if (s.contains("patternProperties") && !s["patternProperties"].empty() && !o->extra) {
    // Additional members closed, every pattern with one schema (RefusedKeyword): the extra
    // members are the names some pattern matches, typed by that schema, provided no declared
    // name matches a pattern. (Patterns whose schema is trivial beside open members constrain
    // nothing and are ignored.)
    const Json& pp = s["patternProperties"];
    if (!pp.is_object()) Fail(path, "'patternProperties' must be an object");
    for (const auto& [pattern, sub] : pp.items()) {
      for (const auto& [n, x] : props.items()) {
        if (PatternMatches(pattern, n, path)) Fail(path, "unsupported keyword 'patternProperties': it matches the property '" + n + "'");
      }
      o->patterns.push_back(pattern);
      o->additional = sub;
    }
    o->extra = true;
  }
  return std::nullopt;
}

// The compiled value of an additional member (none fits: no additional member), and of a member
// whose name has a line terminator beside a one-line-names pattern.
void Compiler::AdditionalValues(const std::string& path, ObjectShape* o) {
  if (o->extra) {
    try {
      o->additional_value = Visit(o->additional, path + "/additionalProperties");
    } catch (const Unsatisfiable&) {
      o->extra = false;  // no value fits: no additional member
    }
  }
  if (!o->broken_value_schema.is_null() && !(o->broken_value_schema.is_boolean() && !o->broken_value_schema.get<bool>())) {
    try {
      o->broken_value = Visit(o->broken_value_schema, path + "/additionalProperties");
      o->extra = true;
    } catch (const Unsatisfiable&) {
    }
  }
}

// Members in schema order, then required names only `additionalProperties` types.
void Compiler::MemberList(const Json& s, const Json& props, const std::string& path, ObjectShape* o) {
  if (s.contains("required")) {
    if (!s["required"].is_array()) Fail(path, "unsupported keyword 'required': must be an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) Fail(path, "'required' must hold strings");
      if (!o->IsRequired(r.get<std::string>())) o->required.push_back(r);
    }
  }
  for (const auto& [n, sub] : props.items()) {
    o->names.push_back(n);
    if (sub.is_boolean() && !sub.get<bool>()) {
      if (o->IsRequired(n)) Empty(path, "required property '" + n + "' has the schema false");
      continue;
    }
    if (!o->names_schema.is_null() && !StringSatisfies(n, o->names_schema)) {
      if (o->IsRequired(n)) Empty(path, "required property '" + n + "' is not allowed by 'propertyNames'");
      continue;
    }
    o->members.push_back({n, sub});
  }
  for (const std::string& r : o->required) {
    if (props.contains(r)) continue;
    const bool by_pattern = o->patterns.empty() || std::any_of(o->patterns.begin(), o->patterns.end(), [&](const std::string& p) {
      return PatternMatches(p, r, path);
    });
    const bool by_names = o->names_schema.is_null() || StringSatisfies(r, o->names_schema);
    if (!o->extra || !by_pattern || !by_names) {
      Empty(path, "required property '" + r + "' is not allowed by 'additionalProperties' / 'propertyNames'");
    }
    o->names.push_back(r);
    o->members.push_back({r, o->additional});
  }
}

Compiler::ObjectShape Compiler::ObjectMembers(const Json& s, const std::string& path) {
  ObjectShape o;
  const Json empty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) Fail(path, "'properties' must be an object");
  o.additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  o.extra = !(o.additional.is_boolean() && !o.additional.get<bool>());
  if (const std::optional<Json> folded = PatternMembers(s, props, path, &o)) return ObjectMembers(*folded, path);
  if (s.contains("propertyNames")) PropertyNames(s["propertyNames"], props, path, &o);
  AdditionalValues(path, &o);
  MemberList(s, props, path, &o);
  // Member counts: only where they constrain (more than the required names; fewer than the
  // members there could be), counted by the chain below.
  const auto min_props = Count(s, "minProperties", path), max_props = Count(s, "maxProperties", path);
  if (min_props && *min_props > o.required.size()) o.min_count = *min_props;
  if (max_props && (o.extra || o.members.size() > *max_props)) o.max_count = *max_props;
  if (o.max_count && *o.max_count < o.required.size()) Empty(path, "'maxProperties' below the required names' count");
  if (o.max_count && *o.max_count < o.min_count) Empty(path, "'maxProperties' below 'minProperties'");
  if (!o.extra && o.min_count > o.members.size()) Empty(path, "'minProperties' above the members allowed");
  return o;
}

// The rule of one additional member ("" when there is none): its key (a patternProperties
// pattern, propertyNames' key, or any name not declared) and its value, or a name with a line
// terminator typed by additionalProperties.
std::string Compiler::ObjectExtraKv(const ObjectShape& o, const std::string& sp, const std::string& path) {
  std::string extra_kv;
  if (o.extra) {
    std::string key;
    if (!o.patterns.empty()) {
      try {
        for (const std::string& p : o.patterns) {
          key += (key.empty() ? "" : " | ") + Rule("pattern-key", "\"\\\"\" " + RegexBody(p, Definer()) + " \"\\\"\" " + sp);
        }
      } catch (const SchemaError& e) {
        Fail(path, std::string("unsupported keyword 'patternProperties': ") + e.what());
      }
      if (o.patterns.size() > 1) key = Rule("pattern-keys", key);
    } else if (!o.names_schema.is_null()) {
      key = o.names_key;
    } else {
      key = o.names.empty() ? Builtin("string") : KeyNotIn(o.names);
    }
    if (!o.additional_value.empty()) extra_kv = Rule("additional-kv", key + " \":\" " + sp + " " + o.additional_value);
    if (!o.broken_value.empty()) {  // a name with a line terminator, typed by additionalProperties
      const std::string any = Rule("key-char", JsonCharExpr({{0, 0x10FFFF}}, true));
      const std::string brk = JsonCharExpr({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}}, true);
      const std::string bkey = Rule("broken-key", "\"\\\"\" " + any + "* " + brk + " " + any + "* \"\\\"\" " + sp);
      const std::string bkv = Rule("broken-kv", bkey + " \":\" " + sp + " " + o.broken_value);
      extra_kv = extra_kv.empty() ? bkv : Rule("additional-kvs", extra_kv + " | " + bkv);
    }
  }
  return extra_kv;
}

// Each member's (name, kv rule), in order. Member values first: an optional member no value
// satisfies can only be absent.
std::vector<std::pair<std::string, std::string>> Compiler::ObjectMemberKvs(const ObjectShape& o, const std::string& sp,
                                                                           const std::string& path) {
  std::vector<std::pair<std::string, std::string>> kvs;  // (name, kv rule)
  for (const auto& [n, sub] : o.members) {
    std::string value;
    try {
      value = Visit(sub, path + "/properties/" + n);
    } catch (const Unsatisfiable&) {
      if (o.IsRequired(n)) throw;
      continue;
    }
    kvs.push_back({n, Rule(n + "-kv", JsonStringLiteral(n) + " " + sp + " \":\" " + sp + " " + value)});
  }
  return kvs;
}

// The chain of ObjectRule's comment: `first(0)` (nullopt when no set of members meets the
// counts), built from the last member back.
std::optional<std::string> Compiler::ObjectChain(const ObjectShape& o, const std::vector<std::pair<std::string, std::string>>& kvs,
                                                 const std::string& extra_kv, const std::string& sp, const std::string& path) {
  const uint64_t cap = o.max_count ? *o.max_count : o.min_count;  // counts past it are alike
  if ((cap + 1) * (kvs.size() + 1) > 20000) Fail(path, "unsupported keyword 'minProperties'/'maxProperties': too many counts to track");
  auto clamp = [&](uint64_t c) { return std::min(c, cap); };
  // The additional members after c present: a "," before each, or (first) none before the first.
  auto tail = [&](uint64_t c, bool first) -> std::optional<std::string> {
    const uint64_t need = o.min_count > c ? o.min_count - c : 0;
    std::optional<uint64_t> room;
    if (o.max_count) room = *o.max_count - std::min(c, *o.max_count);
    if (extra_kv.empty() || (room && *room == 0)) {
      if (need > 0) return std::nullopt;
      return std::string("\"\"");
    }
    if (need > kMaxRepetition || (room && *room > kMaxRepetition)) Fail(path, "unsupported keyword 'minProperties'/'maxProperties': above 2000");
    const std::string next = "(\",\" " + sp + " " + extra_kv + ")";
    if (!first) return Rule("additional-more", next + Repeat(need, room));
    const std::string rest = next + Repeat(need > 0 ? need - 1 : 0, room ? std::optional<uint64_t>(*room - 1) : std::nullopt);
    return Rule("additional-first", need > 0 ? extra_kv + " " + rest : "(" + extra_kv + " " + rest + ")?");
  };
  std::vector<std::optional<std::string>> more(cap + 1), next_more(cap + 1);  // more(i, c) for the current i
  for (uint64_t c = 0; c <= cap; ++c) more[c] = tail(c, false);
  std::optional<std::string> first = tail(0, true);
  auto join = [](std::optional<std::string> a, const std::optional<std::string>& b) -> std::optional<std::string> {
    if (!a) return b;
    if (!b) return a;
    return *a + " | " + *b;
  };
  for (size_t i = kvs.size(); i-- > 0;) {
    const auto& [n, kv] = kvs[i];
    const bool req = o.IsRequired(n);
    for (uint64_t c = 0; c <= cap; ++c) {
      std::optional<std::string> body;
      const bool fits = !o.max_count || c < *o.max_count;
      if (fits && more[clamp(c + 1)]) body = "\",\" " + sp + " " + kv + " " + *more[clamp(c + 1)];
      if (!req) body = join(body, more[c]);
      next_more[c] = body ? std::optional<std::string>(Rule(n + "-more", *body)) : std::nullopt;
    }
    std::optional<std::string> f;
    if ((!o.max_count || *o.max_count > 0) && more[clamp(1)]) f = kv + " " + *more[clamp(1)];
    if (!req) f = join(f, first);
    first = f ? std::optional<std::string>(Rule(n + "-first", *f)) : std::nullopt;
    more.swap(next_more);
  }
  return first;
}

// Members in order as a chain of rules: `more(i, c)` = the members from i on, each after a ",",
// with c present so far; `first(i)` = the same with none present yet (no "," before the first).
// Optional members may be skipped; additional members come last. c is counted only as far as
// minProperties / maxProperties need (up to max, or up to min when there is no max); a branch
// that cannot meet them is left out.
std::string Compiler::ObjectRule(const Json& s, const std::string& path) {
  const ObjectShape o = ObjectMembers(s, path);
  if (o.members.empty() && o.names.empty() && o.extra && o.patterns.empty() && o.names_schema.is_null() &&
      IsTrivialSchema(o.additional) &&
      o.min_count == 0 && !o.max_count) {
    return Builtin("object");
  }
  const std::string sp = Builtin("space");
  const std::string extra_kv = ObjectExtraKv(o, sp, path);
  const std::vector<std::pair<std::string, std::string>> kvs = ObjectMemberKvs(o, sp, path);
  const std::optional<std::string> first = ObjectChain(o, kvs, extra_kv, sp, path);
  if (!first) Empty(path, "no set of members meets 'minProperties'/'maxProperties'");
  return Rule("object", "\"{\" " + sp + " " + *first + " \"}\" " + sp);
}

// An array schema's tuple (`prefix`, the schemas of the first elements) and the schema of the
// elements after it (`rest`), in the schema's draft's form (the other form's keywords constrain
// nothing there).
void Compiler::ArrayTuple(const Json& s, const std::string& path, Json* prefix, Json* rest) {
  const TupleForm form = merger_.tuple_form();
  if (form != TupleForm::kItemsArray && s.contains("prefixItems")) {
    *prefix = s["prefixItems"];
    if (s.contains("items")) *rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    if (form == TupleForm::kPrefixItems) Fail(path, "in draft 2020-12 'items' is one schema (a tuple is 'prefixItems')");
    *prefix = s["items"];
    if (s.contains("additionalItems")) *rest = s["additionalItems"];
  } else if (s.contains("items")) {
    *rest = s["items"];
  }
  if (!prefix->is_array()) Fail(path, "'prefixItems' must be an array");
}

std::string Compiler::ArrayRule(const Json& s, const std::string& path) {
  Json prefix = Json::array();
  Json rest = Json(true);
  ArrayTuple(s, path, &prefix, &rest);
  size_t n = prefix.size();
  bool rest_allowed = !(rest.is_boolean() && !rest.get<bool>());
  uint64_t min = Count(s, "minItems", path).value_or(0);
  std::optional<uint64_t> max = Count(s, "maxItems", path);
  if (n == 0 && min == 0 && !max && IsTrivialSchema(rest)) return Builtin("array");
  // Element rules, in order; an element position no value satisfies ends the array before it
  // (`{"items": {"enum": []}}` allows exactly []).
  std::vector<std::string> elems;
  for (size_t i = 0; i < n && (!max || i < *max); ++i) {
    try {
      elems.push_back(Visit(prefix[i], path + "/prefixItems/" + std::to_string(i)));
    } catch (const Unsatisfiable&) {
      n = i;
      rest_allowed = false;
      break;
    }
  }
  if (!rest_allowed) max = max ? std::min<uint64_t>(*max, n) : n;
  if (max && *max < min) Empty(path, "'maxItems' below 'minItems' (or fewer allowed elements than 'minItems')");
  if (min > kMaxRepetition) Fail(path, "unsupported keyword 'minItems': above 2000");
  if (max && *max > kMaxRepetition && n < *max) Fail(path, "unsupported keyword 'maxItems': above 2000");
  std::string r;
  if (!max || *max > n) {
    try {
      r = Visit(rest, path + "/items");
    } catch (const Unsatisfiable&) {
      max = n;
      if (*max < min) Empty(path, "no value satisfies 'items' and 'minItems' needs more than the tuple");
    }
  }
  const std::string sp = Builtin("space");
  // seq: the elements from index i on, element i present.
  std::string seq;
  if (!max || *max > n) {
    const uint64_t a = min > n + 1 ? min - n - 1 : 0;
    std::optional<uint64_t> b;
    if (max) b = *max - n - 1;
    seq = Rule("items", r + " (\",\" " + sp + " " + r + ")" + Repeat(a, b));
  }
  for (size_t i = std::min<size_t>(n, max ? *max : n); i-- > 0;) {
    std::string body = elems[i];
    if (!seq.empty()) body += i + 1 < min ? " \",\" " + sp + " " + seq : " (\",\" " + sp + " " + seq + ")?";
    seq = Rule("item-" + std::to_string(i), body);
  }
  if (seq.empty()) return Rule("array", "\"[\" " + sp + " \"]\" " + sp);
  return Rule("array", "\"[\" " + sp + " " + (min == 0 ? "(" + seq + ")?" : seq) + " \"]\" " + sp);
}

}  // namespace radixlm::grammar::schema_internal
