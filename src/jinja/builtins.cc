#include "jinja/builtins.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "jinja/unicode.h"

namespace radixlm::jinja {

namespace {

[[noreturn]] void Raise(const std::string& kind, const std::string& message) { throw JinjaError{kind, message}; }

const Value& Arg(const CallArgs& a, size_t i, std::string_view name, const Value& fallback) {
  if (i < a.positional.size()) return a.positional[i];
  if (const Value* v = a.Keyword(name)) return *v;
  return fallback;
}
// A fallback built in the call dies at the end of the statement: this overload returns a value, so
// `const Value& x = Arg(..., Value::Int(0))` extends its life instead of dangling.
Value Arg(const CallArgs& a, size_t i, std::string_view name, Value&& fallback) {
  if (i < a.positional.size()) return a.positional[i];
  if (const Value* v = a.Keyword(name)) return *v;
  return std::move(fallback);
}

const Value kUndef;
const Value kNone = Value::None();
const Value kEmptyString = Value::String("");
const Value kIntZero = Value::Int(0);
const Value kIntFour = Value::Int(4);
const Value kFloatZero = Value::Float(0.0);

void NoUndefined(const Value& v) {
  if (v.IsUndefined()) Raise("UndefinedError", v.AsString().empty() ? "value is undefined" : v.AsString());
}

// --- strings --------------------------------------------------------------------------------

std::string StripChars(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::string_view> cps = CodePoints(s);
  std::vector<std::string_view> set;
  const bool whitespace = chars.IsNone() || chars.IsUndefined();
  if (!whitespace) set = CodePoints(chars.AsString());
  auto strip = [&](std::string_view cp) {
    if (whitespace) return IsPythonSpace(cp);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b])) ++b;
  if (right)
    while (e > b && strip(cps[e - 1])) --e;
  if (b == e) return "";
  const char* begin = cps[b].data();
  const char* end = cps[e - 1].data() + cps[e - 1].size();
  return std::string(begin, end);
}

Value Split(const std::string& s, const Value& sep, const Value& maxsplit_v, bool from_right) {
  int64_t maxsplit = maxsplit_v.IsNumber() ? maxsplit_v.AsInt() : -1;
  ValueList parts;
  if (sep.IsNone() || sep.IsUndefined()) {  // runs of whitespace, no empty strings
    std::vector<std::string_view> cps = CodePoints(s);
    std::vector<std::pair<size_t, size_t>> words;  // code point ranges
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !IsPythonSpace(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    auto text = [&](size_t a, size_t b) {
      return std::string(cps[a].data(), cps[b - 1].data() + cps[b - 1].size());
    };
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
      for (auto [a, b] : words) parts.push_back(Value::String(text(a, b)));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k) parts.push_back(Value::String(text(words[k].first, words[k].second)));
      parts.push_back(Value::String(text(words[maxsplit].first, cps.size())));  // Python keeps the rest's trailing space
    } else {
      const size_t keep = words.size() - maxsplit;
      parts.push_back(Value::String(text(0, words[keep - 1].second)));
      for (size_t k = keep; k < words.size(); ++k) parts.push_back(Value::String(text(words[k].first, words[k].second)));
    }
    return Value::List(std::move(parts));
  }
  const std::string& d = sep.AsString();
  if (d.empty()) Raise("ValueError", "empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    for (size_t at; (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) && (at = s.find(d, start)) != std::string::npos;
         start = at + d.size())
      pieces.push_back(s.substr(start, at - start));
    pieces.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    rev.push_back(s.substr(0, end));
    pieces.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : pieces) parts.push_back(Value::String(std::move(p)));
  return Value::List(std::move(parts));
}

// A float that a Python int() would hold, as int64 (refused past int64: Python's int is unbounded).
int64_t IntOfFloat(double d) {
  if (!(d > -9.2233720368547758e18 && d < 9.2233720368547758e18))
    Raise(std::isnan(d) ? "ValueError" : "TemplateError",
          std::isnan(d) ? "cannot convert float NaN to integer" : "integer beyond 64 bits: templates compute with int64");
  return static_cast<int64_t>(d);
}

[[noreturn]] void Overflow() { Raise("TemplateError", "integer beyond 64 bits: templates compute with int64"); }

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  // The result's size first: a replacement can multiply the text (checked before it is made).
  uint64_t hits = 0;
  if (from.empty()) {
    hits = CodePointCount(s) + 1;
  } else {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) ++hits;
  }
  if (count >= 0) hits = std::min<uint64_t>(hits, static_cast<uint64_t>(count));
  ChargeString(s.size() + hits * to.size());
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    std::vector<std::string_view> cps = CodePoints(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t at; (count < 0 || n < count) && (at = s.find(from, start)) != std::string::npos; start = at + from.size(), ++n) {
    out += s.substr(start, at - start);
    out += to;
  }
  return out + s.substr(start);
}

bool PrefixTest(const std::string& s, const Value& prefix, bool start) {
  auto one = [&](const Value& p) {
    if (!p.IsString()) Raise("TypeError", std::string(start ? "startswith" : "endswith") + " first arg must be str or a tuple of str");
    const std::string& x = p.AsString();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (prefix.type() == Value::Type::kTuple) {
    for (const Value& p : prefix.AsList())
      if (one(p)) return true;
    return false;
  }
  return one(prefix);
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// CPython's float % and // (float_rem, float_floor_div): fmod, then the divisor's sign.
double PyMod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double PyFloorDiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && (y < 0) != (mod < 0)) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// json.dumps' ensure_ascii: every non-ASCII character of a JSON text as \uXXXX (a surrogate
// pair above U+FFFF); only strings hold such characters, so the text is escaped in place.
std::string AsciiJson(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size();) {
    if (static_cast<unsigned char>(json[i]) < 0x80) {
      out.push_back(json[i++]);
      continue;
    }
    const uint32_t cp = unicode::Next(json, &i);
    char buf[16];
    if (cp == 0xFFFFFFFF || cp < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp == 0xFFFFFFFF ? 0xFFFDu : cp);
    } else {
      const uint32_t c = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
    }
    out += buf;
  }
  return out;
}

// str.splitlines(keepends): \r\n is one break; unicode::IsLineBreak lists the others.
ValueList SplitLines(const std::string& s, bool keepends) {
  ValueList lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = unicode::Next(s, &i);
    if (!unicode::IsLineBreak(cp)) continue;
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.push_back(Value::String(s.substr(start, (keepends ? i : at) - start)));
    start = i;
  }
  if (start < s.size()) lines.push_back(Value::String(s.substr(start)));
  return lines;
}


}  // namespace

// --- attribute paths (selectattr, map, sort) --------------------------------------------------

