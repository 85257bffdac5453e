// Keyword classification, $ref resolution, allOf merging, enum filtering and oneOf disjointness
// for the JSON Schema compiler (json_schema_merge.h).
#include "grammar/json_schema_merge.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "grammar/json_schema_text.h"

namespace radixlm::grammar::schema_internal {
namespace {

const std::set<std::string> kValidation = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "items", "prefixItems", "additionalItems", "contains", "minItems", "maxItems", "uniqueItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "allOf", "anyOf", "oneOf", "not", "if", "$ref", "$dynamicRef", "$recursiveRef", "unevaluatedProperties",
    "unevaluatedItems"};
const std::set<std::string> kAllTypes = {"object", "array", "string", "number", "boolean", "null"};
const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties", "patternProperties",
                                               "propertyNames", "minProperties", "maxProperties", "dependencies",
                                               "dependentRequired", "dependentSchemas", "unevaluatedProperties"};
const std::set<std::string> kArrayKeywords = {"items", "prefixItems", "additionalItems", "contains", "minItems",
                                              "maxItems", "uniqueItems", "unevaluatedItems"};

// Draft 4's boolean exclusiveMinimum / exclusiveMaximum in draft 6's numeric form, so a merge
// takes each bound together with its own exclusiveness.
Json NumericExclusive(Json s) {
  if (!s.is_object()) return s;
  for (const auto& [flag, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    if (!s.contains(flag) || !s[flag].is_boolean()) continue;
    const bool on = s[flag].get<bool>();
    s.erase(flag);
    if (on && s.contains(bound) && s[bound].is_number()) {
      s[flag] = s[bound];
      s.erase(bound);
    }
  }
  return s;
}

// An array schema's element schemas as a tuple prefix and the schema of every later element
// (items / prefixItems / additionalItems only interact within one schema object).
struct ArrayForm {
  std::vector<Json> prefix;
  Json rest = true;
  bool modern = false;  // written with prefixItems (2020-12)
};
bool HasArrayItems(const Json& s) { return s.contains("items") || s.contains("prefixItems") || s.contains("additionalItems"); }
ArrayForm ArrayOf(const Json& s, TupleForm form) {
  ArrayForm f;
  if (form != TupleForm::kItemsArray && s.contains("prefixItems") && s["prefixItems"].is_array()) {
    f.modern = true;
    for (const Json& x : s["prefixItems"]) f.prefix.push_back(x);
    if (s.contains("items")) f.rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    if (form == TupleForm::kPrefixItems) throw SchemaError("in draft 2020-12 'items' is one schema (a tuple is 'prefixItems')");
    for (const Json& x : s["items"]) f.prefix.push_back(x);
    if (s.contains("additionalItems")) f.rest = s["additionalItems"];
  } else if (s.contains("items")) {
    f.rest = s["items"];
  }  // additionalItems without an items array constrains nothing
  return f;
}

bool IsTrivial(const Json& s) { return (s.is_boolean() && s.get<bool>()) || (s.is_object() && !HasConstraints(s, false)); }
bool IsFalse(const Json& s) { return s.is_boolean() && !s.get<bool>(); }
bool NonEmpty(const Json& v) { return !(v.is_object() && v.empty()) && !(v.is_array() && v.empty()); }

std::string ValueType(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  // 1.0 counts as a number only: draft 4 does not take it for an integer (draft 6 does), so
  // "integer" enums keep only values written as integers (narrower, never looser).
  if (v.is_number_float()) return "number";
  return "integer";
}

bool TypeAllowed(const std::string& t, const std::set<std::string>& types) {
  return types.count(t) || (t == "integer" && types.count("number"));
}

size_t CodePoints(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool NumberOk(double x, const Json& s) {
  auto num = [&](const char* k, double* v) {
    if (!s.contains(k) || !s[k].is_number()) return false;
    *v = s[k].get<double>();
    return true;
  };
  double v;
  const bool excl_min_bool = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
  const bool excl_max_bool = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
  if (num("minimum", &v) && (excl_min_bool ? x <= v : x < v)) return false;
  if (num("maximum", &v) && (excl_max_bool ? x >= v : x > v)) return false;
  if (num("exclusiveMinimum", &v) && x <= v) return false;
  if (num("exclusiveMaximum", &v) && x >= v) return false;
  if (num("multipleOf", &v) && v > 0 && std::fmod(x, v) != 0) return false;
  return true;
}

bool ValueOk(const Json& v, const Json& s) {
  const std::string t = ValueType(v);
  if (t == "string") {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && CodePoints(str) < s["minLength"].get<double>()) return false;
    if (s.contains("maxLength") && CodePoints(str) > s["maxLength"].get<double>()) return false;
    if (s.contains("format") && s["format"].is_string()) {
      const std::string f = s["format"].get<std::string>();
      if (!FormatBody(f).empty() || f == "hostname" || f == "ipv6") {
        throw SchemaError("unsupported keyword 'format' together with 'enum'/'const'");
      }
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) throw SchemaError("'pattern' must be a string");
      const std::string p = s["pattern"].get<std::string>();
      const bool ascii = std::all_of(str.begin(), str.end(), [](char c) { return (c & 0x80) == 0; }) &&
                         std::all_of(p.begin(), p.end(), [](char c) { return (c & 0x80) == 0; });
      if (!ascii) throw SchemaError("unsupported keyword 'pattern' on a non-ASCII 'enum' value");
      try {
        if (!std::regex_search(str, std::regex(p, std::regex::ECMAScript))) return false;
      } catch (const std::regex_error&) {
        throw SchemaError("unsupported keyword 'pattern': '" + p + "'");
      }
    }
    return true;
  }
  if (t == "number" || t == "integer") return NumberOk(v.get<double>(), s);
  const std::set<std::string>& kw = t == "object" ? kObjectKeywords : kArrayKeywords;
  for (const auto& [k, x] : s.items()) {
    if (kw.count(k)) throw SchemaError("unsupported keyword '" + k + "' together with 'enum'/'const' of " + t + "s");
  }
  return true;
}

