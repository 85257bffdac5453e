// Python's str.format for templates ('{} of {}'.format(a, b), '{name:>8}'.format(name=x)), as
// jinja2's sandbox runs it (string.Formatter): replacement fields {field!conv:spec} with automatic
// or manual numbering, keyword names, .attribute and [key] lookups, !r / !s / !a conversions, and
// the format mini-language [[fill]align][sign][#][0][width][,|_][.precision][type] for str, int
// (d b o x X c) and float (f F e E g G %). Errors are Python's: ValueError, IndexError, KeyError.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "jinja/builtins.h"

namespace radixlm::jinja {
namespace {

[[noreturn]] void Raise(const std::string& kind, const std::string& message) { throw JinjaError{kind, message}; }

std::string EncodeCodePoint(uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) Raise("OverflowError", "%c arg not in range(0x110000)");
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

struct Spec {
  std::string fill = " ";
  char align = 0, sign = '-', type = 0, grouping = 0;
  bool alternate = false;
  int64_t width = -1, precision = -1;
};

Spec ParseSpec(std::string_view s) {
  Spec f;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  // A fill is one code point before an alignment character.
  const size_t cp = s.empty() ? 0 : CodePoints(s.substr(0, std::min<size_t>(4, s.size())))[0].size();
  if (s.size() > cp && is_align(s[cp])) {
    f.fill = std::string(s.substr(0, cp));
    f.align = s[cp];
    i = cp + 1;
  } else if (!s.empty() && is_align(s[0])) {
    f.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) f.sign = s[i++];
  if (i < s.size() && s[i] == '#') f.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') {
    if (!f.align) f.fill = "0", f.align = '=';
    ++i;
  }
  auto number = [&](int64_t* out) {
    int64_t v = 0;
    bool any = false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + (s[i++] - '0');
      if (v > 1'000'000) Raise("ValueError", "Too many decimal digits in format string");
      any = true;
    }
    if (any) *out = v;
    return any;
  };
  number(&f.width);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) f.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!number(&f.precision)) Raise("ValueError", "Format specifier missing precision");
  }
  if (i < s.size()) f.type = s[i++];
  if (i != s.size()) Raise("ValueError", "Invalid format specifier '" + std::string(s) + "'");
  return f;
}

std::string Group(std::string digits, char sep) {  // digits: an unsigned integer part
  if (!sep) return digits;
  std::string out;
  const size_t n = digits.size();
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && (n - k) % 3 == 0) out.push_back(sep);
    out.push_back(digits[k]);
  }
  return out;
}

std::string Pad(const std::string& body, const std::string& sign, const Spec& f, char default_align) {
  const int64_t len = static_cast<int64_t>(CodePointCount(body) + CodePointCount(sign));
  if (f.width <= len) return sign + body;
  ChargeString(static_cast<uint64_t>(f.width) * f.fill.size());
  const int64_t pad = f.width - len;
  auto fill = [&](int64_t n) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += f.fill;
    return out;
  };
  switch (f.align ? f.align : default_align) {
    case '<': return sign + body + fill(pad);
    case '^': return fill(pad / 2) + sign + body + fill(pad - pad / 2);
    case '=': return sign + fill(pad) + body;
    default: return fill(pad) + sign + body;
  }
}

std::string FormatInt(int64_t v, const Spec& f) {
  const char type = f.type ? f.type : 'd';
  if (type == 'c') {
    if (v < 0 || v >= 0x110000) Raise("OverflowError", "%c arg not in range(0x110000)");
    return Pad(EncodeCodePoint(static_cast<uint32_t>(v)), "", f, '<');
  }
  const bool neg = v < 0;
  uint64_t u = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits, prefix;
  const int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
  const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    digits.insert(digits.begin(), alphabet[u % base]);
    u /= base;
  } while (u);
  if (f.alternate && base != 10) prefix = type == 'b' ? "0b" : type == 'o' ? "0o" : type == 'X' ? "0X" : "0x";
  if (base == 10) digits = Group(digits, f.grouping);
  const std::string sign = neg ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  return Pad(digits, sign + prefix, f, '>');
}

// Python groups the integer digits of any float it formats (',' or '_'), in exponent form too
// ('1,234.5', '1.5e+16' has one digit).
std::string GroupIntegerDigits(const std::string& body, char grouping) {
  if (!grouping) return body;
  size_t end = 0;
  while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
  return Group(body.substr(0, end), grouping) + body.substr(end);
}

std::string FormatFloat(double v, const Spec& f) {
  char type = f.type;
  const int64_t precision = f.precision < 0 ? 6 : f.precision;
  if (!type) {  // none: str(float), or 'g'-like with a precision
    if (f.precision < 0) {
      const bool neg = std::signbit(v);
      std::string body = GroupIntegerDigits(FloatRepr(std::fabs(v)), f.grouping);
      return Pad(body, neg ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "", f, '>');
    }
    type = 'g';
  }
  double x = v;
  if (type == '%') x *= 100;
  const bool neg = std::signbit(x) && !std::isnan(x);
  x = std::fabs(x);
  std::string body;
  if (std::isinf(x) || std::isnan(x)) {
    body = std::isnan(x) ? "nan" : "inf";
    if (type == 'F' || type == 'E' || type == 'G') for (char& c : body) c = static_cast<char>(std::toupper(c));
  } else {
    char conv = type == '%' ? 'f' : type;
    if (conv != 'f' && conv != 'F' && conv != 'e' && conv != 'E' && conv != 'g' && conv != 'G')
      Raise("ValueError", std::string("Unknown format code '") + type + "' for object of type 'float'");
    const int p = static_cast<int>(std::min<int64_t>(precision, 1000));
    const std::string fmt = std::string("%") + (f.alternate ? "#" : "") + ".*" + conv;
    const int n = std::snprintf(nullptr, 0, fmt.c_str(), p, x);
    body.resize(static_cast<size_t>(n) + 1);
    std::snprintf(body.data(), body.size(), fmt.c_str(), p, x);
    body.resize(static_cast<size_t>(n));
    body = GroupIntegerDigits(body, f.grouping);
  }
  if (type == '%') body += "%";
  const std::string sign = neg ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  return Pad(body, sign, f, '>');
}