Value GetPath(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.IsMapping()) {
      const Value* f = cur.AsDict().Find(Value::String(part));
      if (!f && !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])))
        f = cur.AsDict().Find(Value::Int(std::atoll(part.c_str())));
      cur = f ? *f : Value::Undefined("'dict object' has no attribute '" + part + "'");
    } else if (cur.IsSequence() && !part.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
      cur = Subscript(cur, Value::Int(std::atoll(part.c_str())));
    } else {
      cur = Value::Undefined();
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

namespace {

// --- tests ----------------------------------------------------------------------------------

bool TestDefined(const Value& v, const CallArgs&) { return !v.IsUndefined(); }
bool TestUndefined(const Value& v, const CallArgs&) { return v.IsUndefined(); }
bool TestNone(const Value& v, const CallArgs&) { return v.IsNone(); }
bool TestBoolean(const Value& v, const CallArgs&) { return v.type() == Value::Type::kBool; }
bool TestTrue(const Value& v, const CallArgs&) { return v.type() == Value::Type::kBool && v.AsBool(); }
bool TestFalse(const Value& v, const CallArgs&) { return v.type() == Value::Type::kBool && !v.AsBool(); }
bool TestInteger(const Value& v, const CallArgs&) { return v.type() == Value::Type::kInt; }
bool TestFloat(const Value& v, const CallArgs&) { return v.type() == Value::Type::kFloat; }
bool TestNumber(const Value& v, const CallArgs&) { return v.IsNumber(); }
bool TestString(const Value& v, const CallArgs&) { return v.IsString(); }
bool TestMapping(const Value& v, const CallArgs&) { return v.IsMapping(); }
bool TestIterable(const Value& v, const CallArgs&) {
  return v.IsUndefined() || v.IsString() || v.IsSequence() || v.IsMapping();
}
bool TestSequence(const Value& v, const CallArgs&) { return TestIterable(v, {}); }
// Python's callable(): jinja2's Undefined has __call__ (which raises), so it counts.
bool TestCallable(const Value& v, const CallArgs&) { return v.type() == Value::Type::kFunction || v.IsUndefined(); }
// The comparison tests take one argument (jinja2's test functions raise TypeError without it).
void OneOperand(const CallArgs& a, const char* name) {
  if (a.positional.empty() && a.keyword.empty())
    Raise("TypeError", std::string(name) + " expected 2 arguments, got 1");
}
bool TestEq(const Value& v, const CallArgs& a) { OneOperand(a, "eq"); return v.Equals(Arg(a, 0, "other", kUndef)); }
bool TestNe(const Value& v, const CallArgs& a) { OneOperand(a, "ne"); return !v.Equals(Arg(a, 0, "other", kUndef)); }
bool TestLt(const Value& v, const CallArgs& a) { OneOperand(a, "lt"); return v.Less(Arg(a, 0, "other", kUndef)); }
bool TestGt(const Value& v, const CallArgs& a) { return Arg(a, 0, "other", kUndef).Less(v); }
bool TestLe(const Value& v, const CallArgs& a) { return !Arg(a, 0, "other", kUndef).Less(v); }
bool TestGe(const Value& v, const CallArgs& a) { return !v.Less(Arg(a, 0, "other", kUndef)); }
bool TestIn(const Value& v, const CallArgs& a) { return Contains(Arg(a, 0, "seq", kUndef), v); }
bool TestSameAs(const Value& v, const CallArgs& a) {
  const Value& o = Arg(a, 0, "other", kUndef);
  if (v.type() != o.type()) return false;
  return v.Equals(o);
}
void NumberOperand(const Value& v) {  // jinja2's odd / even compute value % 2
  NoUndefined(v);
  if (!v.IsNumber()) Raise("TypeError", "not all arguments converted during string formatting");
}
bool TestOdd(const Value& v, const CallArgs&) {
  NumberOperand(v);
  return v.type() == Value::Type::kFloat ? PyMod(v.AsFloat(), 2) == 1 : v.AsInt() % 2 != 0;
}
bool TestEven(const Value& v, const CallArgs&) {
  NumberOperand(v);
  return v.type() == Value::Type::kFloat ? PyMod(v.AsFloat(), 2) == 0 : v.AsInt() % 2 == 0;
}
bool TestDivisibleBy(const Value& v, const CallArgs& a) {
  NoUndefined(v);
  if (!v.IsNumber()) Raise("TypeError", "unsupported operand type(s) for %: '" + v.TypeName() + "' and 'int'");
  const Value& num = Arg(a, 0, "num", kUndef);
  if (v.type() == Value::Type::kFloat || num.type() == Value::Type::kFloat) {
    if (num.AsFloat() == 0) Raise("ZeroDivisionError", "float modulo");
    return PyMod(v.AsFloat(), num.AsFloat()) == 0;
  }
  const int64_t d = num.AsInt();
  if (d == 0) Raise("ZeroDivisionError", "integer division or modulo by zero");
  if (d == -1) return true;  // INT64_MIN % -1 traps in C++; every integer is divisible by -1
  return v.AsInt() % d == 0;
}
bool TestLower(const Value& v, const CallArgs&) { return unicode::IsLower(v.Str()); }  // jinja2: str(value).islower()
bool TestUpper(const Value& v, const CallArgs&) { return unicode::IsUpper(v.Str()); }

const std::unordered_map<std::string_view, TestFn>& Tests() {
  static const std::unordered_map<std::string_view, TestFn> t = {
      {"defined", TestDefined}, {"undefined", TestUndefined}, {"none", TestNone}, {"boolean", TestBoolean},
      {"true", TestTrue}, {"false", TestFalse}, {"integer", TestInteger}, {"float", TestFloat},
      {"number", TestNumber}, {"string", TestString}, {"mapping", TestMapping}, {"iterable", TestIterable},
      {"sequence", TestSequence}, {"callable", TestCallable}, {"sameas", TestSameAs},
      {"eq", TestEq}, {"equalto", TestEq}, {"==", TestEq}, {"ne", TestNe}, {"!=", TestNe},
      {"lt", TestLt}, {"lessthan", TestLt}, {"<", TestLt}, {"gt", TestGt}, {"greaterthan", TestGt}, {">", TestGt},
      {"le", TestLe}, {"<=", TestLe}, {"ge", TestGe}, {">=", TestGe}, {"in", TestIn},
      {"odd", TestOdd}, {"even", TestEven}, {"divisibleby", TestDivisibleBy}, {"lower", TestLower}, {"upper", TestUpper},
  };
  return t;
}

// --- filters --------------------------------------------------------------------------------

Value FLength(const Value& v, const CallArgs&) {
  switch (v.type()) {
    case Value::Type::kUndefined: return Value::Int(0);
    case Value::Type::kString: return Value::Int(static_cast<int64_t>(CodePointCount(v.AsString())));
    case Value::Type::kList:
    case Value::Type::kTuple: return Value::Int(static_cast<int64_t>(v.AsList().size()));
    case Value::Type::kDict: return Value::Int(static_cast<int64_t>(v.AsDict().size()));
    default: Raise("TypeError", "object of type '" + v.TypeName() + "' has no len()");
  }
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value FToJson(const Value& v, const CallArgs& a) {
  const bool ascii = Arg(a, 0, "ensure_ascii", kUndef).Truthy();
  const Value& indent = Arg(a, 1, "indent", kNone);
  const Value& seps = Arg(a, 2, "separators", kNone);
  const Value& sort = Arg(a, 3, "sort_keys", kUndef);
  std::string item_sep = ", ", key_sep = ": ";
  if (!indent.IsNone()) item_sep = ",";
  if (seps.IsSequence() && seps.AsList().size() == 2) {
    item_sep = seps.AsList()[0].Str();
    key_sep = seps.AsList()[1].Str();
  }
  const int ind = indent.IsNone() ? -1 : static_cast<int>(indent.AsInt());  // json.dumps: indent=True is 1
  // ToJson drops a trailing space of the item separator with an indent; json.dumps with an
  // indent defaults to "," already, an explicit ", " keeps its space on each line's end.
  std::string out = ind >= 0 && !seps.IsSequence() ? v.ToJson(ind, ",", key_sep, sort.Truthy())
                                                   : v.ToJson(ind, item_sep, key_sep, sort.Truthy());
  return Value::String(ascii ? AsciiJson(out) : out);
}

Value FItems(const Value& v, const CallArgs&) {
  if (v.IsUndefined()) return Value::List();
  if (!v.IsMapping()) Raise("TypeError", "Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.AsDict().items()) out.push_back(Value::Tuple({k, val}));
  return Value::List(std::move(out));
}

Value FString(const Value& v, const CallArgs&) { return Value::String(v.Str()); }
Value FSafe(const Value& v, const CallArgs&) { return v.IsString() ? v : Value::String(v.Str()); }
Value FTrim(const Value& v, const CallArgs& a) { return Value::String(StripChars(v.Str(), Arg(a, 0, "chars", kNone), true, true)); }
Value FUpper(const Value& v, const CallArgs&) { return Value::String(unicode::Upper(v.Str())); }
Value FLower(const Value& v, const CallArgs&) { return Value::String(unicode::Lower(v.Str())); }
Value FCapitalize(const Value& v, const CallArgs&) { return Value::String(unicode::Capitalize(v.Str())); }
// jinja2's title filter (not str.title): pieces split before runs of "-", white space, "(", "{",
// "[", "<"; each piece's first character upper-cased, the rest lower-cased.
Value FTitle(const Value& v, const CallArgs&) {
  const std::string s = v.Str();
  auto sep = [&](size_t at, size_t* next) {  // the code point at `at`, *next after it
    size_t k = at;
    unicode::Next(s, &k);
    *next = k;
    const char c = s[at];
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPythonSpace(std::string_view(s).substr(at, k - at));
  };
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i, next = 0;
    const bool is_sep = sep(i, &next);
    while (j < s.size() && sep(j, &next) == is_sep) j = next;
    std::string_view piece(s.data() + i, j - i);
    size_t k = 0;
    unicode::Next(piece, &k);
    out += unicode::Upper(piece.substr(0, k)) + unicode::Lower(piece.substr(k));
    i = j;
  }
  return Value::String(out);
}
Value FEscape(const Value& v, const CallArgs&) { return Value::String(HtmlEscape(v.Str())); }

Value FDefault(const Value& v, const CallArgs& a) {
  const Value& def = Arg(a, 0, "default_value", kEmptyString);
  const bool boolean = Arg(a, 1, "boolean", kUndef).Truthy();
  if (v.IsUndefined() || (boolean && !v.Truthy())) return def;
  return v;
}

Value FList(const Value& v, const CallArgs&) { return Value::List(Iterate(v)); }

Value FJoin(const Value& v, const CallArgs& a) {
  const std::string sep = Arg(a, 0, "d", Value::String("")).Str();
  const Value& attr = Arg(a, 1, "attribute", kNone);
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(v)) {
    const std::string text = (attr.IsNone() ? item : GetPath(item, attr.Str())).Str();
    ChargeString(sep.size() + text.size(), out.size() + sep.size() + text.size());
    if (!first) out += sep;
    first = false;
    out += text;
  }
  return Value::String(out);
}

Value FFirst(const Value& v, const CallArgs&) {
  ValueList items = Iterate(v);
  return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
}
Value FLast(const Value& v, const CallArgs&) {
  ValueList items = Iterate(v);
  return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
}

// What Python's int() / float() read of a string: white space around it dropped, '_' dropped
// where it stands between digits ("1_000"; elsewhere it stays, and the parse fails as Python's).
std::string PyNumberText(const std::string& text) {
  const std::string t = StripChars(text, kNone, true, true);
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool between = t[i] == '_' && i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
                         std::isdigit(static_cast<unsigned char>(t[i + 1]));
    if (!between) s.push_back(t[i]);
  }
  return s;
}

// float() of PyNumberText's text; nothing when it is no number. No hex (strtod reads "0x1p3").
std::optional<double> PyFloat(const std::string& s) {
  if (s.empty() || s.find_first_of("xX") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value FInt(const Value& v, const CallArgs& a) {
  NoUndefined(v);  // jinja2's Undefined raises in __int__ (not a TypeError the filter catches)
  const Value& def = Arg(a, 0, "default", kIntZero);
  if (v.type() == Value::Type::kFloat) {  // int(inf) is an OverflowError do_int lets through; int(nan) a ValueError it catches
    if (std::isinf(v.AsFloat())) Raise("OverflowError", "cannot convert float infinity to integer");
    return std::isfinite(v.AsFloat()) ? Value::Int(IntOfFloat(v.AsFloat())) : def;
  }
  if (v.IsNumber()) return Value::Int(v.AsInt());
  if (v.IsString()) {
    const std::string s = PyNumberText(v.AsString());
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') {
      if (errno == ERANGE) Overflow();
      return Value::Int(i);
    }
    if (const auto d = PyFloat(s)) return std::isfinite(*d) ? Value::Int(IntOfFloat(*d)) : def;
  }
  return def;
}

Value FFloat(const Value& v, const CallArgs& a) {
  NoUndefined(v);
  const Value& def = Arg(a, 0, "default", kFloatZero);
  if (v.IsNumber()) return Value::Float(v.AsFloat());
  if (v.IsString()) {
    if (const auto d = PyFloat(PyNumberText(v.AsString()))) return Value::Float(*d);
  }
  return def;
}

Value FAbs(const Value& v, const CallArgs&) {
  if (v.type() == Value::Type::kFloat) return Value::Float(std::fabs(v.AsFloat()));
  if (v.IsNumber()) {
    if (v.AsInt() == INT64_MIN) Overflow();
    return Value::Int(std::llabs(v.AsInt()));
  }
  Raise("TypeError", "bad operand type for abs(): '" + v.TypeName() + "'");
}

// Python's round(x, -k) for a float: x's exact decimal value (glibc prints a double exactly)
// rounded half to even at the 10^k digit, read back (CPython's dtoa gives the same).
double RoundToPowerOfTen(double x, int k) {
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.0f", std::trunc(std::fabs(x)));  // the integer part, exact
  std::string digits(buf);
  const bool frac = std::fabs(x) != std::floor(std::fabs(x));
  if (static_cast<int>(digits.size()) < k) return std::copysign(0.0, x);
  const size_t keep = digits.size() - static_cast<size_t>(k);
  const std::string tail = digits.substr(keep);
  std::string head = digits.substr(0, keep);
  const char first = tail.empty() ? '0' : tail[0];
  const bool rest_zero = tail.find_first_not_of('0', 1) == std::string::npos && !frac;
  const bool odd = !head.empty() && (head.back() - '0') % 2 == 1;
  const bool up = first > '5' || (first == '5' && (!rest_zero || odd));
  if (up) {  // add one at the last kept digit
    int i = static_cast<int>(head.size()) - 1;
    while (i >= 0 && head[i] == '9') head[i--] = '0';
    if (i < 0) head.insert(head.begin(), '1');
    else ++head[i];
  }
  const std::string out = (head.empty() ? "0" : head) + std::string(static_cast<size_t>(k), '0');
  return std::copysign(std::strtod(out.c_str(), nullptr), x);
}

// jinja2's round: "common" is Python's round(value, precision), half to even on the exact
// binary value (printf's correctly rounded %.*f does the same); ceil / floor scale by 10^p.
Value FRound(const Value& v, const CallArgs& a) {
  const int64_t precision = Arg(a, 0, "precision", Value::Int(0)).AsInt();
  const std::string method = Arg(a, 1, "method", Value::String("common")).Str();
  if (method != "common" && method != "ceil" && method != "floor")
    Raise("FilterArgumentError", "method must be common, ceil or floor");
  NoUndefined(v);
  if (!v.IsNumber()) Raise("TypeError", "type " + v.TypeName() + " doesn't define __round__ method");
  // Python's round() of an int is an int (half to even at a negative precision).
  if (method == "common" && v.type() != Value::Type::kFloat) {
    if (precision >= 0 || v.AsInt() == 0) return Value::Int(v.AsInt());
    if (precision < -18) return Value::Int(0);
    int64_t unit = 1;
    for (int64_t i = 0; i < -precision; ++i) unit *= 10;
    const int64_t x = v.AsInt(), q = FloorDiv(x, unit), r = x - q * unit;
    const int64_t up = (2 * r > unit || (2 * r == unit && q % 2 != 0)) ? 1 : 0;
    int64_t out = 0;
    if (__builtin_mul_overflow(q + up, unit, &out)) Overflow();
    return Value::Int(out);
  }
  // floor / ceil of an int at a precision >= 0: Python scales, rounds and divides exact ints,
  // which gives the int back, as a float.
  if (v.type() != Value::Type::kFloat && precision >= 0) return Value::Float(static_cast<double>(v.AsInt()));
  const double x = v.AsFloat();
  if (!std::isfinite(x) && method == "common") return Value::Float(x);
  if (method == "common" && precision >= 0 && precision <= 340) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
    return Value::Float(std::strtod(buf, nullptr));
  }
  if (method == "common" && precision < 0) return Value::Float(RoundToPowerOfTen(x, static_cast<int>(-std::max<int64_t>(precision, -400))));
  // (x * 10**precision: Python converts the int to a float first, which overflows past 1e308.)
  if (method != "common" && precision > 308) Raise("OverflowError", "int too large to convert to float");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double y = x * scale;
  if (method == "common") return Value::Float(std::nearbyint(y) / scale);
  // math.ceil / floor make an int: of an infinity or a NaN there is none (Python's errors).
  if (std::isinf(y)) Raise("OverflowError", "cannot convert float infinity to integer");
  if (std::isnan(y)) Raise("ValueError", "cannot convert float NaN to integer");
  // + 0.0: math.ceil / floor give Python an int, so -0.0 comes out as 0.0. (Python divides that
  // int by the exact int 10**precision: past precision 22, where 10**precision is no longer a
  // double, its last digit can differ from this division's.)
  return Value::Float((method == "ceil" ? std::ceil(y) : std::floor(y)) / scale + 0.0);
}

Value FReplace(const Value& v, const CallArgs& a) {
  if (a.positional.size() + a.keyword.size() < 2) Raise("TypeError", "do_replace() missing 2 required positional arguments: 'old' and 'new'");
  return Value::String(Replace(v.Str(), Arg(a, 0, "old", kUndef).Str(), Arg(a, 1, "new", kUndef).Str(),
                               Arg(a, 2, "count", kNone).IsNone() ? -1 : Arg(a, 2, "count", kNone).AsInt()));
}

Value FReverse(const Value& v, const CallArgs&) {
  if (v.IsString()) {
    std::vector<std::string_view> cps = CodePoints(v.AsString());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::String(out);
  }
  ValueList items = Iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value SortKey(const Value& item, const Value& attr, bool case_sensitive) {
  Value k = attr.IsNone() ? item : GetPath(item, attr.Str());
  if (!case_sensitive && k.IsString()) k = Value::String(unicode::Lower(k.AsString()));
  return k;
}

Value FSort(const Value& v, const CallArgs& a) {
  const bool reverse = Arg(a, 0, "reverse", kUndef).Truthy();
  const bool case_sensitive = Arg(a, 1, "case_sensitive", kUndef).Truthy();
  const Value& attr = Arg(a, 2, "attribute", kNone);
  ValueList items = Iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = SortKey(x, attr, case_sensitive), ky = SortKey(y, attr, case_sensitive);
    if (kx.Equals(ky)) return false;  // jinja2 compares [key] lists: equal keys by == first
    return reverse ? ky.Less(kx) : kx.Less(ky);
  });
  return Value::List(std::move(items));
}

