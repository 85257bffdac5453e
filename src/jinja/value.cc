#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "core/escape.h"
#include "jinja/unicode.h"

namespace radixlm::jinja {

namespace {

void Throw(const std::string& kind, const std::string& message) { throw JinjaError{kind, message}; }

// JSON string escaping as json.dumps(ensure_ascii=False): ", \\, \n, \r, \t, \b, \f and other
// controls as \u00XX; everything else raw.
void JsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

// --- Dict -----------------------------------------------------------------------------------

size_t Dict::size() const { return items_.size(); }

const Value* Dict::Find(const Value& key) const { return const_cast<Dict*>(this)->Find(key); }

Value* Dict::Find(const Value& key) {
  if (!index_.empty() && key.IsString()) {
    auto it = index_.find(key.AsString());
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  for (auto& [k, v] : items_)
    if (k.Equals(key)) return &v;
  return nullptr;
}

void Dict::Set(const Value& key, Value v) {
  if (Value* slot = Find(key)) {
    *slot = std::move(v);
    return;
  }
  items_.emplace_back(key, std::move(v));
  if (!index_.empty()) {
    if (key.IsString()) index_.emplace(key.AsString(), items_.size() - 1);
  } else if (items_.size() >= kIndexFrom) {
    for (size_t i = 0; i < items_.size(); ++i)
      if (items_[i].first.IsString()) index_.emplace(items_[i].first.AsString(), i);
  }
}

// --- budgets ---------------------------------------------------------------------------------

namespace {
thread_local Budget* g_budget = nullptr;
}  // namespace

RenderScope::RenderScope(Budget* b) : saved_(g_budget) { g_budget = b; }
RenderScope::~RenderScope() { g_budget = saved_; }

void ChargeString(uint64_t n, uint64_t total) {
  Budget* b = g_budget;
  if (!b) return;
  total = std::max(total, n);
  if (total > static_cast<uint64_t>(b->max_string))
    Throw("TemplateError", "a string of " + std::to_string(total) + " bytes exceeds the render's limit of " +
                               std::to_string(b->max_string));
  b->bytes_left -= static_cast<int64_t>(std::min<uint64_t>(n, INT64_MAX / 2));
  if (b->bytes_left < 0) Throw("TemplateError", "the render made more text than its limit allows");
}

void ChargeOps(int64_t n) {
  Budget* b = g_budget;
  if (b && (b->ops_left -= n) < 0) Throw("TemplateError", "the render ran more operations than its limit allows");
}

namespace {
Budget& Unbounded() {
  thread_local Budget unbounded{.max_depth = 1000};  // walks outside a render: FromJson, repr
  return unbounded;
}
}  // namespace

DepthGuard::DepthGuard(const char* what) {
  Budget* b = g_budget;
  Budget& use = b ? *b : Unbounded();
  if (++use.depth > use.max_depth) {
    --use.depth;
    Throw("TemplateError", std::string(what) + " nested more than " + std::to_string(use.max_depth) + " deep");
  }
}

DepthGuard::~DepthGuard() {
  Budget* b = g_budget;
  --(b ? *b : Unbounded()).depth;
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

// --- Value construction ----------------------------------------------------------------------

Value Value::List(ValueList items) {
  Value v(Type::kList);
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.type_ = Type::kTuple;
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v(Type::kDict);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::Namespace(Dict d) {
  Value v = MakeDict(std::move(d));
  v.type_ = Type::kNamespace;
  return v;
}

Value Value::MakeFunction(std::string name, Function f) {
  Value v(Type::kFunction);
  v.str_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

void Value::ReleaseNested() {
  // Containers whose last reference is going: their children are moved here and released in
  // turn, so a list nested a million deep is freed in a loop, not a million stack frames.
  thread_local std::vector<std::shared_ptr<ValueList>> lists;
  thread_local std::vector<std::shared_ptr<Dict>> dicts;
  thread_local bool draining = false;
  if (list_ && list_.use_count() == 1) lists.push_back(std::move(list_));
  if (dict_ && dict_.use_count() == 1) dicts.push_back(std::move(dict_));
  if (draining) return;  // an outer ReleaseNested is looping
  draining = true;
  while (!lists.empty() || !dicts.empty()) {
    if (!lists.empty()) {
      std::shared_ptr<ValueList> l = std::move(lists.back());
      lists.pop_back();
      l->clear();  // the children's destructors push their own containers
    } else {
      std::shared_ptr<Dict> d = std::move(dicts.back());
      dicts.pop_back();
      d->mutable_items().clear();
    }
  }
  draining = false;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  DepthGuard depth("the variables' values");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.Set(String(it.key()), FromJson(it.value()));
      return MakeDict(std::move(d));
    }
    default: return None();
  }
}

// --- Python semantics ------------------------------------------------------------------------

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool:
    case Type::kInt: return int_ != 0;
    case Type::kFloat: return float_ != 0;
    case Type::kString: return !str_.empty();
    case Type::kList:
    case Type::kTuple: return !list_->empty();
    case Type::kDict: return dict_->size() != 0;
    default: return true;
  }
}

bool Value::Equals(const Value& o) const {
  DepthGuard depth("compared values");
  if (IsNumber() && o.IsNumber()) {
    if (type_ == Type::kFloat || o.type_ == Type::kFloat) return AsFloat() == o.AsFloat();
    return int_ == o.int_;
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return true;
    case Type::kString: return str_ == o.str_;
    case Type::kList:
    case Type::kTuple: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      return true;
    }
    case Type::kDict: {
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : dict_->items()) {
        const Value* w = o.dict_->Find(k);
        if (!w || !v.Equals(*w)) return false;
      }
      return true;
    }
    default: return dict_ == o.dict_ && fn_ == o.fn_;
  }
}

