// GBNF expressions for JSON text pieces (json_schema_text.h): characters in all their JSON
// encodings, literals, integer and decimal ranges, and string formats.
#include "grammar/json_schema_text.h"

#include <algorithm>
#include <map>

namespace radixlm::grammar::schema_internal {
namespace {

std::string Join(const std::vector<std::string>& alts) {
  if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}


std::vector<CharRange> Intersect(const std::vector<CharRange>& a, uint32_t lo, uint32_t hi) {
  std::vector<CharRange> out;
  for (CharRange r : a) {
    uint32_t l = std::max(r.lo, lo), h = std::min(r.hi, hi);
    if (l <= h) out.push_back({l, h});
  }
  return out;
}

bool Contains(const std::vector<CharRange>& a, uint32_t cp) {
  return std::any_of(a.begin(), a.end(), [&](CharRange r) { return r.lo <= cp && cp <= r.hi; });
}

// Digit sequences of fixed width for the numbers [lo, hi]: each sequence is one digit range per
// position (the usual split: a partial first digit, a full middle, a partial last digit).
using DigitSeq = std::vector<std::pair<int, int>>;
void FixedWidth(uint64_t lo, uint64_t hi, int width, int base, DigitSeq prefix, std::vector<DigitSeq>* out) {
  if (width == 0) {
    out->push_back(prefix);
    return;
  }
  uint64_t unit = 1;
  for (int i = 1; i < width; ++i) unit *= static_cast<uint64_t>(base);
  const uint64_t lo_d = lo / unit, hi_d = hi / unit;
  auto with = [&](int a, int b) {
    DigitSeq p = prefix;
    p.push_back({a, b});
    return p;
  };
  if (lo_d == hi_d) {
    FixedWidth(lo % unit, hi % unit, width - 1, base, with(static_cast<int>(lo_d), static_cast<int>(lo_d)), out);
    return;
  }
  uint64_t first = lo_d, last = hi_d;
  if (lo % unit != 0) {
    FixedWidth(lo % unit, unit - 1, width - 1, base, with(static_cast<int>(lo_d), static_cast<int>(lo_d)), out);
    ++first;
  }
  const bool last_partial = hi % unit != unit - 1;
  if (last_partial) --last;
  if (first <= last) FixedWidth(0, unit - 1, width - 1, base, with(static_cast<int>(first), static_cast<int>(last)), out);
  if (last_partial) FixedWidth(0, hi % unit, width - 1, base, with(static_cast<int>(hi_d), static_cast<int>(hi_d)), out);
}

std::string DecClass(int a, int b) {
  if (a == b) return "\"" + std::to_string(a) + "\"";
  return "[" + std::to_string(a) + "-" + std::to_string(b) + "]";
}

// Hex digits a..b (0..15) in either case.
std::string HexClass(int a, int b) {
  std::string out = "[";
  auto digit = [](int d, bool upper) { return static_cast<char>(d < 10 ? '0' + d : (upper ? 'A' : 'a') + d - 10); };
  const int da = a, db = std::min(b, 9);
  if (da <= db) out += da == db ? std::string(1, digit(da, false)) : std::string{digit(da, false), '-', digit(db, false)};
  const int la = std::max(a, 10), lb = b;
  if (la <= lb) {
    for (bool upper : {false, true}) {
      out += la == lb ? std::string(1, digit(la, upper)) : std::string{digit(la, upper), '-', digit(lb, upper)};
    }
  }
  return out + "]";
}

std::string HexRange(uint32_t lo, uint32_t hi) {  // 4 hex digits in [lo, hi]
  std::vector<DigitSeq> seqs;
  FixedWidth(lo, hi, 4, 16, {}, &seqs);
  std::vector<std::string> alts;
  for (const DigitSeq& s : seqs) {
    std::string a;
    for (auto [x, y] : s) a += (a.empty() ? "" : " ") + HexClass(x, y);
    alts.push_back(a);
  }
  return Join(alts);
}

// Digits of the non-negative integers in [lo, hi] (hi absent = unbounded), no leading zeros.
std::string NonNegative(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<std::string> alts;
  auto digits = [](uint64_t v) { return static_cast<int>(std::to_string(v).size()); };
  const int lo_len = digits(lo), hi_len = hi ? digits(*hi) : lo_len;
  uint64_t pow = 1;
  for (int i = 1; i < lo_len; ++i) pow *= 10;
  for (int len = lo_len; len <= hi_len; ++len, pow *= 10) {
    const uint64_t a = std::max(lo, len == 1 ? 0 : pow);
    const uint64_t b = (hi && len == hi_len) ? *hi : pow * 10 - 1;
    if (a > b) continue;
    std::vector<DigitSeq> seqs;
    FixedWidth(a, b, len, 10, {}, &seqs);
    for (const DigitSeq& s : seqs) {
      std::string alt;
      for (auto [x, y] : s) alt += (alt.empty() ? "" : " ") + DecClass(x, y);
      alts.push_back(alt);
    }
    if (len == 19) break;  // uint64 digits end here
  }
  if (!hi) alts.push_back("[1-9] [0-9]{" + std::to_string(lo_len) + ",}");  // longer than lo
  return Join(alts);
}

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c < 0x80) AppendEscaped(out, c, /*in_class=*/false);  // ASCII: as a code point
    else out += static_cast<char>(c);  // UTF-8 bytes as they are
  }
  return out + "\"";
}