Value FDictSort(const Value& v, const CallArgs& a) {
  const bool case_sensitive = Arg(a, 0, "case_sensitive", kUndef).Truthy();
  const bool by_value = Arg(a, 1, "by", Value::String("key")).Str() == "value";
  const bool reverse = Arg(a, 2, "reverse", kUndef).Truthy();
  NoUndefined(v);  // jinja2 calls value.items(), which an Undefined refuses
  ValueList items = FItems(v, {}).AsList();
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = SortKey(x.AsList()[by_value], kNone, case_sensitive), ky = SortKey(y.AsList()[by_value], kNone, case_sensitive);
    return reverse ? ky.Less(kx) : kx.Less(ky);
  });
  return Value::List(std::move(items));
}

Value FUnique(const Value& v, const CallArgs& a) {
  const bool case_sensitive = Arg(a, 0, "case_sensitive", kUndef).Truthy();
  const Value& attr = Arg(a, 1, "attribute", kNone);
  ValueList out, seen;
  for (const Value& item : Iterate(v)) {
    const Value k = SortKey(item, attr, case_sensitive);
    RequireHashable(k);  // jinja2 keeps a set of them
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value FSum(const Value& v, const CallArgs& a) {
  const Value& attr = Arg(a, 0, "attribute", kNone);
  Value total = Arg(a, 1, "start", Value::Int(0));
  for (const Value& item : Iterate(v)) total = BinaryOp("+", total, attr.IsNone() ? item : GetPath(item, attr.Str()));
  return total;
}

Value MinMax(const Value& v, const CallArgs& a, bool max) {
  const bool case_sensitive = Arg(a, 0, "case_sensitive", kUndef).Truthy();
  const Value& attr = Arg(a, 1, "attribute", kNone);
  ValueList items = Iterate(v);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value ki = SortKey(items[i], attr, case_sensitive), kb = SortKey(items[best], attr, case_sensitive);
    if (max ? kb.Less(ki) : ki.Less(kb)) best = i;
  }
  return items[best];
}
Value FMin(const Value& v, const CallArgs& a) { return MinMax(v, a, false); }
Value FMax(const Value& v, const CallArgs& a) { return MinMax(v, a, true); }

// Jinja2's do_indent: every line after the first gets the pad (blank lines only with blank),
// the first line too with first.
Value FIndent(const Value& v, const CallArgs& a) {
  NoUndefined(v);  // jinja2 appends "\n" to it, which an Undefined refuses
  if (!v.IsString()) Raise("TypeError", "indent expects a string, not '" + v.TypeName() + "'");
  const Value& w = Arg(a, 0, "width", kIntFour);
  const int64_t width = w.IsString() ? 0 : std::max<int64_t>(0, w.AsInt());
  const bool first = Arg(a, 1, "first", kUndef).Truthy(), blank = Arg(a, 2, "blank", kUndef).Truthy();
  std::vector<std::string> lines;  // jinja2: (s + "\n").splitlines()
  for (const Value& line : SplitLines(v.AsString() + "\n", false)) lines.push_back(line.AsString());
  // The padding on every line, before it is made (indent(1e9) asks for gigabytes).
  const uint64_t pad_bytes = w.IsString() ? w.AsString().size() : static_cast<uint64_t>(width);
  ChargeString(v.AsString().size() + 1 + pad_bytes * lines.size());
  const std::string pad = w.IsString() ? w.AsString() : std::string(static_cast<size_t>(width), ' ');
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) out += "\n" + ((blank || !lines[i].empty()) ? pad + lines[i] : lines[i]);
  return Value::String(first ? pad + out : out);
}

