// ECMAScript regular expressions (JSON Schema `pattern`) -> the GBNF body of a JSON string.
//
// Supported: literals, `.`, classes with ranges and negation, \d \D \w \W \s \S, the escapes
// \t \n \r \f \v \0 \xHH \uHHHH and escaped punctuation, groups ( ) (?: ) (?<name> ), `|`, the
// quantifiers * + ? {n} {n,} {n,m} (lazy forms match the same strings), and ^ / $ at the start /
// end of a top-level alternative. Refused (SchemaError naming the feature): lookaround,
// backreferences, \b \B, \p{..}, anchors elsewhere, counts above 2000. JSON Schema's pattern is a
// search: an alternative without ^ may be preceded by any text, one without $ followed by any.
// Characters are matched on the decoded string, so each set becomes the JSON encodings of its
// code points (canonical ones: raw, short escapes, \u for controls and non-ASCII).
#include <algorithm>

#include "grammar/json_schema_text.h"

namespace radixlm::grammar::schema_internal {
namespace {

constexpr uint32_t kMax = 0x10FFFF;

std::vector<CharRange> Norm(std::vector<CharRange> r) {
  Symbol s;
  s.ranges = std::move(r);
  return SymbolCodePoints(s);
}
std::vector<CharRange> Complement(const std::vector<CharRange>& r) {
  Symbol s;
  s.ranges = r;
  s.negated = true;
  return SymbolCodePoints(s);
}
void Add(std::vector<CharRange>& to, const std::vector<CharRange>& from) { to.insert(to.end(), from.begin(), from.end()); }

const std::vector<CharRange> kDigit = {{'0', '9'}};
const std::vector<CharRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's \s without U+FEFF (which Python's \s, the validators' engine, does not match).
const std::vector<CharRange> kSpace = {{9, 13}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

class Regex {
 public:
  Regex(std::string_view p, const RuleDefiner& define) : p_(p), define_(define) {}

  std::string Translate() {
    std::vector<std::string> alts;
    do {
      bool start = false, end = false;
      if (At() == '^') {
        start = true;
        ++i_;
      }
      std::vector<Item> items;
      std::string body = Concat(/*top=*/true, &end, start, &items);
      const std::string any = "(" + CharRule({{0, kMax}}, "re-any") + ")*";
      if ((!start || !end) && items.empty()) {
        body = start && end ? "\"\"" : any;  // any text (one loop, not two side by side)
      } else if (!start && !end && items.size() == 1 && items[0].one_char && !items[0].quantified) {
        // One character X anywhere: text up to the first X, X, then anything (unambiguous).
        body = "(" + CharRule(Complement(items[0].set), "re-not") + ")* " + items[0].atom + " " + any;
      } else {
        body = (start ? "" : any + " ") + body + (end ? "" : " " + any);
      }
      alts.push_back(body);
    } while (Eat('|'));
    if (i_ != p_.size()) Fail("unbalanced ')'");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

 private:
  // One atom of a sequence with its repetition count [lo, hi] (hi UINT64_MAX: unbounded).
  struct Item {
    std::string atom;
    bool one_char = false;  // matches exactly one character (a subset of re-any), of `set`
    std::vector<CharRange> set;
    uint64_t lo = 1, hi = 1;
    bool quantified = false;
  };

  [[noreturn]] void Fail(const std::string& what) const {
    throw SchemaError("pattern '" + std::string(p_) + "': " + what);
  }
  char At() const { return i_ < p_.size() ? p_[i_] : '\0'; }
  bool Eat(char c) {
    if (At() != c || i_ >= p_.size()) return false;
    ++i_;
    return true;
  }

  std::string CharRule(const std::vector<CharRange>& set, const std::string& hint) {
    return define_(hint, JsonCharExpr(set, /*canonical=*/true));
  }

  std::string Alternation() {
    std::vector<std::string> alts;
    do alts.push_back(Concat(false, nullptr, true)); while (Eat('|'));
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  // A top-level sequence next to the search's implicit any-text: a repeated single character
  // there is absorbed by it (X ⊆ any, so `any* X{lo,hi}` = `any* X{lo}` and the same at the
  // end), which keeps the grammar unambiguous. Without this, `^.+` (= `.+ any*`) leaves two
  // parses of every character and its masks cost ~1000x more. The language is unchanged.
  static void Absorb(std::vector<Item>& items, bool any_before, bool any_after) {
    auto cut = [](Item& it) {
      it.hi = it.lo;
      return it.lo == 0;  // nothing left
    };
    while (any_after && !items.empty() && items.back().one_char && items.back().quantified) {
      if (!cut(items.back())) break;
      items.pop_back();
    }
    while (any_before && !items.empty() && items.front().one_char && items.front().quantified) {
      if (!cut(items.front())) break;
      items.erase(items.begin());
    }
    for (Item& it : items)  // {1} is the atom itself
      if (it.quantified && it.lo == 1 && it.hi == 1) it.quantified = false;
  }

  static std::string Render(const Item& it) {
    if (!it.quantified || (it.lo == 1 && it.hi == 1)) return it.atom;
    std::string q;
    if (it.lo == 0 && it.hi == UINT64_MAX) q = "*";
    else if (it.lo == 1 && it.hi == UINT64_MAX) q = "+";
    else if (it.lo == 0 && it.hi == 1) q = "?";
    else q = "{" + std::to_string(it.lo) + (it.hi == it.lo ? "" : "," + (it.hi == UINT64_MAX ? "" : std::to_string(it.hi))) + "}";
    return "(" + it.atom + ")" + q;
  }

  // A sequence up to `|`, `)` or the end. At the top level a final `$` sets *end; `start`: the
  // top-level alternative began with ^; *out (top level): its items after Absorb.
  std::string Concat(bool top, bool* end, bool start, std::vector<Item>* out_items = nullptr) {
    std::vector<Item> items;
    while (i_ < p_.size() && At() != '|' && At() != ')') {
      if (At() == '$') {
        ++i_;
        if (!top || (i_ < p_.size() && At() != '|')) Fail("'$' is supported only at the end");
        *end = true;
        break;
      }
      if (At() == '^') Fail("'^' is supported only at the start");
      Item it;
      it.atom = Atom(&it.one_char, &it.set);
      Quantifier(&it);
      items.push_back(std::move(it));
    }
    if (top) Absorb(items, !start, !*end);
    std::string out;
    for (const Item& it : items) out += (out.empty() ? "" : " ") + Render(it);
    if (out_items) *out_items = std::move(items);
    return out.empty() ? "\"\"" : "(" + out + ")";
  }

  // Reads {n}, {n,}, {n,m} at i_; false (i_ unchanged) when the brace is a literal.
  bool Braces(uint64_t* lo, uint64_t* hi) {
    size_t j = i_ + 1;
    auto num = [&](uint64_t* v) {
      size_t s = j;
      *v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && j - s < 9) *v = *v * 10 + (p_[j++] - '0');
      return j > s;
    };
    if (!num(lo)) return false;
    *hi = *lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!num(hi)) *hi = UINT64_MAX;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    return true;
  }

  // A quantifier after an atom (a second one is "nothing to repeat" at the next Atom()).
  void Quantifier(Item* it) {
    const char c = At();
    uint64_t lo = 0, hi = 0;
    if (c == '*' || c == '+' || c == '?') {
      lo = c == '+' ? 1 : 0;
      hi = c == '?' ? 1 : UINT64_MAX;
      ++i_;
    } else if (c == '{' && Braces(&lo, &hi)) {
      if (lo > kMaxRepetition || (hi != UINT64_MAX && hi > kMaxRepetition)) Fail("repetition count above 2000");
      if (hi < lo) Fail("repetition {n,m} with m < n");
    } else {
      return;
    }
    Eat('?');  // lazy: matches the same strings
    it->quantified = true;
    it->lo = lo;
    it->hi = hi;
  }

  // *one_char: the atom matches exactly one character, of *set.
  std::string Atom(bool* one_char, std::vector<CharRange>* set) {
    const char c = p_[i_];
    *one_char = c != '(';
    auto chars = [&](std::vector<CharRange> cps, const std::string& hint) {
      *set = cps;
      return CharRule(cps, hint);
    };
    if (c == '(') {
      ++i_;
      if (Eat('?')) {
        if (Eat(':')) {
        } else if (At() == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;  // named group
          if (!Eat('>')) Fail("unterminated group name");
        } else {
          Fail("lookaround and inline flags are not supported");
        }
      }
      std::string inner = Alternation();
      if (!Eat(')')) Fail("missing ')'");
      return inner;
    }
    if (c == '[') return chars(Class(), "re-class");
    if (c == '.') {
      ++i_;
      return chars(Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}), "re-dot");
    }
    if (c == '*' || c == '+' || c == '?') Fail("nothing to repeat");
    if (c == '\\') return chars(Escape(false), "re-char");
    if (c == '{') {
      uint64_t lo, hi;
      if (Braces(&lo, &hi)) Fail("nothing to repeat");
    }
    return chars(Single(Utf8()), "re-char");
  }

