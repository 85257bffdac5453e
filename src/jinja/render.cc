// The renderer: walks the statements with Jinja2's scoping (a frame per for iteration and per
// macro call; if and set do not open one) and evaluates expressions with Python semantics
// (builtins.cc). Template::Parse / Render are here too.
#include <chrono>
#include <ctime>
#include <memory>
#include <string>

#include "jinja/analyze.h"
#include "jinja/builtins.h"
#include "jinja/parser.h"
#include "jinja/template.h"

namespace radixlm::jinja {

namespace {

[[noreturn]] void Raise(const std::string& kind, const std::string& message) { throw JinjaError{kind, message}; }

void NoUndefined(const Value& v) {
  if (v.IsUndefined()) Raise("UndefinedError", v.AsString().empty() ? "value is undefined" : v.AsString());
}

// Variables of one scope; lookups walk to the parent.
struct Frame {
  explicit Frame(std::shared_ptr<Frame> p) : parent(std::move(p)) {}
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get())
      for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it)
        if (it->first == name) return &it->second;
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, val] : vars)
      if (k == name) {
        val = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options) : options_(options) {}

  FramePtr Globals() {
    auto g = std::make_shared<Frame>(nullptr);
    g->Set("range", Value::MakeFunction("range", Range));
    g->Set("namespace", Value::MakeFunction("namespace", [](const CallArgs& a) { return Value::Namespace(KeywordDict(a)); }));
    g->Set("dict", Value::MakeFunction("dict", [](const CallArgs& a) { return Value::MakeDict(KeywordDict(a)); }));
    g->Set("raise_exception", Value::MakeFunction("raise_exception", [](const CallArgs& a) -> Value {
             Raise("TemplateError", a.positional.empty() ? "" : a.positional[0].Str());
           }));
    const RenderOptions opts = options_;
    g->Set("strftime_now", Value::MakeFunction("strftime_now", [opts](const CallArgs& a) {
             const std::time_t t = opts.now ? *opts.now : std::time(nullptr);
             std::tm tm{};
             localtime_r(&t, &tm);
             char buf[256];
             const std::string fmt = a.positional.empty() ? "" : a.positional[0].Str();
             const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
             return Value::String(std::string(buf, n));
           }));
    return g;
  }

  Flow Exec(const StmtList& body, const FramePtr& frame, std::string* out) {
    for (const auto& s : body) {
      const Flow f = ExecOne(*s, frame, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  static Value Range(const CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 3)
      Raise("TypeError", "range expected " + std::string(a.positional.empty() ? "at least 1 argument" : "at most 3 arguments") +
                             ", got " + std::to_string(a.positional.size()));
    for (const Value& v : a.positional)
      if (!v.IsNumber() || v.type() == Value::Type::kFloat)
        Raise("TypeError", "'" + v.TypeName() + "' object cannot be interpreted as an integer");
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].AsInt();
    } else if (a.positional.size() >= 2) {
      start = a.positional[0].AsInt();
      stop = a.positional[1].AsInt();
      if (a.positional.size() > 2) step = a.positional[2].AsInt();
    }
    if (step == 0) Raise("ValueError", "range() arg 3 must not be zero");
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      out.push_back(Value::Int(i));
      if (out.size() > 100000) Raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      if (__builtin_add_overflow(i, step, &i)) break;  // past INT64's end: no more items below stop
    }
    return Value::List(std::move(out));
  }

  // Python's dict(...) / jinja2's namespace(...): at most one positional argument, a mapping or
  // an iterable of pairs; then the keywords.
  static Dict KeywordDict(const CallArgs& a) {
    Dict d;
    if (a.positional.size() > 1)
      Raise("TypeError", "dict expected at most 1 argument, got " + std::to_string(a.positional.size()));
    for (const Value& p : a.positional) {
      if (p.IsUndefined()) Raise("UndefinedError", p.AsString().empty() ? "value is undefined" : p.AsString());
      if (p.IsMapping() || p.type() == Value::Type::kNamespace) {
        for (const auto& [k, v] : p.AsDict().items()) d.Set(k, v);
        continue;
      }
      if (!p.IsSequence() && !p.IsString()) Raise("TypeError", "'" + p.TypeName() + "' object is not iterable");
      for (const Value& pair : Iterate(p)) {
        if (!pair.IsSequence() || pair.AsList().size() != 2)
          Raise("ValueError", "dictionary update sequence element has the wrong length; 2 is required");
        d.Set(pair.AsList()[0], pair.AsList()[1]);
      }
    }
    for (const auto& [k, v] : a.keyword) d.Set(Value::String(k), v);
    return d;
  }

  // Text appended to an output (the render's or a set block's / macro's): charged as made.
  static void Append(std::string* out, const std::string& text) {
    ChargeString(text.size(), out->size() + text.size());
    *out += text;
  }

  Flow ExecOne(const Stmt& s, const FramePtr& frame, std::string* out) {
    ChargeOps();
    switch (s.kind) {
      case Stmt::Kind::kText: Append(out, s.text); return Flow::kNormal;
      case Stmt::Kind::kOutput: Append(out, Eval(*s.expr, frame).Str()); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, branch] : s.branches)
          if (!cond || Eval(*cond, frame).Truthy()) return Exec(branch, frame, out);
        return Flow::kNormal;
      case Stmt::Kind::kFor: return For(s, frame, out);
      case Stmt::Kind::kSet: Assign(s.target, Eval(*s.expr, frame), frame); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {  // the body is an inner scope (jinja2's AssignBlock): its sets stay there
        std::string text;
        // A break / continue inside leaves the loop around it, the assignment undone (jinja2
        // compiles the body inline).
        const Flow flow = Exec(s.body, std::make_shared<Frame>(frame), &text);
        if (flow != Flow::kNormal) return flow;
        frame->Set(s.target.names[0], Value::String(std::move(text)));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: frame->Set(s.text, MakeMacro(s, frame)); return Flow::kNormal;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      // transformers' generation tag is a call block: its body renders in a scope of its own.
      case Stmt::Kind::kGeneration: return Exec(s.body, std::make_shared<Frame>(frame), out);
    }
    return Flow::kNormal;
  }

  void Assign(const Target& t, Value v, const FramePtr& frame) {
    if (!t.attribute.empty()) {
      const Value* ns = frame->Find(t.names[0]);
      if (!ns || ns->type() != Value::Type::kNamespace)
        Raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      const_cast<Value*>(ns)->MutableDict().Set(Value::String(t.attribute), std::move(v));
      return;
    }
    if (t.names.size() == 1) {
      frame->Set(t.names[0], std::move(v));
      return;
    }
    ValueList items = Iterate(v);
    if (items.size() != t.names.size())
      Raise("ValueError", items.size() < t.names.size()
                              ? "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " + std::to_string(items.size()) + ")"
                              : "too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) frame->Set(t.names[i], items[i]);
  }

  // The loop variable for item i of n (Jinja2's LoopContext).
  static Value LoopValue(const ValueList& items, size_t i) {
    const int64_t n = static_cast<int64_t>(items.size()), k = static_cast<int64_t>(i);
    Dict d;
    d.Set(Value::String("index"), Value::Int(k + 1));
    d.Set(Value::String("index0"), Value::Int(k));
    d.Set(Value::String("revindex"), Value::Int(n - k));
    d.Set(Value::String("revindex0"), Value::Int(n - k - 1));
    d.Set(Value::String("first"), Value::Bool(k == 0));
    d.Set(Value::String("last"), Value::Bool(k == n - 1));
    d.Set(Value::String("length"), Value::Int(n));
    d.Set(Value::String("depth"), Value::Int(1));
    d.Set(Value::String("depth0"), Value::Int(0));
    d.Set(Value::String("previtem"), k > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    d.Set(Value::String("nextitem"), k + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    d.Set(Value::String("cycle"), Value::MakeFunction("cycle", [k](const CallArgs& a) {
            if (a.positional.empty()) Raise("TypeError", "no items for cycling given");
            return a.positional[static_cast<size_t>(k) % a.positional.size()];
          }));
    return Value::Namespace(std::move(d));
  }

  // The flow a break / continue in the else block passes to the loop around this one.
  bool Kept(const Stmt& s, const Value& item, const FramePtr& frame) {
    auto f = std::make_shared<Frame>(frame);
    Assign(s.target, item, f);
    return Eval(*s.filter, f).Truthy();
  }

  Flow For(const Stmt& s, const FramePtr& frame, std::string* out) {
    const Value seq = Eval(*s.expr, frame);
    ValueList items = Iterate(seq);
    if (s.filter && !s.lazy_filter) {  // analyze.h: every condition before the first body
      ValueList kept;
      for (const Value& item : items)
        if (Kept(s, item, frame)) kept.push_back(item);
      items = std::move(kept);
    }
    // A lazy filter's loop sees the items kept so far: it reads nothing past the current one.
    ValueList seen;
    // jinja2 clears its "else" flag at the end of the body, so an iteration left by continue or
    // break does not count: else runs unless some iteration ran its body to the end.
    bool completed = false;
    for (size_t i = 0; i < items.size(); ++i) {
      ChargeOps();
      if (s.lazy_filter && !Kept(s, items[i], frame)) continue;
      if (s.lazy_filter) seen.push_back(items[i]);
      auto f = std::make_shared<Frame>(frame);
      f->Set("loop", s.lazy_filter ? LoopValue(seen, seen.size() - 1) : LoopValue(items, i));
      Assign(s.target, items[i], f);
      const Flow flow = Exec(s.body, f, out);
      if (flow == Flow::kBreak) break;
      completed = completed || flow == Flow::kNormal;
    }
    if (!completed) return Exec(s.else_body, std::make_shared<Frame>(frame), out);  // the loop's scope, as its body's
    return Flow::kNormal;
  }

  Value MakeMacro(const Stmt& s, const FramePtr& defined_in) {
    const Stmt* macro = &s;
    std::weak_ptr<Frame> scope = defined_in;
    return Value::MakeFunction(s.text, [this, macro, scope](const CallArgs& a) {
      DepthGuard depth("macro calls");  // recursion, direct or mutual
      auto f = std::make_shared<Frame>(scope.lock());
      const auto& params = macro->params;
      if (a.positional.size() > params.size()) Raise("TypeError", "macro '" + macro->text + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
      for (const auto& [k, v] : a.keyword) {
        bool known = false;
        for (const auto& p : params) known = known || p.first == k;
        if (!known) Raise("TypeError", "macro '" + macro->text + "' takes no keyword argument '" + k + "'");
      }
      for (size_t i = 0; i < params.size(); ++i) {
        const auto& [name, def] = params[i];
        if (i < a.positional.size()) f->Set(name, a.positional[i]);
        else if (const Value* kw = a.Keyword(name)) f->Set(name, *kw);
        else if (def) f->Set(name, Eval(*def, f));
        else f->Set(name, Value::Undefined("parameter '" + name + "' was not provided"));
      }
      std::string text;
      Exec(macro->body, f, &text);
      return Value::String(std::move(text));
    });
  }

  // --- expressions ---

  CallArgs Args(const Expr& e, const FramePtr& frame) {
    CallArgs a;
    for (const auto& x : e.args) a.positional.push_back(Eval(*x, frame));
    for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, Eval(*x, frame));
    return a;
  }

  static Value BoundMethod(const Value& obj, const std::string& name) {
    return Value::MakeFunction(name, [obj, name](const CallArgs& a) {
      bool found = false;
      Value r = CallMethod(obj, name, a, &found);
      return r;
    });
  }

  static bool UnsafeAttribute(const Value& obj, const std::string& name) {
    static const char* const kMutating[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                                            "update", "setdefault", "popitem", "copy", "fromkeys"};
    if (!obj.IsMapping() && !obj.IsSequence()) return false;
    for (const char* m : kMutating)
      if (name == m) return true;
    return false;
  }

  Value Attribute(const Value& obj, const std::string& name) {
    NoUndefined(obj);
    if (HasMethod(obj, name)) return BoundMethod(obj, name);
    if (UnsafeAttribute(obj, name)) return Value::Undefined("access to attribute '" + name + "' of '" + obj.TypeName() + "' object is unsafe.");
    if (obj.IsMapping() || obj.type() == Value::Type::kNamespace) {
      const Value* f = obj.AsDict().Find(Value::String(name));
      if (f) return *f;
      return Value::Undefined("'" + std::string(obj.IsMapping() ? "dict object" : "Namespace") + "' has no attribute '" + name + "'");
    }
    if (obj.IsNone()) return Value::Undefined("'None' has no attribute '" + name + "'");
    return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
  }

  Value Call(const Expr& e, const FramePtr& frame) {
    const Expr& callee = *e.items[0];
    if (callee.kind == Expr::Kind::kAttr) {
      const Value obj = Eval(*callee.items[0], frame);
      NoUndefined(obj);
      if (HasMethod(obj, callee.name)) {
        bool found = false;
        return CallMethod(obj, callee.name, Args(e, frame), &found);
      }
      return Invoke(Attribute(obj, callee.name), Args(e, frame));
    }
    return Invoke(Eval(callee, frame), Args(e, frame));
  }

  static Value Invoke(const Value& f, const CallArgs& args) {
    if (f.IsUndefined()) {
      if (f.AsString().rfind("access to attribute", 0) == 0) Raise("SecurityError", f.AsString());
      NoUndefined(f);
    }
    if (f.type() != Value::Type::kFunction) Raise("TypeError", "'" + f.TypeName() + "' object is not callable");
    return f.AsFunction()(args);
  }

  // A filter or test radixlm lacks, reached: one jinja2 has but radixlm does not implement is
  // refused as jinja2 refuses an unknown name; one jinja2 lacks too is jinja2's run-time error
  // (only an if's frame lets such a name past analyze.cc).
  [[noreturn]] static void UnknownName(const std::string& kind, const std::string& name, bool jinja2_has) {
    if (jinja2_has) Raise("TemplateAssertionError", "No " + kind + " named '" + name + "'.");
    Raise("TemplateRuntimeError", "No " + kind + " named '" + name + "' found.");
  }

  Value Filter(const Expr& e, const FramePtr& frame) {
    const FilterFn* f = FindFilter(e.name);
    if (!f) UnknownName("filter", e.name, Jinja2HasFilter(e.name));
    return (*f)(Eval(*e.items[0], frame), Args(e, frame));
  }

  Value Test(const Expr& e, const FramePtr& frame) {
    const TestFn* t = FindTest(e.name);
    if (!t) UnknownName("test", e.name, Jinja2HasTest(e.name));
    const bool r = (*t)(Eval(*e.items[0], frame), Args(e, frame));
    return Value::Bool(r != e.negate);
  }

  Value Binary(const Expr& e, const FramePtr& frame) {
    const Value a = Eval(*e.items[0], frame), b = Eval(*e.items[1], frame);
    const std::string& op = e.name;
    if (op == "~") return Value::String(a.Str() + b.Str());
    if (op == "==") return Value::Bool(a.Equals(b));
    if (op == "!=") return Value::Bool(!a.Equals(b));
    if (op == "in") return Value::Bool(Contains(b, a));
    if (op == "not in") return Value::Bool(!Contains(b, a));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      NoUndefined(a);
      NoUndefined(b);
      if (op == "<") return Value::Bool(a.Less(b));
      if (op == ">") return Value::Bool(b.Less(a));
      if (op == "<=") return Value::Bool(!b.Less(a));
      return Value::Bool(!a.Less(b));
    }
    return BinaryOp(op, a, b);
  }

  Value Unary(const Expr& e, const FramePtr& frame) {
    const Value v = Eval(*e.items[0], frame);
    if (e.name == "not") return Value::Bool(!v.Truthy());
    NoUndefined(v);
    if (!v.IsNumber()) Raise("TypeError", "bad operand type for unary " + e.name + ": '" + v.TypeName() + "'");
    if (e.name == "+") return v.type() == Value::Type::kBool ? Value::Int(v.AsInt()) : v;
    if (v.type() == Value::Type::kFloat) return Value::Float(-v.AsFloat());
    if (v.AsInt() == INT64_MIN) Raise("TemplateError", "integer beyond 64 bits: templates compute with int64");
    return Value::Int(-v.AsInt());
  }

  Value Eval(const Expr& e, const FramePtr& frame) {
    ChargeOps();
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* v = frame->Find(e.name);
        return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const auto& x : e.items) items.push_back(Eval(*x, frame));
        return e.kind == Expr::Kind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          Value k = Eval(*e.items[i], frame);
          RequireHashable(k);
          d.Set(std::move(k), Eval(*e.items[i + 1], frame));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Kind::kAttr: return Attribute(Eval(*e.items[0], frame), e.name);
      case Expr::Kind::kSubscript: {
        const Value obj = Eval(*e.items[0], frame), key = Eval(*e.items[1], frame);
        Value v = Subscript(obj, key);
        if (v.IsUndefined() && key.IsString() && (HasMethod(obj, key.AsString()) || obj.IsNone())) return Attribute(obj, key.AsString());
        return v;
      }
      case Expr::Kind::kSlice: {
        auto part = [&](size_t i) { return e.items[i] ? Eval(*e.items[i], frame) : Value::None(); };
        return Slice(Eval(*e.items[0], frame), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: return Call(e, frame);
      case Expr::Kind::kFilter: return Filter(e, frame);
      case Expr::Kind::kTest: return Test(e, frame);
      case Expr::Kind::kUnary: return Unary(e, frame);
      case Expr::Kind::kBinary: return Binary(e, frame);
      case Expr::Kind::kAnd: {
        Value a = Eval(*e.items[0], frame);
        return a.Truthy() ? Eval(*e.items[1], frame) : a;
      }
      case Expr::Kind::kOr: {
        Value a = Eval(*e.items[0], frame);
        return a.Truthy() ? a : Eval(*e.items[1], frame);
      }
      case Expr::Kind::kCondition:
        if (Eval(*e.items[1], frame).Truthy()) return Eval(*e.items[0], frame);
        return e.items[2] ? Eval(*e.items[2], frame) : Value::Undefined();
    }
    return {};
  }

  RenderOptions options_;
};

}  // namespace

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

core::StatusOr<Template> Template::Parse(std::string_view source) {
  Template t;
  try {
    t.body_ = std::make_unique<StmtList>(ParseTemplate(source));
    AnalyzeTemplate(*t.body_);
  } catch (const JinjaError& e) {
    return core::InvalidArgument(e.kind + ": " + e.message);
  }
  return t;
}

core::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& variables, const RenderOptions& options,
                                             JinjaError* error) const {
  Budget budget{.ops_left = options.limits.max_ops,
                .bytes_left = options.limits.max_bytes,
                .max_string = options.limits.max_string,
                .max_depth = options.limits.max_depth};
  RenderScope scope(&budget);
  Renderer renderer(options);
  std::string out;
  try {
    auto root = std::make_shared<Frame>(renderer.Globals());
    if (variables.is_object())
      for (auto it = variables.begin(); it != variables.end(); ++it) root->Set(it.key(), Value::FromJson(it.value()));
    renderer.Exec(*body_, root, &out);
  } catch (const JinjaError& e) {
    if (error) *error = e;
    return core::InvalidArgument(e.kind + ": " + e.message);
  }
  return out;
}

}  // namespace radixlm::jinja