// jinja2: len(re.findall(r"\w+", str(value))).
Value FWordCount(const Value& v, const CallArgs&) { return Value::Int(static_cast<int64_t>(unicode::WordCount(v.Str()))); }

// jinja2's attr is getattr only: a dict's keys are not its attributes (a namespace's are).
Value FAttr(const Value& v, const CallArgs& a) {
  NoUndefined(v);
  if (a.positional.empty() && !a.Keyword("name")) Raise("TypeError", "do_attr() missing 1 required positional argument: 'name'");
  const std::string name = Arg(a, 0, "name", kUndef).Str();
  if (v.type() != Value::Type::kNamespace) return Value::Undefined("'" + v.TypeName() + " object' has no attribute '" + name + "'");
  const Value* f = v.AsDict().Find(Value::String(name));
  return f ? *f : Value::Undefined("'Namespace' object has no attribute '" + name + "'");
}

// select / reject / selectattr / rejectattr: (value, [attr], test name, test args...).
Value Select(const Value& v, const CallArgs& a, bool with_attr, bool keep) {
  size_t i = 0;
  std::string attr;
  if (with_attr) attr = Arg(a, i++, "attribute", kUndef).Str();
  const TestFn* test = nullptr;
  CallArgs test_args;
  if (i < a.positional.size()) {
    const std::string name = a.positional[i++].Str();
    test = FindTest(name);
    if (!test) Raise("TemplateRuntimeError", "No test named '" + name + "'.");
    test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(i), a.positional.end());
  }
  ValueList out;
  if (!v.Truthy()) return Value::List();  // jinja2's select_or_reject: `if value:` (none yields nothing)
  for (const Value& item : Iterate(v)) {
    const Value subject = with_attr ? GetPath(item, attr) : item;
    const bool pass = test ? (*test)(subject, test_args) : subject.Truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}