std::string GbnfClass(const std::vector<CharRange>& set) {
  std::string out = "[";
  for (CharRange r : set) {
    AppendEscaped(out, r.lo, true);
    if (r.hi != r.lo) {
      out += '-';
      AppendEscaped(out, r.hi, true);
    }
  }
  return out + "]";
}

std::string JsonCharExpr(const std::vector<CharRange>& set, bool canonical) {
  std::vector<std::string> alts;
  std::vector<CharRange> raw;
  for (CharRange r : Intersect(set, 0x20, 0x10FFFF)) {  // raw: all but controls, " and backslash
    for (uint32_t ex : {0x22u, 0x5Cu}) {
      if (r.lo <= ex && ex <= r.hi) {
        if (r.lo < ex) raw.push_back({r.lo, ex - 1});
        r.lo = ex + 1;
      }
    }
    if (r.lo <= r.hi) raw.push_back(r);
  }
  if (!raw.empty()) alts.push_back(GbnfClass(raw));
  static const std::pair<uint32_t, const char*> kShort[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'/', "\"\\\\/\""},
                                                           {8, "\"\\\\b\""}, {12, "\"\\\\f\""}, {10, "\"\\\\n\""},
                                                           {13, "\"\\\\r\""}, {9, "\"\\\\t\""}};
  for (auto [cp, lit] : kShort) {
    if (Contains(set, cp)) alts.push_back(lit);
  }
  // \uXXXX for BMP code points but the surrogates: a lone surrogate escape is not a character
  // (RFC 8259 leaves it undefined; strict parsers such as nlohmann's refuse the document).
  std::vector<CharRange> escaped = Intersect(set, 0, 0xD7FF);
  for (CharRange r : Intersect(set, 0xE000, 0xFFFF)) escaped.push_back(r);
  if (canonical) {  // \u only for controls without a short form, and non-ASCII
    std::vector<CharRange> keep;
    for (auto [lo, hi] : {std::pair<uint32_t, uint32_t>{0, 7}, {11, 11}, {14, 0x1F}, {0x80, 0xFFFF}}) {
      for (CharRange r : Intersect(escaped, lo, hi)) keep.push_back(r);
    }
    escaped = keep;
  }
  for (CharRange r : escaped) alts.push_back("\"\\\\u\" " + HexRange(r.lo, r.hi));
  auto pair = [&](uint32_t hlo, uint32_t hhi, uint32_t llo, uint32_t lhi) {
    alts.push_back("\"\\\\u\" " + HexRange(0xD800 + hlo, 0xD800 + hhi) + " \"\\\\u\" " + HexRange(0xDC00 + llo, 0xDC00 + lhi));
  };
  for (CharRange r : Intersect(set, 0x10000, 0x10FFFF)) {  // surrogate pairs: partial, full, partial blocks
    const uint32_t lo = r.lo - 0x10000, hi = r.hi - 0x10000;
    uint32_t hl = lo >> 10, hh = hi >> 10;
    if (hl == hh) {
      pair(hl, hl, lo & 0x3FF, hi & 0x3FF);
      continue;
    }
    if ((lo & 0x3FF) != 0) pair(hl, hl, lo & 0x3FF, 0x3FF), ++hl;
    if ((hi & 0x3FF) != 0x3FF) pair(hh, hh, 0, hi & 0x3FF), --hh;
    if (hl <= hh) pair(hl, hh, 0, 0x3FF);
  }
  return Join(alts);
}