// enum and const of s, intersected; nullopt when neither is present.
std::optional<std::vector<Json>> Values(const Json& s) {
  std::optional<std::vector<Json>> out;
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) throw SchemaError("'enum' must be an array");
    out = std::vector<Json>(s["enum"].begin(), s["enum"].end());
  }
  if (s.contains("const")) {
    if (!out) {
      out = std::vector<Json>{s["const"]};
    } else {
      std::vector<Json> keep;
      for (const Json& v : *out) {
        if (v == s["const"]) keep.push_back(v);
      }
      out = keep;
    }
  }
  return out;
}

}  // namespace

bool RequiredOnly(const Json& s) {
  if (!s.is_object() || !s.contains("required") || !s["required"].is_array() || s["required"].empty()) return false;
  for (const auto& [k, v] : s.items()) {
    if (k != "required" && kValidation.count(k)) return false;
  }
  return std::all_of(s["required"].begin(), s["required"].end(), [](const Json& r) { return r.is_string(); });
}

Json Negate(const Json& s) {
  if (IsTrivial(s)) return Json(false);
  if (!RequiredOnly(s)) throw SchemaError("unsupported keyword 'not' (only of {} or of a 'required' list)");
  Json alts = Json::array();
  for (const Json& name : s["required"]) {
    alts.push_back(Json{{"type", "object"}, {"properties", Json{{name.get<std::string>(), false}}}});
  }
  return Json{{"anyOf", alts}};
}

std::vector<Json> DependencyConstraints(const Json& s) {
  static const Json kNonObjectTypes = Json::array({"array", "string", "number", "boolean", "null"});
  std::vector<Json> out;
  for (const char* key : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_object()) throw SchemaError(std::string("'") + key + "' must be an object");
    for (const auto& [name, dep] : s[key].items()) {
      Json present;
      if (dep.is_array()) {
        Json req = Json::array({name});
        for (const Json& d : dep) req.push_back(d);
        present = Json{{"type", "object"}, {"required", req}};
      } else {
        present = Json{{"allOf", Json::array({Json{{"type", "object"}, {"required", Json::array({name})}}, dep})}};
      }
      out.push_back(Json{{"anyOf", Json::array({Json{{"type", kNonObjectTypes}},
                                                Json{{"type", "object"}, {"properties", Json{{name, false}}}}, present})}});
    }
  }
  if (out.size() > 3) throw SchemaError("unsupported keyword 'dependencies': more than 3 entries");
  return out;
}