  // One UTF-8 code point at i_ as a range {cp, cp} (the second field is filled by the caller).
  uint32_t Utf8() {
    const auto b = static_cast<unsigned char>(p_[i_]);
    const int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? b : b & (0x3F >> (len - 1));
    for (int k = 1; k < len && i_ + k < p_.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + k]) & 0x3F);
    i_ += len;
    return cp;
  }
  std::vector<CharRange> Single(uint32_t cp) { return {{cp, cp}}; }

  uint32_t Hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = At();
      const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) Fail("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  // An escape at i_ (the backslash). In a class, \b is a backspace.
  std::vector<CharRange> Escape(bool in_class) {
    ++i_;
    if (i_ >= p_.size()) Fail("trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return Complement(kDigit);
      case 'w': return kWord;
      case 'W': return Complement(kWord);
      case 's': return Norm(kSpace);
      case 'S': return Complement(kSpace);
      case 't': return Single('\t');
      case 'n': return Single('\n');
      case 'r': return Single('\r');
      case 'f': return Single('\f');
      case 'v': return Single('\v');
      case 'x': return Single(Hex(2));
      case 'u': {
        uint32_t cp = Hex(4);
        if (cp >= 0xD800 && cp <= 0xDBFF && At() == '\\' && i_ + 1 < p_.size() && p_[i_ + 1] == 'u') {
          i_ += 2;
          const uint32_t low = Hex(4);
          if (low < 0xDC00 || low > 0xDFFF) Fail("unpaired surrogate escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        return Single(cp);
      }
      case '0':
        if (At() >= '0' && At() <= '9') Fail("octal escapes are not supported");
        return Single(0);
      case 'b':
        if (in_class) return Single(8);
        Fail("word boundaries (\\b) are not supported");
      default: break;
    }
    if ((c >= '1' && c <= '9')) Fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) Fail(std::string("escape \\") + c + " is not supported");
    --i_;
    return Single(Utf8());  // escaped punctuation or a non-ASCII character: itself
  }

  std::vector<CharRange> Class() {
    ++i_;  // [
    const bool negated = Eat('^');
    std::vector<CharRange> set;
    while (i_ < p_.size() && p_[i_] != ']') {
      std::vector<CharRange> item = p_[i_] == '\\' ? Escape(true) : Single(Utf8());
      const bool single = item.size() == 1 && item[0].lo == item[0].hi;
      if (single && At() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        std::vector<CharRange> upper = p_[i_] == '\\' ? Escape(true) : Single(Utf8());
        if (upper.size() != 1 || upper[0].lo != upper[0].hi) Fail("class range with a class escape");
        if (upper[0].lo < item[0].lo) Fail("class range out of order");
        item[0].hi = upper[0].lo;
      }
      Add(set, item);
    }
    if (!Eat(']')) Fail("missing ']'");
    return negated ? Complement(set) : Norm(set);
  }

  std::string_view p_;
  const RuleDefiner& define_;
  size_t i_ = 0;
};

}  // namespace

std::string RegexBody(std::string_view pattern, const RuleDefiner& define) { return Regex(pattern, define).Translate(); }

}  // namespace radixlm::grammar::schema_internal
