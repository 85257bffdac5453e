// A Jinja2 template engine for chat templates: the model's own template (GGUF
// tokenizer.chat_template, tokenizer_config.json's chat_template, chat_template.jinja) rendered
// as Hugging Face transformers' apply_chat_template renders it, byte for byte. Written by hand
// because no Debian package provides a C++ Jinja engine (inja, minja and Jinja2Cpp are not
// packaged); Debian's python3-jinja2 is the reference its tests compare against.
//
// Grammar (the subset of Jinja2 3.1 real chat templates use; anything else is a
// TemplateSyntaxError, never a silent difference):
//   template   := (text | "{{" expr "}}" | "{%" stmt "%}" | "{#" comment "#}")*
//     delimiters take "-" (strip the whitespace on that side) or "+" (keep it, disable lstrip)
//   stmt       := if expr / elif expr / else / endif
//               | for target in expr [if expr] / else / endfor      (loop.index, index0, revindex,
//                 revindex0, first, last, length, previtem, nextitem, cycle(...))
//               | set target = expr | set name / endset | macro name(params) / endmacro
//               | break | continue | raw / endraw | generation / endgeneration
//   target     := name ("," name)* | name "." name
//   expr       := or ["if" or ["else" expr]]
//   or := and ("or" and)*   and := not ("and" not)*   not := "not" not | compare
//   compare    := math1 (("=="|"!="|"<"|">"|"<="|">="|"in"|"not in") math1)*
//   math1 := concat (("+"|"-") concat)*   concat := math2 ("~" math2)*
//   math2 := pow (("*"|"/"|"//"|"%") pow)*   pow := unary ("**" unary)*
//   unary      := ("-"|"+") unary | postfix ("|" filter)* ("is" ["not"] test)*
//   postfix    := primary ("." name | "[" subscript-or-slice "]" | "(" args ")")*
//   primary    := string+ | number | true/false/none (any case) | name | "(" expr-or-tuple ")"
//               | "[" list "]" | "{" dict "}"
// Environment (transformers'): trim_blocks, lstrip_blocks, loop controls, keep_trailing_newline
// off, autoescape off, the sandbox's immutability (list.append and the like are undefined).
// Variables follow Jinja2's scoping: `set` inside a for body is local to that iteration (hence
// namespace()), macros see the template's top level, not their caller's variables.
// Globals: range, namespace, dict, raise_exception(msg) (a TemplateError with msg),
// strftime_now(fmt) (RenderOptions::now or the clock). Filters and tests are tables
// (builtins.cc): one row each.
//
// Errors carry the Python exception class a Jinja2 user would see (JinjaError::kind):
// TemplateSyntaxError at parse, and TemplateAssertionError for a filter or test name jinja2's
// compiler would refuse (analyze.h: outside an if, even in code that never runs);
// TemplateError (raise_exception), UndefinedError, TypeError, ValueError, ZeroDivisionError at
// render. A loop's `if` filter runs item by item as the loop reaches it (analyze.h).
//
// Bounds (a chat template comes with a model file from the internet; the variables from a
// client): parsing refuses blocks nested over 64 deep and expressions over 256 (a
// TemplateSyntaxError; parsing is linear in the text). A render is bounded by RenderLimits:
// operations (expressions evaluated, loop iterations, values walked), bytes of strings made
// (and the output), the size of one string, and the depth of macro calls and of values walked
// (repr, tojson, comparisons). Integers are 64-bit and checked: what Python would compute as a
// larger integer is an error here. Each bound, when passed, is a TemplateError naming it;
// Python's own errors (ZeroDivisionError, ...) stay as Python raises them.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "jinja/value.h"

namespace radixlm::jinja {

struct Stmt;

struct RenderLimits {
  int64_t max_ops = 20'000'000;               // about a second of rendering
  int64_t max_bytes = int64_t{128} << 20;     // all strings made or copied, the output included
  int64_t max_string = int64_t{32} << 20;     // one string (the output included)
  int max_depth = 200;                        // macro calls and nested values walked
};

struct RenderOptions {
  // strftime_now's time (local time, as Python's datetime.now()); unset: the clock.
  std::optional<std::time_t> now;
  RenderLimits limits;
};

class Template {
 public:
  // Parses a template. Error: a TemplateSyntaxError naming the line.
  static core::StatusOr<Template> Parse(std::string_view source);

  // Renders with the given variables (a JSON object; key order is kept, as Python dicts keep
  // it). On failure, error->kind / message say what the template raised (the Status's message
  // is "<kind>: <message>").
  core::StatusOr<std::string> Render(const nlohmann::ordered_json& variables, const RenderOptions& options = {},
                                     JinjaError* error = nullptr) const;

  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
  ~Template();

 private:
  Template();
  std::unique_ptr<std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace radixlm::jinja
