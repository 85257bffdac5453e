// What jinja2's compiler decides about a parsed template before it runs (internal to the jinja
// module), applied to radixlm's tree after parsing:
//
// - Filter and test names. jinja2 refuses a template naming a filter or test its environment
//   lacks ("No filter named 'x'." TemplateAssertionError) at compile time, whether or not the
//   expression ever runs - except inside an if statement's conditions and bodies and an inline
//   if's operands (its "soft frames"), where the error waits until the name is used. A for
//   loop's filter and body, a macro, a set block and a generation block open frames that are
//   not soft, even inside an if. Names jinja2 has but radixlm does not implement are left to
//   fail when used (a template that never reaches them still renders).
// - Lazy loop filters. `for x in xs if cond` hands jinja2's loop a generator: each item's
//   condition is evaluated when the loop reaches it, after the bodies before it ran (a body
//   that sets a namespace attribute the condition reads changes which items follow). The
//   renderer does the same when the body cannot look ahead; when it reads loop.length, last,
//   revindex, revindex0 or nextitem (or hands `loop` on whole), every condition is evaluated
//   before the first body (Stmt::lazy_filter false), as jinja2 does when length is read first.
#pragma once

#include "jinja/ast.h"

namespace radixlm::jinja {

// Raises JinjaError (TemplateAssertionError) for a name jinja2 would refuse; marks loops.
void AnalyzeTemplate(StmtList& body);

}  // namespace radixlm::jinja