Value FSelect(const Value& v, const CallArgs& a) { return Select(v, a, false, true); }
Value FReject(const Value& v, const CallArgs& a) { return Select(v, a, false, false); }
Value FSelectAttr(const Value& v, const CallArgs& a) { return Select(v, a, true, true); }
Value FRejectAttr(const Value& v, const CallArgs& a) { return Select(v, a, true, false); }

Value FMap(const Value& v, const CallArgs& a) {
  ValueList out;
  if (!v.Truthy()) return Value::List();  // jinja2's do_map: `if value:` (none yields nothing)
  if (const Value* attr = a.Keyword("attribute")) {
    const Value* def = a.Keyword("default");
    for (const Value& item : Iterate(v)) {
      Value x = GetPath(item, attr->Str());
      out.push_back(x.IsUndefined() && def ? *def : x);
    }
    return Value::List(std::move(out));
  }
  if (a.positional.empty()) Raise("FilterArgumentError", "map requires a filter argument");
  const std::string name = a.positional[0].Str();
  const FilterFn* f = FindFilter(name);
  if (!f) Raise("TemplateRuntimeError", "No filter named '" + name + "'.");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : Iterate(v)) out.push_back((*f)(item, rest));
  return Value::List(std::move(out));
}

Value FCount(const Value& v, const CallArgs& a) { return FLength(v, a); }