std::optional<Json> OneOfByPresence(const Json& list) {
  if (!list.is_array() || list.size() > 4) return std::nullopt;
  for (const Json& a : list) {
    if (!RequiredOnly(a)) return std::nullopt;
  }
  Json alts = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    Json all = Json::array({list[i]});
    for (size_t j = 0; j < list.size(); ++j) {
      if (j != i) all.push_back(Negate(list[j]));
    }
    alts.push_back(Json{{"allOf", all}});
  }
  return Json{{"anyOf", alts}};
}

PatternKind KindOfPattern(const std::string& p) {
  static const std::set<std::string> kEvery = {"", ".*", "^.*", ".*$", "^", "$", "(.*)", "^(.*)"};
  static const std::set<std::string> kOneLine = {"^.*$", "^(.*)$"};
  if (kEvery.count(p)) return PatternKind::kEveryName;
  if (kOneLine.count(p)) return PatternKind::kOneLineNames;
  return PatternKind::kOther;
}

bool PatternPropertiesExpressible(const Json& s) {
  const Json& pp = s["patternProperties"];
  if (!pp.is_object()) return false;
  if (pp.size() == 1) {  // a pattern every name matches, or every name without a line break
    const PatternKind kind = KindOfPattern(pp.begin().key());
    if (kind == PatternKind::kEveryName) return true;
    if (kind == PatternKind::kOneLineNames && (!s.contains("properties") || !NonEmpty(s["properties"]))) return true;
  }
  const bool closed = s.contains("additionalProperties") && IsFalse(s["additionalProperties"]);
  if (closed) return std::all_of(pp.begin(), pp.end(), [&](const Json& x) { return x == pp.begin().value(); });
  const bool open = !s.contains("additionalProperties") || IsTrivial(s["additionalProperties"]);
  return open && std::all_of(pp.begin(), pp.end(), [](const Json& x) { return IsTrivial(x); });
}

std::string RefusedKeyword(const Json& s) {
  for (const auto& [k, v] : s.items()) {
    if (k == "if" || k == "contains" || k == "$dynamicRef" || k == "$recursiveRef") return k;
    // Expressible (json_schema_types.cc): patterns that share one schema with additional
    // members closed; patterns with trivial schemas beside open, unconstrained ones.
    if (k == "patternProperties" && NonEmpty(v) && !PatternPropertiesExpressible(s)) return k;
    if ((k == "unevaluatedProperties" || k == "unevaluatedItems") && !(v.is_boolean() && v.get<bool>())) return k;
    if (k == "uniqueItems" && v.is_boolean() && v.get<bool>() &&
        !(s.contains("maxItems") && s["maxItems"].is_number() && s["maxItems"].get<double>() <= 1)) {
      return k;
    }
  }
  return "";
}

bool HasConstraints(const Json& s, bool ignore_ref) {
  if (!s.is_object()) return !(s.is_boolean() && s.get<bool>());
  for (const auto& [k, v] : s.items()) {
    if (ignore_ref && k == "$ref") continue;
    if (kValidation.count(k)) return true;
  }
  return false;
}

std::set<std::string> TypeSet(const Json& s) {
  if (!s.contains("type")) return kAllTypes;
  const Json& t = s["type"];
  std::set<std::string> out;
  auto add = [&](const Json& x) {
    if (!x.is_string()) throw SchemaError("'type' must be a string or an array of strings");
    const std::string n = x.get<std::string>();
    if (!kAllTypes.count(n) && n != "integer") throw SchemaError("unsupported type '" + n + "'");
    out.insert(n);
  };
  if (t.is_array()) {
    for (const Json& x : t) add(x);
  } else {
    add(t);
  }
  if (out.count("number")) out.erase("integer");
  return out;
}

