// The values a Jinja template computes with, modelled on the Python objects Jinja2 hands
// templates (what a chat template was written and tested against): undefined, None, bool, int,
// float, str, list, tuple, dict (insertion-ordered), namespace and callables (macros and the
// environment's globals). Lists, dicts and namespaces are shared by reference as in Python.
//
// Text conversions follow Python exactly where templates can observe them: Str() is str()
// (True, None, 1.0, 1e-05, ['a', 1], {'k': 'v'}), Repr() is repr(), and ToJson() is
// json.dumps(ensure_ascii=False) with its default separators (", ", ": ") or the given ones,
// optional indent and sort_keys - which is how transformers' `tojson` filter renders.
// Strings are UTF-8; lengths, indices and slices count code points, as Python's do.
//
// Bounds (a template comes from a model file from the internet, a context from a client): a
// render installs a Budget on its thread (RenderScope); every string made is charged to it
// (ChargeString, before anything large is allocated), every operation (ChargeOps), every
// recursive walk of a value (Repr, tojson, ==, <, FromJson) and every macro call nests under a
// depth bound (DepthGuard). Past a bound: a TemplateError naming it. Releasing a value frees
// nested lists and dicts iteratively, so no depth of nesting can overflow the stack. Values
// made outside a render are not charged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixlm::jinja {

class Value;
using ValueList = std::vector<Value>;

// An ordered dict: keys are values (strings in practice), lookup is linear below a few dozen
// keys and through a hash index of the string keys above (a dict of 100k keys from a request
// costs linear time to build).
class Dict {
 public:
  const Value* Find(const Value& key) const;
  Value* Find(const Value& key);
  void Set(const Value& key, Value v);
  size_t size() const;  // (out of line: Value is incomplete here, and clang instantiates eagerly)
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  std::vector<std::pair<Value, Value>>& mutable_items() { return items_; }  // Value's release only

 private:
  static constexpr size_t kIndexFrom = 32;
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> index_;  // string key -> position, past kIndexFrom
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};

// What a failing template raises: the Python exception class a template author sees
// (TemplateSyntaxError, TemplateError from raise_exception, UndefinedError, TypeError,
// ValueError, SecurityError) and its message.
struct JinjaError {
  std::string kind;
  std::string message;
};

using Function = std::function<Value(const CallArgs&)>;  // may throw JinjaError

// What one render may spend (template.h's RenderLimits; the renderer fills it).
struct Budget {
  int64_t ops_left = INT64_MAX;       // expressions evaluated, loop iterations, items walked
  int64_t bytes_left = INT64_MAX;     // bytes of all strings made
  int64_t max_string = INT64_MAX;     // bytes of one string
  int max_depth = 1 << 30;            // nested walks of values and macro calls
  int depth = 0;
};
// Installs `b` as this thread's budget for its lifetime (one render).
class RenderScope {
 public:
  explicit RenderScope(Budget* b);
  ~RenderScope();
  RenderScope(const RenderScope&) = delete;
  RenderScope& operator=(const RenderScope&) = delete;

