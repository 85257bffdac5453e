// Internal to the JSON Schema compiler: GBNF expressions for JSON text pieces. Each function
// returns one GBNF expression (parenthesised when it has alternatives) matching exactly the
// JSON texts described, and throws SchemaError for what it cannot express.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace radixlm::grammar::schema_internal {

// A refusal: the message names the keyword. Turned into a Status by JsonSchemaToGbnf.
struct SchemaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A (sub)schema no instance satisfies: an optional member or a union alternative with it drops out.
struct Unsatisfiable : SchemaError {
  using SchemaError::SchemaError;
};

// A GBNF literal "..." of raw UTF-8 text.
std::string GbnfLiteral(std::string_view text);
// A GBNF class [...] of code point ranges (REQUIRES: non-empty).
std::string GbnfClass(const std::vector<CharRange>& set);

// One character of a JSON string body whose code point lies in `set`, in every encoding JSON
// allows: raw (when allowed raw), the short escapes, \uXXXX (hex in either case; never a lone
// surrogate D800-DFFF) and surrogate
// pairs for code points above U+FFFF. Exact. An empty set gives an unmatchable expression.
// canonical: only the encodings a serialiser writes (raw when allowed, short escapes, \u for
// other controls and for non-ASCII), a subset of the exact set.
std::string JsonCharExpr(const std::vector<CharRange>& set, bool canonical = false);
// A JSON string literal (with quotes) whose decoded value is `utf8`, in its canonical encodings
// (printable ASCII raw; `"` `\` and controls escaped; other characters raw or \u-escaped).
std::string JsonStringLiteral(std::string_view utf8);

// The same for a set of values, as one expression: their literals merged into a trie of rules
// (through `define`), so N values sharing prefixes cost rules per branch point and a parser
// state holds one stack per distinct next character, not one per value. REQUIRES: non-empty.
using RuleDefiner = std::function<std::string(const std::string& hint, const std::string& body)>;
std::string JsonStringLiteralTrie(const std::vector<std::string>& utf8_values, const RuleDefiner& define);

// The integers in [lo, hi] (absent = unbounded), written without sign for >= 0 and with "-"
// below; no leading zeros, no "-0".
std::string IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi);
// Decimal numbers (no exponent) in the interval with integer bounds (exclusive when *_excl).
std::string NumberRange(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl);

// The body of a JSON string (between the quotes) whose decoded value matches the ECMAScript
// regular expression `pattern` as JSON Schema's `pattern` does (unanchored search; ^ and $ anchor).
// Character sets become rules through `define` (hint, body) -> rule name, so each is written once.
std::string RegexBody(std::string_view pattern, const RuleDefiner& define);
// The body of a JSON string with `format` (date, time, date-time, uuid, email, ipv4); empty when
// the format is not one of them.
std::string FormatBody(std::string_view format);

}  // namespace radixlm::grammar::schema_internal