const std::unordered_map<std::string_view, FilterFn>& Filters() {
  static const std::unordered_map<std::string_view, FilterFn> f = {
      {"length", FLength}, {"count", FCount}, {"tojson", FToJson}, {"items", FItems}, {"string", FString},
      {"safe", FSafe}, {"trim", FTrim}, {"upper", FUpper}, {"lower", FLower}, {"capitalize", FCapitalize},
      {"title", FTitle}, {"escape", FEscape}, {"e", FEscape}, {"forceescape", FEscape}, {"default", FDefault},
      {"d", FDefault}, {"list", FList}, {"join", FJoin}, {"first", FFirst}, {"last", FLast}, {"int", FInt},
      {"float", FFloat}, {"abs", FAbs}, {"round", FRound}, {"replace", FReplace}, {"reverse", FReverse},
      {"sort", FSort}, {"dictsort", FDictSort}, {"unique", FUnique}, {"sum", FSum}, {"min", FMin}, {"max", FMax},
      {"indent", FIndent}, {"wordcount", FWordCount}, {"attr", FAttr}, {"select", FSelect}, {"reject", FReject},
      {"selectattr", FSelectAttr}, {"rejectattr", FRejectAttr}, {"map", FMap},
  };
  return f;
}

// --- methods --------------------------------------------------------------------------------

// The arguments CPython's str methods require: how many, and how many leading ones must be str.
void CheckStrMethodArgs(std::string_view name, const CallArgs& a) {
  struct Needs {
    size_t min_args, str_args;
  };
  static const std::unordered_map<std::string_view, Needs> kNeeds = {
      {"startswith", {1, 0}}, {"endswith", {1, 0}}, {"find", {1, 1}}, {"rfind", {1, 1}}, {"index", {1, 1}},
      {"count", {1, 1}},      {"join", {1, 0}},     {"replace", {2, 2}}};
  const auto it = kNeeds.find(name);
  if (it == kNeeds.end()) return;
  const size_t given = a.positional.size() + a.keyword.size();
  if (given < it->second.min_args) {
    if (name == "replace") Raise("TypeError", "replace expected at least 2 arguments, got " + std::to_string(given));
    Raise("TypeError", std::string(name) + "() takes at least 1 argument (" + std::to_string(given) + " given)");
  }
  for (size_t i = 0; i < std::min(a.positional.size(), it->second.str_args); ++i)
    if (!a.positional[i].IsString())
      Raise("TypeError", std::string(name) + "() argument " + std::to_string(i + 1) + " must be str, not " + a.positional[i].TypeName());
}

Value StrMethod(const std::string& s, std::string_view name, const CallArgs& a, bool* found) {
  *found = true;
  CheckStrMethodArgs(name, a);
  if (name == "startswith") return Value::Bool(PrefixTest(s, Arg(a, 0, "prefix", kUndef), true));
  if (name == "endswith") return Value::Bool(PrefixTest(s, Arg(a, 0, "suffix", kUndef), false));
  if (name == "split") return Split(s, Arg(a, 0, "sep", kNone), Arg(a, 1, "maxsplit", kNone), false);
  if (name == "rsplit") return Split(s, Arg(a, 0, "sep", kNone), Arg(a, 1, "maxsplit", kNone), true);
  if (name == "strip") return Value::String(StripChars(s, Arg(a, 0, "chars", kNone), true, true));
  if (name == "lstrip") return Value::String(StripChars(s, Arg(a, 0, "chars", kNone), true, false));
  if (name == "rstrip") return Value::String(StripChars(s, Arg(a, 0, "chars", kNone), false, true));
  if (name == "replace") {
    const Value& c = Arg(a, 2, "count", kNone);
    return Value::String(Replace(s, Arg(a, 0, "old", kUndef).Str(), Arg(a, 1, "new", kUndef).Str(), c.IsNone() ? -1 : c.AsInt()));
  }
  if (name == "upper") return Value::String(unicode::Upper(s));
  if (name == "lower") return Value::String(unicode::Lower(s));
  if (name == "title") return Value::String(unicode::Title(s));
  if (name == "capitalize") return Value::String(unicode::Capitalize(s));
  if (name == "find" || name == "rfind" || name == "index") {
    const std::string sub = Arg(a, 0, "sub", kUndef).Str();
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos && name == "index") Raise("ValueError", "substring not found");
    return Value::Int(at == std::string::npos ? -1 : static_cast<int64_t>(CodePointCount(s.substr(0, at))));
  }
  if (name == "count") {
    const std::string sub = Arg(a, 0, "sub", kUndef).Str();
    if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::Int(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(Arg(a, 0, "iterable", kUndef))) {
      if (!item.IsString()) Raise("TypeError", "sequence item: expected str instance, " + item.TypeName() + " found");
      ChargeString(s.size() + item.AsString().size(), out.size() + s.size() + item.AsString().size());
      if (!first) out += s;
      first = false;
      out += item.AsString();
    }
    return Value::String(out);
  }
  if (name == "format") return PyFormat(s, a);
  if (name == "splitlines") return Value::List(SplitLines(s, Arg(a, 0, "keepends", kUndef).Truthy()));
  if (name == "isdigit") return Value::Bool(unicode::All(s, unicode::Class::kDigit));
  if (name == "isalpha") return Value::Bool(unicode::All(s, unicode::Class::kAlpha));
  if (name == "isalnum") return Value::Bool(unicode::All(s, unicode::Class::kAlnum));
  if (name == "isspace") return Value::Bool(unicode::All(s, unicode::Class::kSpace));
  if (name == "islower") return Value::Bool(unicode::IsLower(s));
  if (name == "isupper") return Value::Bool(unicode::IsUpper(s));
  *found = false;
  return {};
}

Value DictMethod(const Value& d, std::string_view name, const CallArgs& a, bool* found) {
  *found = true;
  if (name == "items") return FItems(d, a);
  if (name == "keys" || name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.AsDict().items()) out.push_back(name == "keys" ? k : v);
    return Value::List(std::move(out));
  }
  if (name == "get") {
    if (a.positional.empty() && !a.Keyword("key")) Raise("TypeError", "get expected at least 1 argument, got 0");
    RequireHashable(Arg(a, 0, "key", kUndef));
    const Value* v = d.AsDict().Find(Arg(a, 0, "key", kUndef));
    return v ? *v : Arg(a, 1, "default", kNone);
  }
  *found = false;
  return {};
}

