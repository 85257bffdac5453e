#include "jinja/analyze.h"

#include <string>

#include "jinja/builtins.h"

namespace radixlm::jinja {
namespace {

[[noreturn]] void Refuse(const char* kind, const std::string& name) {
  throw JinjaError{"TemplateAssertionError", std::string("No ") + kind + " named '" + name + "'."};
}

// Filter and test names, as jinja2's CodeGenerator._filter_test_common checks them: `soft` is
// its Frame.soft_frame (an if statement's or inline if's frame).
void CheckNames(const Expr& e, bool soft) {
  if (!soft && e.kind == Expr::Kind::kFilter && !Jinja2HasFilter(e.name)) Refuse("filter", e.name);
  if (!soft && e.kind == Expr::Kind::kTest && !Jinja2HasTest(e.name)) Refuse("test", e.name);
  soft = soft || e.kind == Expr::Kind::kCondition;
  for (const auto& x : e.items)
    if (x) CheckNames(*x, soft);
  for (const auto& x : e.args) CheckNames(*x, soft);
  for (const auto& kv : e.kwargs) CheckNames(*kv.second, soft);
}

// Whether `e` reads the loop variable other than through the attributes a loop knows without
// looking ahead (index, index0, first, previtem, depth, depth0, cycle).
bool LooksAhead(const Expr& e) {
  if (e.kind == Expr::Kind::kName && e.name == "loop") return true;
  if (e.kind == Expr::Kind::kAttr && e.items[0]->kind == Expr::Kind::kName && e.items[0]->name == "loop") {
    static const char* const kBehind[] = {"index", "index0", "first", "previtem", "depth", "depth0", "cycle"};
    for (const char* a : kBehind)
      if (e.name == a) return false;
    return true;
  }
  for (const auto& x : e.items)
    if (x && LooksAhead(*x)) return true;
  for (const auto& x : e.args)
    if (LooksAhead(*x)) return true;
  for (const auto& kv : e.kwargs)
    if (LooksAhead(*kv.second)) return true;
  return false;
}

bool LooksAhead(const StmtList& body);

bool LooksAhead(const Stmt& s) {
  if (s.expr && LooksAhead(*s.expr)) return true;
  if (s.filter && LooksAhead(*s.filter)) return true;
  for (const auto& [cond, branch] : s.branches)
    if ((cond && LooksAhead(*cond)) || LooksAhead(branch)) return true;
  for (const auto& p : s.params)
    if (p.second && LooksAhead(*p.second)) return true;
  return LooksAhead(s.body) || LooksAhead(s.else_body);
}

bool LooksAhead(const StmtList& body) {
  for (const auto& s : body)
    if (LooksAhead(*s)) return true;
  return false;
}

void Analyze(StmtList& body, bool soft) {
  for (auto& s : body) {
    if (s->expr) CheckNames(*s->expr, soft);  // output, set value, for iterable: the frame around
    switch (s->kind) {
      case Stmt::Kind::kIf:
        for (auto& [cond, branch] : s->branches) {
          if (cond) CheckNames(*cond, true);
          Analyze(branch, true);
        }
        break;
      case Stmt::Kind::kFor:
        if (s->filter) CheckNames(*s->filter, false);
        s->lazy_filter = s->filter && !LooksAhead(s->body);
        Analyze(s->body, false);
        Analyze(s->else_body, false);
        break;
      case Stmt::Kind::kMacro:
        for (auto& p : s->params)
          if (p.second) CheckNames(*p.second, false);
        Analyze(s->body, false);
        break;
      case Stmt::Kind::kSetBlock:
      case Stmt::Kind::kGeneration: Analyze(s->body, false); break;
      default: break;
    }
  }
}

}  // namespace

void AnalyzeTemplate(StmtList& body) { Analyze(body, false); }

}  // namespace radixlm::jinja