namespace {

// The code point at utf8[*i] (advancing *i), as JsonStringLiteral decodes.
uint32_t NextCodePoint(std::string_view utf8, size_t* i) {
  const auto c = static_cast<unsigned char>(utf8[*i]);
  uint32_t cp = c;
  int len = 1;
  if (c >= 0xF0) {
    cp = c & 0x07, len = 4;
  } else if (c >= 0xE0) {
    cp = c & 0x0F, len = 3;
  } else if (c >= 0xC0) {
    cp = c & 0x1F, len = 2;
  }
  for (int k = 1; k < len && *i + k < utf8.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(utf8[*i + k]) & 0x3F);
  *i += len;
  return cp;
}

bool RawAscii(uint32_t cp) { return cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\'; }

// Code points as GBNF: printable ASCII runs as one literal, the rest in their canonical encodings.
class PieceWriter {
 public:
  explicit PieceWriter(std::string* out) : out_(out) {}
  void Add(uint32_t cp) {
    if (RawAscii(cp)) {
      run_ += static_cast<char>(cp);
      return;
    }
    Flush();
    *out_ += " " + JsonCharExpr({{cp, cp}}, /*canonical=*/true);
  }
  void Flush() {
    if (!run_.empty()) *out_ += " " + GbnfLiteral(run_);
    run_.clear();
  }

 private:
  std::string* out_;
  std::string run_;
};

}  // namespace

std::string JsonStringLiteral(std::string_view utf8) {
  std::string out = "\"\\\"\"";
  PieceWriter w(&out);
  for (size_t i = 0; i < utf8.size();) w.Add(NextCodePoint(utf8, &i));
  w.Flush();
  return out + " \"\\\"\"";
}

std::string JsonStringLiteralTrie(const std::vector<std::string>& utf8_values, const RuleDefiner& define) {
  struct Node {
    std::map<uint32_t, int32_t> kids;
    bool end = false;  // a value ends here
  };
  std::vector<Node> trie(1);
  for (const std::string& v : utf8_values) {
    int32_t n = 0;
    for (size_t i = 0; i < v.size();) {
      const uint32_t cp = NextCodePoint(v, &i);
      auto [it, added] = trie[n].kids.emplace(cp, static_cast<int32_t>(trie.size()));
      if (added) trie.emplace_back();
      n = it->second;
    }
    trie[n].end = true;
  }
  const std::string close = "\"\\\"\"";
  // A rule per branch point (the root, a node with several ways on, or an end with more after
  // it); unary chains between them are written inline. Children have larger indices than their
  // parents, so walking the nodes backwards defines every rule before its first use, and each
  // node is written once: linear in the values' total length, with no recursion.
  auto leaf = [&](int32_t n) { return trie[n].end && trie[n].kids.empty(); };
  auto branch = [&](int32_t n) { return n == 0 || (!leaf(n) && (trie[n].end || trie[n].kids.size() != 1)); };
  std::vector<std::string> name(trie.size());
  for (int32_t b = static_cast<int32_t>(trie.size()) - 1; b >= 0; --b) {
    if (!branch(b)) continue;
    std::string body;
    if (trie[b].end) body = close;
    for (const auto& [cp, kid] : trie[b].kids) {
      std::string alt;
      PieceWriter w(&alt);
      w.Add(cp);
      int32_t m = kid;
      while (!branch(m) && !leaf(m)) {
        const auto& [next_cp, next] = *trie[m].kids.begin();
        w.Add(next_cp);
        m = next;
      }
      w.Flush();
      alt += " " + (leaf(m) ? close : name[m]);
      body += (body.empty() ? "" : " | ") + alt.substr(1);
    }
    name[b] = define("enum-str", body);
  }
  return "\"\\\"\" " + name[0];
}

std::string IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) throw SchemaError("minimum above maximum");
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) {  // the non-negative part
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    alts.push_back(NonNegative(a, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
  }
  if (!lo || *lo < 0) {  // the negative part, as "-" and the magnitude
    const uint64_t a = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> b;
    if (lo) b = static_cast<uint64_t>(-(*lo + 1)) + 1;
    alts.push_back("\"-\" " + NonNegative(a, b));
  }
  return Join(alts);
}

// y = I + f >= 0 with I an integer and f a fraction in [0, 1): y in (lo|[lo, hi]|) with
// integer bounds, as "I" and an optional fraction of the right kind.
static std::string NonNegativeDecimal(int64_t lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl) {
  static const char* kAnyFrac = "(\".\" [0-9]+)?";
  static const char* kNonZeroFrac = "\".\" [0-9]* [1-9] [0-9]*";
  static const char* kZeroFrac = "(\".\" \"0\"+)?";
  std::vector<std::string> alts;
  const int64_t any_lo = lo + (lo_excl ? 1 : 0);  // I with any fraction: any_lo <= I <= hi - 1
  if (!hi || any_lo <= *hi - 1) {
    alts.push_back(IntegerRange(any_lo, hi ? std::optional<int64_t>(*hi - 1) : std::nullopt) + " " + kAnyFrac);
  }
  if (lo_excl && (!hi || lo < *hi)) alts.push_back(IntegerRange(lo, lo) + " " + kNonZeroFrac);
  if (hi && !hi_excl && *hi >= any_lo) alts.push_back(IntegerRange(*hi, *hi) + " " + kZeroFrac);
  return Join(alts);
}

std::string NumberRange(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl) {
  std::vector<std::string> alts;
  // x >= 0 part: clamp the lower bound to 0 (inclusive).
  if (!hi || *hi > 0 || (*hi == 0 && !hi_excl)) {
    int64_t l = 0;
    bool le = false;
    if (lo && *lo >= 0) l = *lo, le = lo_excl;
    alts.push_back(NonNegativeDecimal(l, le, hi, hi_excl));
  }
  // x < 0 part: x = -y, y > 0; y's bounds are the negated, swapped ones.
  if (!lo || *lo < 0) {
    int64_t l = 0;
    bool le = true;  // y > 0
    if (hi && *hi < 0) l = -*hi, le = hi_excl;
    std::optional<int64_t> h;
    if (lo) h = -*lo;
    alts.push_back("\"-\" " + NonNegativeDecimal(l, le, h, lo_excl));
  }
  return Join(alts);
}

std::string FormatBody(std::string_view format) {
  static const std::string kD31 = "(\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
  static const std::string kD30 = "(\"0\" [1-9] | [12] [0-9] | \"30\")";
  static const std::string kD28 = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
  static const std::string kYear = "([1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9])";
  static const std::string kDiv4 = "(\"0\" [48] | [2468] [048] | [13579] [26])";  // 04..96, not 00
  static const std::string kLeap = "([0-9]{2} " + kDiv4 + " | " + kDiv4 + " \"00\")";
  static const std::string kDate = "(" + kYear + " \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" " + kD31 +
                                   " | (\"0\" [469] | \"11\") \"-\" " + kD30 + " | \"02-\" " + kD28 + ") | " + kLeap +
                                   " \"-02-29\")";
  static const std::string kHour = "([01] [0-9] | \"2\" [0-3])";
  static const std::string kTime = "(" + kHour + " \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]+)? ([zZ] | [+\\-] " +
                                   kHour + " \":\" [0-5] [0-9]))";
  static const std::string kHex = "[0-9a-fA-F]";
  static const std::string kOctet = "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])";
  // RFC 3986 URI / URI-reference without IP-literal hosts ("[::1]"): narrower, never looser.
  static const std::string kPct = "\"%\" [0-9A-Fa-f] [0-9A-Fa-f]";
  static const std::string kPchar = "([A-Za-z0-9\\-._~!$&'()*+,;=:@] | " + kPct + ")";
  static const std::string kAuthority = "((([A-Za-z0-9\\-._~!$&'()*+,;=:] | " + kPct + ")* \"@\")? ([A-Za-z0-9\\-._~!$&'()*+,;=] | " +
                                        kPct + ")* (\":\" [0-9]*)?)";
  static const std::string kAbempty = "(\"/\" " + kPchar + "*)*";
  static const std::string kAbsolute = "(\"/\" (" + kPchar + "+ " + kAbempty + ")?)";
  static const std::string kRootless = "(" + kPchar + "+ " + kAbempty + ")";
  static const std::string kNoScheme = "(([A-Za-z0-9\\-._~!$&'()*+,;=@] | " + kPct + ")+ " + kAbempty + ")";
  static const std::string kTail = "(\"?\" (" + kPchar + " | [/?])*)? (\"#\" (" + kPchar + " | [/?])*)?";
  static const std::string kUri = "([A-Za-z] [A-Za-z0-9+\\-.]* \":\" (\"//\" " + kAuthority + " " + kAbempty + " | " + kAbsolute +
                                  " | " + kRootless + " | \"\") " + kTail + ")";
  static const std::string kRelative = "((\"//\" " + kAuthority + " " + kAbempty + " | " + kAbsolute + " | " + kNoScheme +
                                       " | \"\") " + kTail + ")";
  if (format == "uri") return kUri;
  if (format == "uri-reference") return "(" + kUri + " | " + kRelative + ")";
  if (format == "date") return kDate;
  if (format == "time") return kTime;
  if (format == "date-time") return "(" + kDate + " [tT] " + kTime + ")";
  if (format == "uuid") return "(" + kHex + "{8} \"-\" " + kHex + "{4} \"-\" " + kHex + "{4} \"-\" " + kHex + "{4} \"-\" " + kHex + "{12})";
  if (format == "ipv4") return "(" + kOctet + " \".\" " + kOctet + " \".\" " + kOctet + " \".\" " + kOctet + ")";
  // Conservative: validators accept any text with an "@"; this is a common address shape.
  if (format == "email") return "([A-Za-z0-9._%+\\-]+ \"@\" [A-Za-z0-9\\-]+ (\".\" [A-Za-z0-9\\-]+)+)";
  return "";
}

}  // namespace radixlm::grammar::schema_internal