Value ListMethod(const Value& l, std::string_view name, const CallArgs& a, bool* found) {
  *found = true;
  const ValueList& items = l.AsList();
  const Value& x = Arg(a, 0, "value", kUndef);
  if ((name == "index" || name == "count") && a.positional.empty() && !a.Keyword("value"))
    Raise("TypeError", std::string(name) + "() takes exactly one argument (0 given)");
  if (name == "index") {
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].Equals(x)) return Value::Int(static_cast<int64_t>(i));
    Raise("ValueError", x.Repr() + " is not in list");
  }
  if (name == "count") return Value::Int(std::count_if(items.begin(), items.end(), [&](const Value& v) { return v.Equals(x); }));
  *found = false;
  return {};
}

}  // namespace

const TestFn* FindTest(std::string_view name) {
  auto it = Tests().find(name);
  return it == Tests().end() ? nullptr : &it->second;
}

const FilterFn* FindFilter(std::string_view name) {
  auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : &it->second;
}

// jinja2 3.1's DEFAULT_FILTERS and DEFAULT_TESTS that the tables above leave out (sorted(
// jinja2.Environment().filters) minus Filters(), the same for tests).
bool Jinja2HasFilter(std::string_view name) {
  static const std::unordered_set<std::string_view> kOthers = {
      "batch", "center", "filesizeformat", "format", "groupby", "pprint", "random", "slice", "striptags",
      "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
  return FindFilter(name) != nullptr || kOthers.count(name) > 0;
}

bool Jinja2HasTest(std::string_view name) {
  static const std::unordered_set<std::string_view> kOthers = {"escaped", "filter", "test"};
  return FindTest(name) != nullptr || kOthers.count(name) > 0;
}

Value CallMethod(const Value& obj, std::string_view name, const CallArgs& args, bool* found) {
  *found = false;
  if (obj.IsString()) return StrMethod(obj.AsString(), name, args, found);
  if (obj.IsMapping()) return DictMethod(obj, name, args, found);
  if (obj.IsSequence()) return ListMethod(obj, name, args, found);
  return {};
}

bool HasMethod(const Value& obj, std::string_view name) {
  static const char* const kStr[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace",
                                     "upper", "lower", "title", "capitalize", "find", "rfind", "index", "count", "join",
                                     "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "format"};
  static const char* const kDict[] = {"items", "keys", "values", "get"};
  static const char* const kList[] = {"index", "count"};
  auto in = [&](const auto& table) {
    return std::any_of(std::begin(table), std::end(table), [&](const char* n) { return name == n; });
  };
  if (obj.IsString()) return in(kStr);
  if (obj.IsMapping()) return in(kDict);
  if (obj.IsSequence()) return in(kList);
  return false;
}

// --- operators ------------------------------------------------------------------------------

namespace {

[[noreturn]] void Unsupported(std::string_view op, const Value& a, const Value& b) {
  Raise("TypeError", "unsupported operand type(s) for " + std::string(op) + ": '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

// a + b: checked int64 sum, float sum, or concatenation of two strings, lists or tuples.
Value Add(std::string_view op, const Value& a, const Value& b, bool ints) {
  if (ints) {
    int64_t r = 0;
    if (__builtin_add_overflow(a.AsInt(), b.AsInt(), &r)) Overflow();
    return Value::Int(r);
  }
  if (a.IsNumber() && b.IsNumber()) return Value::Float(a.AsFloat() + b.AsFloat());
  if (a.IsString() && b.IsString()) return Value::String(a.AsString() + b.AsString());
  if (a.IsString()) Raise("TypeError", "can only concatenate str (not \"" + b.TypeName() + "\") to str");
  if (a.type() == b.type() && a.IsSequence()) {
    ChargeOps(static_cast<int64_t>(a.AsList().size() + b.AsList().size()));
    ValueList out = a.AsList();
    out.insert(out.end(), b.AsList().begin(), b.AsList().end());
    return a.type() == Value::Type::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (a.type() == Value::Type::kList) Raise("TypeError", "can only concatenate list (not \"" + b.TypeName() + "\") to list");
  Unsupported(op, a, b);
}

// a * b: checked int64 product, float product, or a string, list or tuple repeated n times.
Value Multiply(std::string_view op, const Value& a, const Value& b, bool ints) {
  if (ints) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a.AsInt(), b.AsInt(), &r)) Overflow();
    return Value::Int(r);
  }
  if (a.IsNumber() && b.IsNumber()) return Value::Float(a.AsFloat() * b.AsFloat());
  const Value& seq = a.IsNumber() ? b : a;
  const Value& n = a.IsNumber() ? a : b;
  if (n.IsNumber() && n.type() != Value::Type::kFloat && (seq.IsString() || seq.IsSequence())) {
    // The size first ('x' * 10**10 asks for 10 GB): charged before anything is made.
    const uint64_t times = static_cast<uint64_t>(std::max<int64_t>(0, n.AsInt()));
    const uint64_t unit = seq.IsString() ? seq.AsString().size() : seq.AsList().size();
    uint64_t total = 0;
    if (__builtin_mul_overflow(times, unit, &total)) total = UINT64_MAX / 2;
    if (seq.IsString()) {
      ChargeString(total);
      std::string out;
      for (uint64_t i = 0; i < times; ++i) out += seq.AsString();
      return Value::String(out);
    }
    ChargeOps(static_cast<int64_t>(std::min<uint64_t>(total, INT64_MAX / 2)));
    ValueList out;
    for (uint64_t i = 0; i < times; ++i) out.insert(out.end(), seq.AsList().begin(), seq.AsList().end());
    return seq.type() == Value::Type::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  Unsupported(op, a, b);
}

// a / b, a // b and a % b with Python's meanings (floor division, the remainder's sign that of b).
Value Divide(std::string_view op, const Value& a, const Value& b, bool ints) {
  if (!a.IsNumber() || !b.IsNumber()) Unsupported(op, a, b);
  if (b.AsFloat() == 0) Raise("ZeroDivisionError", op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value::Float(a.AsFloat() / b.AsFloat());
  if (ints) {
    if (b.AsInt() == -1) {  // INT64_MIN / -1 traps in C++ (Python's answer is 2^63)
      if (op == "%") return Value::Int(0);
      if (a.AsInt() == INT64_MIN) Overflow();
      return Value::Int(-a.AsInt());
    }
    const int64_t q = FloorDiv(a.AsInt(), b.AsInt());
    return Value::Int(op == "//" ? q : a.AsInt() - q * b.AsInt());
  }
  return Value::Float(op == "//" ? PyFloorDiv(a.AsFloat(), b.AsFloat()) : PyMod(a.AsFloat(), b.AsFloat()));
}

// a ** b: exact for ints with a non-negative exponent, else a float, refusing what Python refuses.
Value Power(std::string_view op, const Value& a, const Value& b, bool ints) {
  if (!a.IsNumber() || !b.IsNumber()) Unsupported(op, a, b);
  if (ints && b.AsInt() >= 0) {  // by squaring, checked: 2 ** 9223372036854775807 is an error at once
    int64_t base = a.AsInt(), e = b.AsInt(), p = 1;
    if (base == 0 || base == 1) return Value::Int(e == 0 ? 1 : base);
    if (base == -1) return Value::Int(e % 2 ? -1 : 1);
    for (; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(p, base, &p)) Overflow();
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) Overflow();
    }
    return Value::Int(p);
  }
  if (a.AsFloat() == 0.0 && b.AsFloat() < 0) Raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
  if (a.AsFloat() < 0 && std::isfinite(b.AsFloat()) && b.AsFloat() != std::trunc(b.AsFloat()))
    Raise("TypeError", "a negative number to a fractional power is complex: complex numbers are not supported");
  const double r = std::pow(a.AsFloat(), b.AsFloat());
  if (std::isinf(r) && std::isfinite(a.AsFloat()) && std::isfinite(b.AsFloat()))
    Raise("OverflowError", "(34, 'Numerical result out of range')");
  return Value::Float(r);
}

}  // namespace

Value BinaryOp(std::string_view op, const Value& a, const Value& b) {
  NoUndefined(a);
  NoUndefined(b);
  const bool ints = a.IsNumber() && b.IsNumber() && a.type() != Value::Type::kFloat && b.type() != Value::Type::kFloat;
  if (op == "+") return Add(op, a, b, ints);
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_sub_overflow(a.AsInt(), b.AsInt(), &r)) Overflow();
      return Value::Int(r);
    }
    if (a.IsNumber() && b.IsNumber()) return Value::Float(a.AsFloat() - b.AsFloat());
    Unsupported(op, a, b);
  }
  if (op == "*") return Multiply(op, a, b, ints);
  if (op == "/" || op == "//" || op == "%") return Divide(op, a, b, ints);
  if (op == "**") return Power(op, a, b, ints);
  Raise("TemplateSyntaxError", "unknown operator " + std::string(op));
}