bool StringCheckable(const Json& s) {
  static const std::set<std::string> kString = {"type", "enum", "const", "pattern", "minLength", "maxLength"};
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (kValidation.count(k) && !kString.count(k)) return false;
  }
  return true;
}

bool StringSatisfies(const std::string& v, const Json& s) {
  if (!TypeAllowed("string", TypeSet(s))) return false;
  const Json value(v);
  if (auto values = Values(s); values && std::find(values->begin(), values->end(), value) == values->end()) return false;
  return ValueOk(value, s);
}

std::vector<Json> EnumValues(const Json& s, const std::set<std::string>& types) {
  std::vector<Json> out;
  const std::vector<Json> values = Values(s).value_or(std::vector<Json>{});
  for (const Json& v : values) {
    if (TypeAllowed(ValueType(v), types) && ValueOk(v, s)) out.push_back(v);
  }
  return out;
}

namespace {

// What the draft a $schema names (found in its URI) changes: $ref siblings ignored (drafts 4-7),
// draft 4's boolean exclusive bounds, how tuples are written, and the keywords the draft does
// not have (unknown there, so they constrain nothing). No $schema: 2020-12, tuples either way.
struct DraftRow {
  const char* marker;
  bool old_draft, draft4;
  TupleForm tuples;
  std::vector<std::string> foreign;
};
const std::vector<DraftRow>& Drafts() {
  static const std::vector<std::string> kLater = {"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"};
  auto with_later = [](std::vector<std::string> v) {
    v.insert(v.end(), kLater.begin(), kLater.end());
    return v;
  };
  static const std::vector<DraftRow> kDrafts = {
      {"draft-03", true, true, TupleForm::kItemsArray, with_later({"const", "contains", "propertyNames", "if", "then", "else"})},
      {"draft-04", true, true, TupleForm::kItemsArray, with_later({"const", "contains", "propertyNames", "if", "then", "else"})},
      {"draft-06", true, false, TupleForm::kItemsArray, with_later({"if", "then", "else"})},
      {"draft-07", true, false, TupleForm::kItemsArray, kLater},
      {"2019-09", false, false, TupleForm::kItemsArray, {"dependencies"}},
      {"2020-12", false, false, TupleForm::kPrefixItems, {"dependencies"}},
  };
  return kDrafts;
}

}  // namespace

Merger::Merger(const Json& root) : root_(root) {
  if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) return;
  const std::string d = root["$schema"].get<std::string>();
  for (const DraftRow& row : Drafts()) {
    if (d.find(row.marker) == std::string::npos) continue;
    old_draft_ = row.old_draft;
    draft4_ = row.draft4;
    tuple_form_ = row.tuples;
    foreign_ = row.foreign;
    return;
  }
}