bool Value::Less(const Value& o) const {
  DepthGuard depth("compared values");
  if (IsNumber() && o.IsNumber()) {
    if (type_ == Type::kFloat || o.type_ == Type::kFloat) return AsFloat() < o.AsFloat();
    return int_ < o.int_;
  }
  if (IsString() && o.IsString()) return str_ < o.str_;  // UTF-8 byte order = code point order
  if (IsSequence() && o.IsSequence() && type_ == o.type_) {  // a list and a tuple do not compare
    const ValueList &a = *list_, &b = *o.list_;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)  // Python: the first unequal items decide
      if (!a[i].Equals(b[i])) return a[i].Less(b[i]);
    return a.size() < b.size();
  }
  Throw("TypeError", "'<' not supported between instances of '" + TypeName() + "' and '" + o.TypeName() + "'");
  return false;
}

std::string Value::TypeName() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return "list";
    case Type::kTuple: return "tuple";
    case Type::kDict: return "dict";
    case Type::kNamespace: return "Namespace";
    case Type::kFunction: return "function";
  }
  return "object";
}

std::string Value::Str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kString: return str_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  DepthGuard depth("printed values");
  ChargeOps();
  switch (type_) {
    case Type::kUndefined: return "Undefined";  // jinja2's Undefined.__repr__ (printed alone, Str() is "")
    case Type::kNone: return "None";
    case Type::kBool: return int_ ? "True" : "False";
    case Type::kInt: return std::to_string(int_);
    case Type::kFloat: return FloatRepr(float_);
    case Type::kString: return StringRepr(str_);
    case Type::kList:
    case Type::kTuple: {
      const bool tuple = type_ == Type::kTuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        const std::string piece = (*list_)[i].Repr();
        ChargeString(piece.size() + 2, out.size() + piece.size() + 2);
        if (i) out += ", ";
        out += piece;
      }
      if (tuple && list_->size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Type::kDict:
    case Type::kNamespace: {
      std::string out = type_ == Type::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (!first) out += ", ";
        first = false;
        const std::string piece = k.Repr() + ": " + v.Repr();
        ChargeString(piece.size(), out.size() + piece.size());
        out += piece;
      }
      out += type_ == Type::kNamespace ? "}>" : "}";
      return out;
    }
    case Type::kFunction: return "<function " + str_ + ">";
  }
  return "";
}

std::string Value::ToJson(int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys) const {
  std::string out;
  JsonInto(&out, indent, 0, item_sep, key_sep, sort_keys);
  return out;
}

