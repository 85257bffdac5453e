#include "jinja/unicode.h"

#include <utf8proc.h>

#include "core/utf8.h"

namespace radixlm::jinja::unicode {

namespace {

constexpr uint32_t kInvalid = 0xFFFFFFFF;

utf8proc_category_t Category(uint32_t cp) {
  return cp == kInvalid ? UTF8PROC_CATEGORY_CN : utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}
bool IsCased(uint32_t cp) {
  const auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}
bool IsLetter(uint32_t cp) {
  const auto c = Category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}
bool IsNumber(uint32_t cp) {
  const auto c = Category(cp);
  return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}
bool IsSpace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1f);
  const auto c = Category(cp);
  return cp == 0x85 || c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

void Append(uint32_t cp, std::string_view raw, std::string* out) {
  if (cp == kInvalid) *out += raw;
  else core::AppendUtf8(cp, out);
}

enum class Case { kUpper, kLower, kTitle };
void AppendCased(uint32_t cp, std::string_view raw, Case to, std::string* out) {
  if (cp == kInvalid) {
    *out += raw;
  } else if (cp == 0xDF && to != Case::kLower) {  // ß: SpecialCasing's upper SS, title Ss
    *out += to == Case::kUpper ? "SS" : "Ss";
  } else if (cp == 0x130 && to == Case::kLower) {  // İ: i + combining dot above
    *out += "i\xcc\x87";
  } else {
    const auto c = static_cast<utf8proc_int32_t>(cp);
    core::AppendUtf8(static_cast<uint32_t>(to == Case::kUpper   ? utf8proc_toupper(c)
                                           : to == Case::kLower ? utf8proc_tolower(c)
                                                                : utf8proc_totitle(c)),
                     out);
  }
}

template <typename F>
void ForEach(std::string_view s, F f) {
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = Next(s, &i);
    f(cp, s.substr(at, i - at));
  }
}

std::string Map(std::string_view s, Case to) {
  std::string out;
  out.reserve(s.size());
  ForEach(s, [&](uint32_t cp, std::string_view raw) { AppendCased(cp, raw, to, &out); });
  return out;
}

}  // namespace

uint32_t Next(std::string_view s, size_t* i) {
  utf8proc_int32_t cp = -1;
  const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + *i),
                                              static_cast<utf8proc_ssize_t>(s.size() - *i), &cp);
  if (n <= 0 || cp < 0) {
    ++*i;
    return kInvalid;
  }
  *i += static_cast<size_t>(n);
  return static_cast<uint32_t>(cp);
}

std::string Upper(std::string_view s) { return Map(s, Case::kUpper); }
std::string Lower(std::string_view s) { return Map(s, Case::kLower); }

std::string Capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  ForEach(s, [&](uint32_t cp, std::string_view raw) {
    AppendCased(cp, raw, first ? Case::kTitle : Case::kLower, &out);
    first = false;
  });
  return out;
}

std::string Title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  ForEach(s, [&](uint32_t cp, std::string_view raw) {
    const bool cased = IsCased(cp);
    if (cased) AppendCased(cp, raw, prev_cased ? Case::kLower : Case::kTitle, &out);
    else Append(cp, raw, &out);
    prev_cased = cased;
  });
  return out;
}

bool All(std::string_view s, Class c) {
  if (s.empty()) return false;
  bool all = true;
  ForEach(s, [&](uint32_t cp, std::string_view) {
    switch (c) {
      case Class::kAlpha: all = all && IsLetter(cp); break;
      case Class::kAlnum: all = all && (IsLetter(cp) || IsNumber(cp)); break;
      case Class::kDigit: all = all && Category(cp) == UTF8PROC_CATEGORY_ND; break;
      case Class::kSpace: all = all && IsSpace(cp); break;
    }
  });
  return all;
}

namespace {
// Some character of case `want` (Ll or Lu) and no cased character of another case (titlecase
// counts as another): Python's islower / isupper.
bool OnlyCase(std::string_view s, utf8proc_category_t want) {
  bool some = false, other = false;
  ForEach(s, [&](uint32_t cp, std::string_view) {
    const auto c = Category(cp);
    some = some || c == want;
    other = other || (c != want && (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT));
  });
  return some && !other;
}
}  // namespace

bool IsLower(std::string_view s) { return OnlyCase(s, UTF8PROC_CATEGORY_LL); }
bool IsUpper(std::string_view s) { return OnlyCase(s, UTF8PROC_CATEGORY_LU); }

size_t WordCount(std::string_view s) {
  size_t words = 0;
  bool in_word = false;
  ForEach(s, [&](uint32_t cp, std::string_view) {
    const bool w = cp == '_' || IsLetter(cp) || IsNumber(cp);
    words += w && !in_word;
    in_word = w;
  });
  return words;
}

bool Printable(uint32_t cp) {
  if (cp == ' ') return true;
  switch (Category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool IsLineBreak(uint32_t cp) {
  return (cp >= '\n' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace radixlm::jinja::unicode