const Json* Merger::Resolve(const std::string& ref) const {
  std::string ptr;
  if (!ref.empty() && ref[0] == '#') {
    ptr = ref.substr(1);
  } else {
    std::string id;
    for (const char* k : {"$id", "id"}) {
      if (root_.is_object() && root_.contains(k) && root_[k].is_string()) id = root_[k].get<std::string>();
    }
    if (!id.empty() && id.back() == '#') id.pop_back();
    if (id.empty() || ref.compare(0, id.size(), id) != 0 || (ref.size() > id.size() && ref[id.size()] != '#')) return nullptr;
    ptr = ref.size() > id.size() ? ref.substr(id.size() + 1) : "";
  }
  std::string decoded;  // percent-decoding (URI fragment)
  for (size_t i = 0; i < ptr.size(); ++i) {
    if (ptr[i] == '%' && i + 2 < ptr.size() + 0 && std::isxdigit(static_cast<unsigned char>(ptr[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(ptr[i + 2]))) {
      decoded += static_cast<char>(std::stoi(ptr.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += ptr[i];
    }
  }
  if (!decoded.empty() && decoded[0] != '/') return nullptr;  // "#anchor" names
  const Json* cur = &root_;
  size_t i = decoded.empty() ? std::string::npos : 1;
  while (i != std::string::npos && i <= decoded.size()) {
    const size_t j = decoded.find('/', i);
    std::string tok = decoded.substr(i, j == std::string::npos ? std::string::npos : j - i);
    for (size_t k; (k = tok.find("~1")) != std::string::npos;) tok.replace(k, 2, "/");
    for (size_t k; (k = tok.find("~0")) != std::string::npos;) tok.replace(k, 2, "~");
    if (cur->is_object() && cur->contains(tok)) {
      cur = &(*cur)[tok];
    } else if (cur->is_array() && !tok.empty() && std::all_of(tok.begin(), tok.end(), ::isdigit) &&
               std::stoul(tok) < cur->size()) {
      cur = &(*cur)[std::stoul(tok)];
    } else {
      return nullptr;
    }
    i = j == std::string::npos ? std::string::npos : j + 1;
  }
  return cur;
}

Json Merger::WithoutRef(const Json& s) const {
  Json out = s;
  out.erase("$ref");
  return out;
}

bool Merger::HasForeign(const Json& s) const {
  return s.is_object() && std::any_of(foreign_.begin(), foreign_.end(), [&](const std::string& k) { return s.contains(k); });
}

Json Merger::Native(const Json& s) const {
  if (!HasForeign(s)) return s;
  Json out = s;
  for (const std::string& k : foreign_) out.erase(k);
  return out;
}

Json Merger::Deref(const Json& s0, int depth) {
  const Json s = Native(s0);
  if (!s.is_object() || !s.contains("$ref")) return s;
  if (depth > 50) throw SchemaError("reference cycle in a merge");
  if (!s["$ref"].is_string()) throw SchemaError("'$ref' must be a string");
  const Json* t = Resolve(s["$ref"].get<std::string>());
  if (!t) throw SchemaError("'$ref' " + s["$ref"].dump() + " is not a local reference found in the document");
  if (HasConstraints(s, true) && !old_draft_) return Json{{"allOf", Json::array({WithoutRef(s), *t})}};
  return Deref(*t, depth + 1);
}

Json Merger::MergeAllOf(const Json& s) {
  if (!s["allOf"].is_array()) throw SchemaError("'allOf' must be an array");
  Json out = s;
  out.erase("allOf");
  for (const Json& sub : s["allOf"]) out = Merge(out, sub);
  return out;
}

Json Merger::Merge(const Json& a0, const Json& b0) {
  if (++merges_ > kMaxMerges)
    throw SchemaError("'allOf' needs more than " + std::to_string(kMaxMerges) + " merges (unions multiply out): too costly");
  if (++depth_ > 64) {
    depth_ = 0;
    throw SchemaError("merge nesting too deep");
  }
  struct Leave {
    int& d;
    ~Leave() { if (d > 0) --d; }
  } leave{depth_};
  Json a = Deref(a0, 0), b = Deref(b0, 0);
  if (IsFalse(a) || IsFalse(b)) return Json(false);
  if (IsTrivial(a) && !a.is_object()) return b;
  if (IsTrivial(b) && !b.is_object()) return a;
  if (!a.is_object() || !b.is_object()) throw SchemaError("a schema must be an object or a boolean");
  if (a.contains("allOf")) a = MergeAllOf(a);
  if (b.contains("allOf")) b = MergeAllOf(b);
  if (a.is_boolean() || b.is_boolean()) return Merge(a, b);
  for (int side = 0; side < 2; ++side) {  // distribute a union over the other side
    Json& u = side == 0 ? a : b;
    const Json& other = side == 0 ? b : a;
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!u.contains(key)) continue;
      if (!u[key].is_array()) throw SchemaError(std::string("'") + key + "' must be an array");
      Json rest = u;
      rest.erase(key);
      Json alts = Json::array();
      for (const Json& sub : u[key]) {
        Json alt = HasConstraints(rest, false) ? Merge(rest, sub) : sub;
        alts.push_back(Merge(alt, other));
      }
      return Json{{key, alts}};
    }
  }
  return MergeFlat(a, b);
}

void Merger::MergeObjects(const Json& a, const Json& b, Json* out) {
  for (const auto& [x, y] : {std::pair<const Json*, const Json*>{&a, &b}, {&b, &a}}) {
    if (x->contains("patternProperties") &&
        (y->contains("properties") || y->contains("additionalProperties") || y->contains("patternProperties"))) {
      throw SchemaError("cannot merge 'patternProperties' with the other side's members");
    }
  }
  auto conj = [](const Json& x, const Json& y) -> Json {
    if (IsFalse(x) || IsFalse(y)) return Json(false);
    if (IsTrivial(x)) return y;
    if (IsTrivial(y) || x == y) return x;
    return Json{{"allOf", Json::array({x, y})}};
  };
  const Json empty = Json::object();
  const Json& pa = a.contains("properties") ? a["properties"] : empty;
  const Json& pb = b.contains("properties") ? b["properties"] : empty;
  const Json* xa = a.contains("additionalProperties") ? &a["additionalProperties"] : nullptr;
  const Json* xb = b.contains("additionalProperties") ? &b["additionalProperties"] : nullptr;
  Json props = Json::object();
  for (const auto& [n, sa] : pa.items()) props[n] = conj(sa, pb.contains(n) ? pb[n] : xb ? *xb : Json(true));
  for (const auto& [n, sb] : pb.items()) {
    if (!pa.contains(n)) props[n] = conj(xa ? *xa : Json(true), sb);
  }
  if (!props.empty()) (*out)["properties"] = props;
  if (xa && xb) {
    (*out)["additionalProperties"] = conj(*xa, *xb);
  } else if (xb) {
    (*out)["additionalProperties"] = *xb;
  }
  Json req = a.contains("required") ? a["required"] : Json::array();
  if (b.contains("required")) {
    for (const Json& r : b["required"]) {
      if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
    }
  }
  if (!req.empty()) (*out)["required"] = req;
}

// Both sides' array element schemas, position by position.
static void MergeArrayItems(const Json& a, const Json& b, TupleForm form, Json* out) {
  const ArrayForm fa = ArrayOf(a, form), fb = ArrayOf(b, form);
  auto both = [](const Json& x, const Json& y) {
    if (IsTrivial(x) || x == y) return y;
    if (IsTrivial(y)) return x;
    return Json{{"allOf", Json::array({x, y})}};
  };
  Json prefix = Json::array();
  for (size_t i = 0; i < std::max(fa.prefix.size(), fb.prefix.size()); ++i) {
    prefix.push_back(both(i < fa.prefix.size() ? fa.prefix[i] : fa.rest, i < fb.prefix.size() ? fb.prefix[i] : fb.rest));
  }
  const Json rest = both(fa.rest, fb.rest);
  for (const char* k : {"items", "prefixItems", "additionalItems"}) out->erase(k);
  if (prefix.empty()) {
    (*out)["items"] = rest;
  } else if (fa.modern || fb.modern) {
    (*out)["prefixItems"] = prefix;
    (*out)["items"] = rest;
  } else {
    (*out)["items"] = prefix;
    (*out)["additionalItems"] = rest;
  }
}

Json Merger::MergeFlat(const Json& a0, const Json& b0) {
  const Json a = NumericExclusive(a0), b = NumericExclusive(b0);
  Json out = a;
  MergeObjects(a, b, &out);
  const bool items_both = HasArrayItems(a) && HasArrayItems(b);
  if (items_both) MergeArrayItems(a, b, tuple_form_, &out);
  auto va = Values(a), vb = Values(b);
  if (va || vb) {
    std::vector<Json> both = va ? *va : *vb;
    if (va && vb) {
      std::vector<Json> keep;
      for (const Json& v : *va) {
        if (std::find(vb->begin(), vb->end(), v) != vb->end()) keep.push_back(v);
      }
      both = keep;
    }
    if (both.empty()) return Json(false);
    out.erase("const");
    out["enum"] = both;
  }
  static const std::set<std::string> kMax = {"minimum", "minLength", "minItems", "minProperties"};
  static const std::set<std::string> kMin = {"maximum", "maxLength", "maxItems", "maxProperties"};
  for (const auto& [k, v] : b.items()) {
    if (k == "properties" || k == "additionalProperties" || k == "required" || k == "enum" || k == "const") continue;
    if (items_both && (k == "items" || k == "prefixItems" || k == "additionalItems")) continue;
    if (!out.contains(k)) {
      out[k] = v;
      continue;
    }
    const Json cur = out[k];
    if (cur == v || !kValidation.count(k)) continue;  // equal, or an annotation (a's wins)
    if (k == "type") {
      std::set<std::string> ta = TypeSet(a), tb = TypeSet(b), both;
      for (const std::string& t : ta) {
        if (tb.count(t)) both.insert(t);
        if (t == "number" && tb.count("integer")) both.insert("integer");
        if (t == "integer" && tb.count("number")) both.insert("integer");
      }
      if (both.empty()) return Json(false);
      out["type"] = Json(std::vector<std::string>(both.begin(), both.end()));
    } else if ((kMax.count(k) || kMin.count(k) || k == "exclusiveMinimum" || k == "exclusiveMaximum") &&
               cur.is_number() && v.is_number()) {
      const bool take_max = kMax.count(k) || k == "exclusiveMinimum";
      out[k] = (take_max ? cur.get<double>() < v.get<double>() : cur.get<double>() > v.get<double>()) ? v : cur;
    } else if (k == "items" && (cur.is_object() || cur.is_boolean()) && (v.is_object() || v.is_boolean())) {
      out[k] = Json{{"allOf", Json::array({cur, v})}};
    } else {
      throw SchemaError("cannot merge two different '" + k + "'");
    }
  }
  return out;
}

bool Merger::Disjoint(const Json& a0, const Json& b0) {
  Json a = Deref(a0, 0), b = Deref(b0, 0);
  if (IsFalse(a) || IsFalse(b)) return true;
  if (!a.is_object() || !b.is_object()) return false;
  if (a.contains("allOf")) a = MergeAllOf(a);
  if (b.contains("allOf")) b = MergeAllOf(b);
  if (!a.is_object() || !b.is_object()) return Disjoint(a, b);
  for (const Json* s : {&a, &b}) {
    if (s->contains("anyOf") || s->contains("oneOf")) return false;
  }
  auto literals = [](const Json& s) { return Values(s); };
  auto types = [&](const Json& s) {
    std::set<std::string> t = TypeSet(s);
    if (auto v = literals(s)) {
      std::set<std::string> from_values;
      for (const Json& x : *v) from_values.insert(ValueType(x));
      t = from_values;
    }
    return t;
  };
  const std::set<std::string> ta = types(a), tb = types(b);
  bool overlap = false;
  for (const std::string& t : ta) {
    overlap |= tb.count(t) || (t == "integer" && tb.count("number")) || (t == "number" && tb.count("integer"));
  }
  if (!overlap) return true;
  auto va = literals(a), vb = literals(b);
  if (va && vb) {
    return std::none_of(va->begin(), va->end(), [&](const Json& x) { return std::find(vb->begin(), vb->end(), x) != vb->end(); });
  }
  // Objects told apart by a required property with disjoint constant values.
  if (ta == std::set<std::string>{"object"} && tb == std::set<std::string>{"object"} && a.contains("required") &&
      b.contains("required") && a.contains("properties") && b.contains("properties")) {
    for (const Json& r : a["required"]) {
      if (!r.is_string() || std::find(b["required"].begin(), b["required"].end(), r) == b["required"].end()) continue;
      const std::string n = r.get<std::string>();
      if (!a["properties"].contains(n) || !b["properties"].contains(n)) continue;
      const Json pa = Deref(a["properties"][n], 0), pb = Deref(b["properties"][n], 0);
      if (!pa.is_object() || !pb.is_object()) continue;
      auto ca = literals(pa), cb = literals(pb);
      if (ca && cb && std::none_of(ca->begin(), ca->end(), [&](const Json& x) { return std::find(cb->begin(), cb->end(), x) != cb->end(); })) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace radixlm::grammar::schema_internal
