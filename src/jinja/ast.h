// The parsed form of a template (internal to the jinja module): expressions and statements as
// tagged nodes. The parser (parser.cc) builds them, the renderer (render.cc) walks them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace radixlm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value...
    kAttr,       // a . name
    kSubscript,  // a [ b ]
    kSlice,      // a [ b? : c? : d? ]: items = {a, start, stop, step}, null when absent
    kCall,       // a ( args )
    kFilter,     // a | name ( args )
    kTest,       // a is [not] name ( args ); negate
    kUnary,      // op a   ("not", "-", "+")
    kBinary,     // a op b (arithmetic, comparison, "in", "not in", "~")
    kAnd,
    kOr,
    kCondition,  // items = {then, cond, else (may be null)}
  };
  Kind kind;
  int line = 0;
  int depth = 1;          // of the subtree (the parser bounds it: evaluation recurses this deep)
  Value value;            // literal
  std::string name;       // name, attribute, filter, test, operator
  bool negate = false;    // test
  std::vector<ExprPtr> items;
  // Call, filter and test arguments: positional, then keyword (name, expr).
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

// An assignment or loop target: names (one, or a tuple), or namespace.attribute.
struct Target {
  std::vector<std::string> names;
  std::string attribute;  // set ns.attr: names = {ns}
};

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kGeneration };
  Kind kind;
  int line = 0;
  std::string text;                       // text; macro name
  ExprPtr expr;                           // output; set value; for iterable
  Target target;                          // set / for
  ExprPtr filter;                         // for ... if filter
  bool lazy_filter = false;               // for: the filter runs item by item (analyze.h)
  // if: (condition, body) pairs, a null condition for else.
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  StmtList body, else_body;               // for / set block / macro / generation
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro (default may be null)
};

}  // namespace radixlm::jinja
