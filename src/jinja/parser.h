// Template source -> statements (internal to the jinja module). The lexer applies the
// environment's whitespace rules (trim_blocks, lstrip_blocks, "-" / "+" modifiers, one trailing
// newline dropped) so the renderer only concatenates. Throws JinjaError{"TemplateSyntaxError"}.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace radixlm::jinja {

StmtList ParseTemplate(std::string_view source);

}  // namespace radixlm::jinja