namespace {

// json.dumps' item separator: with an indent, Python's json puts each item on its own line and
// drops the trailing space of the item separator (", " becomes ",").
std::string ItemSeparator(int indent, std::string_view item_sep) {
  return indent >= 0 && !item_sep.empty() && item_sep.back() == ' ' ? std::string(item_sep.substr(0, item_sep.size() - 1))
                                                                    : std::string(item_sep);
}

// A line break and the indent of `depth` levels (nothing without an indent).
void JsonNewline(std::string* out, int indent, int depth) {
  if (indent < 0) return;
  ChargeString(static_cast<uint64_t>(indent) * static_cast<uint64_t>(depth) + 1);
  out->push_back('\n');
  out->append(static_cast<size_t>(indent) * depth, ' ');
}

// None, a bool, a number or a string as json.dumps writes it; false for any other type.
bool JsonScalarInto(const Value& v, std::string* out) {
  switch (v.type()) {
    case Value::Type::kNone: *out += "null"; return true;
    case Value::Type::kBool: *out += v.AsBool() ? "true" : "false"; return true;
    case Value::Type::kInt: *out += std::to_string(v.AsInt()); return true;
    case Value::Type::kFloat:
      if (std::isnan(v.AsFloat())) *out += "NaN";
      else if (std::isinf(v.AsFloat())) *out += v.AsFloat() > 0 ? "Infinity" : "-Infinity";
      else *out += FloatRepr(v.AsFloat());
      return true;
    case Value::Type::kString:
      ChargeString(v.AsString().size() + 2, out->size() + v.AsString().size() + 2);
      JsonString(v.AsString(), out);
      return true;
    default: return false;
  }
}

// A dict key as json.dumps writes it: a string, or None, a bool or a number as a string.
void JsonKey(const Value& k, std::string* out) {
  if (k.IsString()) JsonString(k.AsString(), out);
  else if (k.IsNone()) *out += "\"null\"";
  else if (k.IsNumber() || k.type() == Value::Type::kBool) JsonString(k.type() == Value::Type::kBool ? (k.AsBool() ? "true" : "false") : k.Repr(), out);
  else Throw("TypeError", "keys must be str, int, float, bool or None, not " + k.TypeName());
}

// A dict's items in the order json.dumps writes them: insertion order, or by key (stable).
std::vector<const std::pair<Value, Value>*> JsonItems(const Dict& dict, bool sort_keys) {
  std::vector<const std::pair<Value, Value>*> items;
  for (const auto& kv : dict.items()) items.push_back(&kv);
  if (sort_keys)
    std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first.Less(b->first); });
  return items;
}

}  // namespace

void Value::JsonInto(std::string* out, int indent, int depth, std::string_view item_sep, std::string_view key_sep,
                     bool sort_keys) const {
  DepthGuard guard("tojson's values");
  ChargeOps();
  const std::string sep = ItemSeparator(indent, item_sep);
  if (JsonScalarInto(*this, out)) return;
  switch (type_) {
    case Type::kList:
    case Type::kTuple: {
      if (list_->empty()) {
        *out += "[]";
        return;
      }
      out->push_back('[');
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) *out += sep;
        JsonNewline(out, indent, depth + 1);
        (*list_)[i].JsonInto(out, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      JsonNewline(out, indent, depth);
      out->push_back(']');
      return;
    }
    case Type::kDict: {
      if (dict_->size() == 0) {
        *out += "{}";
        return;
      }
      const std::vector<const std::pair<Value, Value>*> items = JsonItems(*dict_, sort_keys);
      out->push_back('{');
      bool first = true;
      for (const auto* kv : items) {
        if (!first) *out += sep;
        first = false;
        JsonNewline(out, indent, depth + 1);
        JsonKey(kv->first, out);
        *out += key_sep;
        kv->second.JsonInto(out, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      JsonNewline(out, indent, depth);
      out->push_back('}');
      return;
    }
    default: Throw("TypeError", "Object of type " + TypeName() + " is not JSON serializable");
  }
}

// --- text helpers ----------------------------------------------------------------------------

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits in scientific form: [-]D[.DDD]e[+-]XX.
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool neg = sci[0] == '-';
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_digits = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

// Python's repr of a str: quotes as Python picks them, escapes for what isprintable() refuses.
std::string StringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos, has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = unicode::Next(s, &i);
    char buf[16];
    if (cp == static_cast<unsigned char>(q) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (const char* e = core::ShortEscape(cp)) {
      out += e;
    } else if (cp == 0xFFFFFFFF) {  // not UTF-8 (Python's str cannot hold it): as is
      out += s.substr(at, i - at);
    } else if (!unicode::Printable(cp)) {
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += buf;
    } else {
      out += s.substr(at, i - at);
    }
  }
  out.push_back(q);
  return out;
}

std::vector<std::string_view> CodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsPythonSpace(std::string_view cp) {
  if (cp.size() == 1) {
    const char c = cp[0];
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
  }
  // U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
  static const char* const kSpaces[] = {"\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
                                        "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* s : kSpaces)
    if (cp == s) return true;
  return cp.size() == 3 && cp[0] == '\xe2' && cp[1] == '\x80' && static_cast<unsigned char>(cp[2]) >= 0x80 &&
         static_cast<unsigned char>(cp[2]) <= 0x8a;
}

}  // namespace radixlm::jinja
