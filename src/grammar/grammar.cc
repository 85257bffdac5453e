// Grammar helpers: code-point sets of symbols, UTF-8 encoding, and the GBNF printer.
#include <algorithm>
#include <cstdio>

#include "grammar/grammar.h"

#include "core/escape.h"
#include "core/utf8.h"

namespace radixlm::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged ranges with the surrogate block removed.
std::vector<CharRange> Normalize(std::vector<CharRange> r) {
  std::vector<CharRange> cut;
  for (CharRange x : r) {
    if (x.lo > x.hi) continue;
    x.hi = std::min(x.hi, kMaxCodePoint);
    if (x.lo > x.hi) continue;
    if (x.lo < 0xD800 && x.hi >= 0xD800) {
      cut.push_back({x.lo, 0xD7FF});
      x.lo = 0xD800;
    }
    if (x.lo >= 0xD800 && x.lo <= 0xDFFF) {
      if (x.hi <= 0xDFFF) continue;
      x.lo = 0xE000;
    }
    cut.push_back(x);
  }
  std::sort(cut.begin(), cut.end(), [](CharRange a, CharRange b) { return a.lo < b.lo; });
  std::vector<CharRange> out;
  for (CharRange x : cut) {
    if (!out.empty() && x.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, x.hi);
    } else {
      out.push_back(x);
    }
  }
  return out;
}


}  // namespace

void AppendEscaped(std::string& out, uint32_t cp, bool in_class) {
  char buf[16];
  if (cp == '\\' || cp == '"' || (in_class && (cp == ']' || cp == '[' || cp == '-'))) {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (const char* e = core::ShortEscape(cp)) {
    out += e;
  } else if (cp < 0x20 || cp == 0x7F || (in_class && cp == '^')) {  // a leading ^ would negate
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    out += buf;
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    out += buf;
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
    out += buf;
  }
}

std::vector<CharRange> SymbolCodePoints(const Symbol& s) {
  if (s.any) return Normalize({{0, kMaxCodePoint}});
  std::vector<CharRange> set = Normalize(s.ranges);
  if (!s.negated) return set;
  std::vector<CharRange> out;
  uint32_t next = 0;
  for (CharRange x : set) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return Normalize(out);
}

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  core::AppendUtf8(cp, &out);
  return out;
}

std::string Grammar::ToGbnf() const {
  std::string out;
  auto print_seq = [&](const std::vector<Symbol>& seq) {
    bool first = true;
    for (size_t i = 0; i < seq.size(); ++i) {
      const Symbol& s = seq[i];
      if (!first) out += ' ';
      first = false;
      if (s.kind == Symbol::Kind::kRule) {
        out += rules[s.rule].name;
      } else if (s.literal >= 0) {  // a run of one literal's code points prints as one literal
        out += '"';
        const int32_t lit = s.literal;
        for (; i < seq.size() && seq[i].kind == Symbol::Kind::kChars && seq[i].literal == lit; ++i) {
          AppendEscaped(out, seq[i].ranges[0].lo, false);
        }
        --i;
        out += '"';
      } else if (s.any) {
        out += '.';
      } else {
        out += s.negated ? "[^" : "[";
        for (CharRange r : s.ranges) {
          AppendEscaped(out, r.lo, true);
          if (r.hi != r.lo) {
            out += '-';
            AppendEscaped(out, r.hi, true);
          }
        }
        out += ']';
      }
    }
  };
  for (const Rule& r : rules) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      out += a == 0 ? " " : " | ";
      if (r.alternatives[a].empty()) out += "\"\"";  // a bare `|` at a line end would continue on the next line
      print_seq(r.alternatives[a]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace radixlm::grammar