// Python's hash(): lists, dicts and namespaces are not hashable, nor a tuple holding one.
bool Hashable(const Value& v) {
  if (v.type() == Value::Type::kList || v.IsMapping() || v.type() == Value::Type::kNamespace) return false;
  if (v.type() == Value::Type::kTuple) return std::all_of(v.AsList().begin(), v.AsList().end(), Hashable);
  return true;
}

void RequireHashable(const Value& v) {
  if (!Hashable(v)) Raise("TypeError", "unhashable type: '" + v.TypeName() + "'");
}

bool Contains(const Value& c, const Value& item) {
  switch (c.type()) {
    case Value::Type::kUndefined: return false;
    case Value::Type::kString:
      if (!item.IsString()) Raise("TypeError", "'in <string>' requires string as left operand, not " + item.TypeName());
      return c.AsString().find(item.AsString()) != std::string::npos;
    case Value::Type::kList:
    case Value::Type::kTuple:
      return std::any_of(c.AsList().begin(), c.AsList().end(), [&](const Value& v) { return v.Equals(item); });
    case Value::Type::kDict:
    case Value::Type::kNamespace:
      RequireHashable(item);
      return c.AsDict().Find(item) != nullptr;
    default: Raise("TypeError", "argument of type '" + c.TypeName() + "' is not iterable");
  }
}

Value Subscript(const Value& v, const Value& index) {
  NoUndefined(v);
  if (v.IsMapping()) {
    const Value* f = v.AsDict().Find(index);
    return f ? *f : Value::Undefined("'dict object' has no attribute " + index.Repr());
  }
  if ((v.IsSequence() || v.IsString()) && index.type() == Value::Type::kFloat)  // a TypeError jinja2's getitem swallows
    return Value::Undefined(v.TypeName() + " object has no element " + index.Repr());
  if ((v.IsSequence() || v.IsString()) && index.IsNumber()) {
    if (v.IsString()) {
      std::vector<std::string_view> cps = CodePoints(v.AsString());
      int64_t i = index.AsInt();
      if (i < 0) i += static_cast<int64_t>(cps.size());
      if (i < 0 || i >= static_cast<int64_t>(cps.size())) return Value::Undefined();
      return Value::String(std::string(cps[i]));
    }
    int64_t i = index.AsInt();
    const int64_t n = static_cast<int64_t>(v.AsList().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined(v.TypeName() + " object has no element " + index.Repr());
    return v.AsList()[i];
  }
  if (v.type() == Value::Type::kNamespace && index.IsString()) {
    const Value* f = v.AsDict().Find(index);
    return f ? *f : Value::Undefined();
  }
  return Value::Undefined("'" + v.TypeName() + " object' has no attribute " + index.Repr());
}

Value Slice(const Value& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  NoUndefined(v);
  const int64_t step = step_v.IsNumber() ? step_v.AsInt() : 1;
  if (step == 0) Raise("ValueError", "slice step cannot be zero");
  std::vector<std::string_view> cps;
  int64_t n;
  if (v.IsString()) {
    cps = CodePoints(v.AsString());
    n = static_cast<int64_t>(cps.size());
  } else if (v.IsSequence()) {
    n = static_cast<int64_t>(v.AsList().size());
  } else {  // jinja2 compiles a slice as Python's subscript, bypassing getitem: a TypeError
    Raise("TypeError", "'" + v.TypeName() + "' object is not subscriptable");
  }
  for (const Value* x : {&start_v, &stop_v, &step_v})  // an absent bound is None; an undefined name has no __index__
    if (!x->IsNone() && (!x->IsNumber() || x->type() == Value::Type::kFloat))
      Raise("TypeError", "slice indices must be integers or None or have an __index__ method");
  // Python's slice.indices().
  auto clamp = [&](const Value& x, int64_t def) {
    if (!x.IsNumber()) return def;
    int64_t i = x.AsInt();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1), stop = clamp(stop_v, step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  if (v.IsString()) {
    std::string out;
    for (int64_t i : idx) out += cps[i];
    return Value::String(out);
  }
  ValueList out;
  for (int64_t i : idx) out.push_back(v.AsList()[i]);
  return v.type() == Value::Type::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

ValueList Iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return {};
    case Value::Type::kList:
    case Value::Type::kTuple: return v.AsList();
    case Value::Type::kDict: {
      ValueList keys;
      for (const auto& [k, val] : v.AsDict().items()) keys.push_back(k);
      return keys;
    }
    case Value::Type::kString: {
      ValueList chars;
      for (std::string_view cp : CodePoints(v.AsString())) chars.push_back(Value::String(std::string(cp)));
      return chars;
    }
    default: Raise("TypeError", "'" + v.TypeName() + "' object is not iterable");
  }
}

}  // namespace radixlm::jinja
