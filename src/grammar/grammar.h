// A context-free grammar over Unicode code points, and its GBNF parser and printer.
//
// GBNF is llama.cpp's grammar syntax (grammars/README.md; the parser follows
// llama_grammar_parser in src/llama-grammar.cpp): `name ::= alternates` rules, `|`, `( )`,
// "literals" and [classes] with the escapes \xHH \uHHHH \UHHHHHHHH \t \r \n \\ \" \[ \] \-,
// negated classes [^...], `.`, the repetitions * + ? {m} {m,} {m,n} (rewritten into auxiliary
// rules exactly as llama.cpp does, with its limit of 2000: a minimum above it is an error, a
// maximum above it means unbounded), and `#` comments. Differences from llama.cpp, all refusals:
// a rule defined twice is an error (llama.cpp keeps one silently), and the token terminals
// `<...>` (which need a vocabulary at parse time) are not supported; a quoted literal whose text
// is a special token's text lets the matcher accept that special token there (matcher.h).
//
// Errors are Status messages naming the position as llama.cpp does ("expecting ')' at ..."),
// prefixed by line and column. A grammar without the root rule, a reference to an undefined
// rule and left recursion (also through nullable prefixes) are errors.
//
// The Grammar is a plain value (copyable, immutable after parsing); ByteGrammar (pda.h) lowers
// it to bytes for matching.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace radixlm::grammar {

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive code points
};

// One item of a sequence: a set of code points, or a reference to a rule.
struct Symbol {
  enum class Kind : uint8_t { kChars, kRule };
  Kind kind = Kind::kChars;
  bool negated = false;            // kChars: [^...]
  bool any = false;                // kChars: `.` (any code point)
  std::vector<CharRange> ranges;   // kChars, as written
  int32_t rule = -1;               // kRule
  // kChars from a quoted literal: which literal and the UTF-8 byte offset of this code point in
  // its text (lets a special token whose text lies inside the literal be accepted whole).
  int32_t literal = -1, literal_offset = 0;
};

struct Rule {
  std::string name;
  std::vector<std::vector<Symbol>> alternatives;  // an empty alternative matches ""
};

struct Grammar {
  std::vector<Rule> rules;
  int32_t root = -1;
  std::vector<std::string> literals;  // UTF-8 text of each quoted literal (Symbol::literal)

  // GBNF text that parses back to an equivalent grammar (rules in id order, the auxiliary
  // rules of groups and repetitions printed as their own rules).
  std::string ToGbnf() const;
};

// The largest repetition count, as llama.cpp's MAX_REPETITION_THRESHOLD.
inline constexpr uint64_t kMaxRepetition = 2000;

// What a grammar may weigh. A grammar comes from a request (GBNF, a schema, tools), so every
// pass over it is bounded by these, and past them ParseGbnf refuses with an error naming the
// bound (a client's 400), never a crash or a stall. The parser recurses once per nesting level
// of ( ) groups, so max_nesting bounds its stack; every later pass (nullable rules, left
// recursion, lowering, shortest derivations) is iterative and linear in the symbols.
// The largest JSONSchemaBench schema compiles to 2,858 rules, 14,467 symbols and 131 KB of
// GBNF, far inside these.
struct GrammarLimits {
  size_t max_text_bytes = 2u << 20;  // GBNF text
  int max_nesting = 128;             // ( ) groups inside each other
  size_t max_rules = 100000;         // rules, auxiliary ones (groups, repetitions) included
  size_t max_symbols = 1000000;      // symbols over all alternatives, repetitions expanded
};

// Parses GBNF text. `root` names the start rule.
core::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root = "root", const GrammarLimits& limits = {});

// The code points a kChars symbol matches, as sorted disjoint ranges (negation and `.` applied,
// surrogates D800-DFFF never included: they cannot appear in UTF-8 text).
std::vector<CharRange> SymbolCodePoints(const Symbol& s);

// Appends code point cp as GBNF text: inside a quoted literal, or (in_class) inside [...], with
// the escapes the GBNF parser reads back (controls, quote, backslash; ] [ - ^ in classes).
void AppendEscaped(std::string& out, uint32_t cp, bool in_class);

// UTF-8 encoding of one code point (REQUIRES: cp <= 0x10FFFF).
std::string EncodeUtf8(uint32_t cp);

}  // namespace radixlm::grammar
