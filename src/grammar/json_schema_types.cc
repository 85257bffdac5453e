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
  if (auto m = num("multipleOf"); m && *m != 1) Fail(path, "unsupported keyword 'multipleOf'");
  if (!lo && !hi) return Builtin("integer");
  if (lo && hi && *lo > *hi) Empty(path, "'minimum' above 'maximum' (no integer is valid)");
  return Rule("integer", IntegerRange(lo, hi) + " " + Builtin("space"));
}

std::string Compiler::NumberRule(const Json& s, const std::string& path) {
  if (s.contains("multipleOf")) Fail(path, "unsupported keyword 'multipleOf'");
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
  return Rule("number", NumberRange(b.lo, b.lo_excl, b.hi, b.hi_excl) + " " + Builtin("space"));
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

Compiler::ObjectShape Compiler::ObjectMembers(const Json& s, const std::string& path) {
  ObjectShape o;
  const Json empty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) Fail(path, "'properties' must be an object");
  o.additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  o.extra = !(o.additional.is_boolean() && !o.additional.get<bool>());
  if (s.contains("patternProperties") && !s["patternProperties"].empty()) {
    // One pattern, additional members closed (RefusedKeyword): the extra members are the names
    // the pattern matches, typed by its schema, provided no declared name matches it.
    const std::string pattern = s["patternProperties"].begin().key();
    const Json sub = s["patternProperties"].begin().value();
    for (const auto& [n, x] : props.items()) {
      if (PatternMatches(pattern, n, path)) Fail(path, "unsupported keyword 'patternProperties': it matches the property '" + n + "'");
    }
    o.pattern = pattern;
    o.additional = sub;
    o.extra = true;
  }
  if (o.extra) {
    try {
      o.additional_value = Visit(o.additional, path + "/additionalProperties");
    } catch (const Unsatisfiable&) {
      o.extra = false;  // no value fits: no additional member
    }
  }
  if (s.contains("required")) {
    if (!s["required"].is_array()) Fail(path, "unsupported keyword 'required': must be an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) Fail(path, "'required' must hold strings");
      if (!o.IsRequired(r.get<std::string>())) o.required.push_back(r);
    }
  }
  // Members in schema order, then required names only `additionalProperties` types.
  for (const auto& [n, sub] : props.items()) {
    o.names.push_back(n);
    if (sub.is_boolean() && !sub.get<bool>()) {
      if (o.IsRequired(n)) Empty(path, "required property '" + n + "' has the schema false");
      continue;
    }
    o.members.push_back({n, sub});
  }
  for (const std::string& r : o.required) {
    if (props.contains(r)) continue;
    if (!o.extra || (!o.pattern.empty() && !PatternMatches(o.pattern, r, path))) {
      Empty(path, "required property '" + r + "' is not allowed by 'additionalProperties'");
    }
    o.names.push_back(r);
    o.members.push_back({r, o.additional});
  }
  const auto min_props = Count(s, "minProperties", path), max_props = Count(s, "maxProperties", path);
  if (min_props && *min_props > o.required.size()) Fail(path, "unsupported keyword 'minProperties'");
  if (max_props && (o.extra || o.members.size() > *max_props)) Fail(path, "unsupported keyword 'maxProperties'");
  return o;
}

