// JSON Schema -> GBNF, exact or refused.
//
// The grammar accepts a serialisation of an instance iff the instance validates, up to the
// deliberate narrowings listed here (each rejects some valid texts, none accepts an invalid one):
//   - object members come in the order of `properties` (schema order; optional ones may be
//     skipped), then any additional members; no duplicate declared members;
//   - whitespace: at most `" "`, or 1-2 newlines and up to 20 spaces/tabs, after `{ [ , :` and
//     each value, and before `:` (llama.cpp's `space`; compact and Python json.dumps text fit);
//   - literals (enum, const, property names) are matched in their canonical encoding (printable
//     ASCII raw; other characters raw or as \u escapes); additional property names take no
//     escapes; lone surrogate escapes are refused; an integer is written without fraction or
//     exponent; numbers with bounds take no exponent.
// Semantics follow JSON Schema (draft 4 to 2020-12), read per the draft `$schema` names
// (2020-12 when absent): a keyword the declared draft does not have is ignored as that draft's
// validators ignore it (draft 4: const, contains, propertyNames, if/then/else; up to draft 7:
// dependentRequired / dependentSchemas, unevaluated*, prefixItems; 2019-09 on: dependencies),
// tuples are `items` arrays up to 2019-09 and `prefixItems` in 2020-12 (an `items` array there
// is refused), draft 4's boolean exclusiveMinimum / exclusiveMaximum are honoured. An absent
// `type` allows every type (a bare `properties` does not make the value an object), an absent
// `additionalProperties` allows any extra member, tuples allow shorter arrays and (unless
// closed) extra items, unknown keywords and annotations (title, description, default,
// examples, $comment, deprecated, readOnly, writeOnly, $id, ...) constrain nothing; -0 is
// accepted wherever 0 is. `format` is checked for date, time, date-time, uuid, email (a
// conservative address form), idn-email, ipv4, uri, uri-reference (RFC 3986 without IP-literal
// hosts) in every draft; other standard formats are refused (they constrain when a validator
// checks formats), non-standard ones ("int32", "double", ...) are annotations.
// Also expressed exactly: propertyNames (type, enum, const, pattern, min/maxLength), min /
// maxProperties (counted along the member chain), patternProperties whose patterns share one
// schema beside additionalProperties false, patterns every name matches (".*", "^.*$", ""),
// multipleOf of integers by a whole divisor up to 1000 (a remainder automaton; with bounds:
// the multiples enumerated), dependencies / dependentRequired / dependentSchemas (up to 3).
// A keyword that cannot be expressed exactly is an error naming it (InvalidArgument
// "json schema: <path>: unsupported keyword 'x' ..."): if/then/else, not (except of {} or a
// required list), other patternProperties forms, unevaluated*, contains, uniqueItems (true),
// multipleOf of numbers, oneOf whose alternatives are neither provably disjoint nor all
// required lists, allOf that cannot be merged, remote $ref, regex features outside the
// supported subset (lookaround, backreferences, \b), and bounds that cannot be written as a
// grammar (non-integer number bounds, counts above 2000). A schema no value satisfies is an
// error; inside an optional member, a union alternative, a type list or an array's optional
// tail it drops out. docs/grammar.md lists everything; fuzz/schema_diff.py checks it against
// python3-jsonschema on random schemas.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace radixlm::grammar {

struct JsonSchemaOptions {
  // Every rule name gets this prefix; the start rule is `<prefix>root`. Lets the grammar be
  // embedded in a larger GBNF (a tool call's arguments inside a model's call markers).
  std::string rule_prefix;
};

core::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_json, const JsonSchemaOptions& options = {});
// The same, parsed (one parse instead of the check's and the caller's); *gbnf gets the text.
core::StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json, std::string* gbnf,
                                            const JsonSchemaOptions& options = {});

// Any JSON value whose top level is an object (OpenAI's response_format {"type": "json_object"}).
std::string JsonObjectGbnf(const JsonSchemaOptions& options = {});

}  // namespace radixlm::grammar