 private:
  Budget* saved_;
};
// Charges n bytes of string about to be made, into a string of `total` bytes (0: n) (a
// TemplateError past the bounds).
void ChargeString(uint64_t n, uint64_t total = 0);
void ChargeOps(int64_t n = 1);
// One level of a recursive walk or call for its lifetime (a TemplateError past the bound).
class DepthGuard {
 public:
  explicit DepthGuard(const char* what);
  ~DepthGuard();
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kFunction };

  Value() = default;  // undefined
  // A copy of a string copies its bytes (strings are values, as in Python they are immutable
  // but here not shared): charged to the render like a new string, so copying a large string
  // many times ([big] * 100000, loops) is bounded by the byte budget.
  Value(const Value& o)
      : type_(o.type_), int_(o.int_), float_(o.float_), str_(o.str_), list_(o.list_), dict_(o.dict_), fn_(o.fn_) {
    if (type_ == Type::kString) ChargeString(str_.size());
  }
  Value(Value&&) noexcept = default;
  Value& operator=(const Value& o) {
    if (this != &o) *this = Value(o);
    return *this;
  }
  Value& operator=(Value&&) noexcept = default;
  ~Value() {
    if ((list_ && list_.use_count() == 1) || (dict_ && dict_.use_count() == 1)) ReleaseNested();
  }
  static Value Undefined(std::string hint = "") {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Type::kNone); }
  static Value Bool(bool b) { Value v(Type::kBool); v.int_ = b; return v; }
  static Value Int(int64_t i) { Value v(Type::kInt); v.int_ = i; return v; }
  static Value Float(double d) { Value v(Type::kFloat); v.float_ = d; return v; }
  static Value String(std::string s) {
    ChargeString(s.size());
    Value v(Type::kString);
    v.str_ = std::move(s);
    return v;
  }
  static Value List(ValueList items = {});
  static Value Tuple(ValueList items);
  static Value MakeDict(Dict d = {});
  static Value Namespace(Dict d = {});
  static Value MakeFunction(std::string name, Function f);
  static Value FromJson(const nlohmann::ordered_json& j);

  Type type() const { return type_; }
  bool IsUndefined() const { return type_ == Type::kUndefined; }
  bool IsNone() const { return type_ == Type::kNone; }
  bool IsString() const { return type_ == Type::kString; }
  bool IsNumber() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool IsSequence() const { return type_ == Type::kList || type_ == Type::kTuple; }
  bool IsMapping() const { return type_ == Type::kDict; }

  bool AsBool() const { return int_ != 0; }
  int64_t AsInt() const { return type_ == Type::kFloat ? static_cast<int64_t>(float_) : int_; }
  double AsFloat() const { return type_ == Type::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& AsString() const { return str_; }  // also an undefined value's name hint
  const ValueList& AsList() const { return *list_; }
  ValueList& MutableList() { return *list_; }
  const Dict& AsDict() const { return *dict_; }
  Dict& MutableDict() { return *dict_; }
  const Function& AsFunction() const { return *fn_; }
  const std::string& function_name() const { return str_; }

  bool Truthy() const;
  // Python ==: 1 == 1.0 == True, deep for containers, never an error.
  bool Equals(const Value& other) const;
  // Python <, for numbers and strings; other combinations throw TypeError.
  bool Less(const Value& other) const;
  // Python's type name as Jinja reports it: 'str', 'dict object' style hints use this.
  std::string TypeName() const;

  std::string Str() const;   // str(v); undefined is ""
  std::string Repr() const;  // repr(v)
  // json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); throws TypeError for
  // undefined, namespaces and functions (as Python does). indent < 0: none.
  std::string ToJson(int indent = -1, std::string_view item_sep = ", ", std::string_view key_sep = ": ",
                     bool sort_keys = false) const;

 private:
  explicit Value(Type t) : type_(t) {}
  // Frees this value's last reference to a list or dict, and the containers nested in it, with
  // a work list instead of recursion.
  void ReleaseNested();
  void JsonInto(std::string* out, int indent, int depth, std::string_view item_sep, std::string_view key_sep,
                bool sort_keys) const;

  Type type_ = Type::kUndefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Python's repr(float): the shortest round-tripping digits, exponent form below 1e-4 and from
// 1e16 ("1e-05", "1e+16"), else positional with at least one decimal ("2.0").
std::string FloatRepr(double d);
// Python's repr(str): single quotes unless the text has ' and no ", escapes \\ \n \r \t and
// other control characters.
std::string StringRepr(std::string_view s);

// Code-point helpers (UTF-8 in, UTF-8 out).
std::vector<std::string_view> CodePoints(std::string_view s);
size_t CodePointCount(std::string_view s);
bool IsPythonSpace(std::string_view code_point);

}  // namespace radixlm::jinja