// Members in order as a chain of rules: `more` = the members from i on, each after a ",";
// `first` = the same with no "," before the first one present. Optional members may be
// skipped; additional members come last.
std::string Compiler::ObjectRule(const Json& s, const std::string& path) {
  const ObjectShape o = ObjectMembers(s, path);
  if (o.members.empty() && o.names.empty() && o.extra && IsTrivialSchema(o.additional)) return Builtin("object");
  const std::string sp = Builtin("space");
  std::string more = "\"\"", first = "\"\"";  // members from i on: each after ",", or the first without
  if (o.extra) {
    std::string key;
    if (!o.pattern.empty()) {
      try {
        key = Rule("pattern-key", "\"\\\"\" " + RegexBody(o.pattern, Definer()) + " \"\\\"\" " + sp);
      } catch (const SchemaError& e) {
        Fail(path, std::string("unsupported keyword 'patternProperties': ") + e.what());
      }
    } else {
      key = o.names.empty() ? Builtin("string") : KeyNotIn(o.names);
    }
    const std::string kv = Rule("additional-kv", key + " \":\" " + sp + " " + o.additional_value);
    more = Rule("additional-more", "(\",\" " + sp + " " + kv + ")*");
    first = Rule("additional-first", "(" + kv + " " + more + ")?");
  }
  // Member values first: an optional member no value satisfies can only be absent.
  std::vector<std::pair<std::string, std::string>> kvs;  // (name, kv rule)
  for (const auto& [n, sub] : o.members) {
    const bool req = o.IsRequired(n);
    std::string value;
    try {
      value = Visit(sub, path + "/properties/" + n);
    } catch (const Unsatisfiable&) {
      if (req) throw;
      continue;
    }
    kvs.push_back({n, Rule(n + "-kv", JsonStringLiteral(n) + " " + sp + " \":\" " + sp + " " + value)});
  }
  for (size_t i = kvs.size(); i-- > 0;) {
    const auto& [n, kv] = kvs[i];
    const bool req = o.IsRequired(n);
    std::string m = "\",\" " + sp + " " + kv + " " + more, f = kv + " " + more;
    if (!req) {
      m += " | " + more;
      f += " | " + first;
    }
    more = Rule(n + "-more", m);
    first = Rule(n + "-first", f);
  }
  return Rule("object", "\"{\" " + sp + " " + first + " \"}\" " + sp);
}

std::string Compiler::ArrayRule(const Json& s, const std::string& path) {
  Json prefix = Json::array();
  Json rest = Json(true);
  if (s.contains("prefixItems")) {
    prefix = s["prefixItems"];
    if (s.contains("items")) rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix = s["items"];
    if (s.contains("additionalItems")) rest = s["additionalItems"];
  } else if (s.contains("items")) {
    rest = s["items"];
  }
  if (!prefix.is_array()) Fail(path, "'prefixItems' must be an array");
  const size_t n = prefix.size();
  const bool rest_allowed = !(rest.is_boolean() && !rest.get<bool>());
  uint64_t min = Count(s, "minItems", path).value_or(0);
  std::optional<uint64_t> max = Count(s, "maxItems", path);
  if (!rest_allowed) max = max ? std::min<uint64_t>(*max, n) : n;
  if (max && *max < min) Empty(path, "'maxItems' below 'minItems' (or a closed tuple shorter than 'minItems')");
  if (min > kMaxRepetition) Fail(path, "unsupported keyword 'minItems': above 2000");
  if (max && *max > kMaxRepetition && n < *max) Fail(path, "unsupported keyword 'maxItems': above 2000");
  if (n == 0 && min == 0 && !max && IsTrivialSchema(rest)) return Builtin("array");
  const std::string sp = Builtin("space");
  // seq: the elements from index i on, element i present.
  std::string seq;
  if (!max || *max > n) {
    const std::string r = Visit(rest, path + "/items");
    const uint64_t a = min > n + 1 ? min - n - 1 : 0;
    std::optional<uint64_t> b;
    if (max) b = *max - n - 1;
    seq = Rule("items", r + " (\",\" " + sp + " " + r + ")" + Repeat(a, b));
  }
  for (size_t i = std::min<size_t>(n, max ? *max : n); i-- > 0;) {
    const std::string e = Visit(prefix[i], path + "/prefixItems/" + std::to_string(i));
    std::string body = e;
    if (!seq.empty()) body += i + 1 < min ? " \",\" " + sp + " " + seq : " (\",\" " + sp + " " + seq + ")?";
    seq = Rule("item-" + std::to_string(i), body);
  }
  if (seq.empty()) return Rule("array", "\"[\" " + sp + " \"]\" " + sp);
  return Rule("array", "\"[\" " + sp + " " + (min == 0 ? "(" + seq + ")?" : seq) + " \"]\" " + sp);
}

}  // namespace radixlm::grammar::schema_internal