std::string FormatValue(const Value& v, const Spec& f) {
  if (v.type() == Value::Type::kFloat) return FormatFloat(v.AsFloat(), f);
  if (v.type() == Value::Type::kInt || (v.type() == Value::Type::kBool && f.type && f.type != 's')) {
    if (f.type && std::string_view("eEfFgG%").find(f.type) != std::string_view::npos) return FormatFloat(v.AsFloat(), f);
    if (f.type && std::string_view("dbcoxXn").find(f.type) == std::string_view::npos)
      Raise("ValueError", std::string("Unknown format code '") + f.type + "' for object of type 'int'");
    if (f.precision >= 0) Raise("ValueError", "Precision not allowed in integer format specifier");
    return FormatInt(v.AsInt(), f);
  }
  if (f.type && f.type != 's')
    Raise("ValueError", std::string("Unknown format code '") + f.type + "' for object of type '" + v.TypeName() + "'");
  if (f.align == '=') Raise("ValueError", "'=' alignment not allowed in string format specifier");
  std::string text = v.Str();
  if (f.precision >= 0) {
    const auto cps = CodePoints(text);
    if (static_cast<int64_t>(cps.size()) > f.precision) {
      std::string cut;
      for (int64_t k = 0; k < f.precision; ++k) cut += cps[static_cast<size_t>(k)];
      text = cut;
    }
  }
  return Pad(text, "", f, '<');
}

// The value a field name picks: an argument, then .attribute / [key] steps.
Value Field(std::string_view name, const CallArgs& a, size_t* auto_index, int* numbering) {
  size_t i = 0;
  while (i < name.size() && name[i] != '.' && name[i] != '[') ++i;
  const std::string_view first = name.substr(0, i);
  Value v;
  const bool digits = !first.empty() && first.find_first_not_of("0123456789") == std::string_view::npos;
  if (first.empty() || digits) {
    const int mode = first.empty() ? 1 : 2;
    if (*numbering && *numbering != mode)
      Raise("ValueError", mode == 1 ? "cannot switch from manual field specification to automatic field numbering"
                                    : "cannot switch from automatic field numbering to manual field specification");
    *numbering = mode;
    const size_t k = first.empty() ? (*auto_index)++ : static_cast<size_t>(std::stoull(std::string(first.substr(0, 9))));
    if (k >= a.positional.size()) Raise("IndexError", "Replacement index " + std::to_string(k) + " out of range for positional args tuple");
    v = a.positional[k];
  } else {
    const Value* kw = a.Keyword(first);
    if (!kw) Raise("KeyError", "'" + std::string(first) + "'");
    v = *kw;
  }
  while (i < name.size()) {
    if (name[i] == '.') {
      size_t e = ++i;
      while (e < name.size() && name[e] != '.' && name[e] != '[') ++e;
      const std::string attr(name.substr(i, e - i));
      v = v.IsMapping() || v.type() == Value::Type::kNamespace ? GetPath(v, attr) : Value::Undefined();
      if (v.IsUndefined()) Raise("AttributeError", "object has no attribute '" + attr + "'");
      i = e;
    } else {
      const size_t close = name.find(']', i);
      if (close == std::string_view::npos) Raise("ValueError", "Missing ']' in format string");
      const std::string key(name.substr(i + 1, close - i - 1));
      const bool index = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
      v = Subscript(v, index ? Value::Int(std::stoll(key.substr(0, 18))) : Value::String(key));
      if (v.IsUndefined()) Raise(index ? "IndexError" : "KeyError", index ? "list index out of range" : "'" + key + "'");
      i = close + 1;
    }
  }
  return v;
}

}  // namespace

Value PyFormat(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 0 none yet, 1 automatic, 2 manual
  for (size_t i = 0; i < fmt.size();) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      Raise("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    // {field!conv:spec}; a nested {} inside spec is not supported (Python allows one level).
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) Raise("ValueError", "Single '{' encountered in format string");
    std::string_view field(fmt.data() + i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) Raise("ValueError", "nested replacement fields are not supported");
    std::string_view spec, conv;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
      if (conv != "r" && conv != "s" && conv != "a") Raise("ValueError", "Unknown conversion specifier " + std::string(conv));
    }
    Value v = Field(field, a, &auto_index, &numbering);
    if (conv == "r" || conv == "a") v = Value::String(v.Repr());
    else if (conv == "s") v = Value::String(v.Str());
    // object.__format__ refuses a non-empty spec: only str, numbers (and bool, an int) take one.
    if (!spec.empty() && !v.IsString() && !v.IsNumber() && v.type() != Value::Type::kBool)
      Raise("TypeError", "unsupported format string passed to " + std::string(v.IsUndefined() ? "Undefined" : v.TypeName()) + ".__format__");
    const std::string piece = FormatValue(v, ParseSpec(spec));
    ChargeString(piece.size(), out.size() + piece.size());
    out += piece;
    i = close + 1;
  }
  return Value::String(std::move(out));
}

}  // namespace radixlm::jinja
