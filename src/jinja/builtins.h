// Jinja2's filters, tests and the Python methods templates call on str, list and dict values
// (internal to the jinja module). Each is one row of a table keyed by name, implemented with
// the Python semantics a chat template observes; an unknown name is the caller's error.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace radixlm::jinja {

using TestFn = bool (*)(const Value& v, const CallArgs& args);
using FilterFn = Value (*)(const Value& v, const CallArgs& args);

const TestFn* FindTest(std::string_view name);
const FilterFn* FindFilter(std::string_view name);
// Whether jinja2 3.1's default environment (with transformers' tojson) has the filter / test:
// radixlm implements a subset; a name outside this set is one jinja2 refuses at compile time.
bool Jinja2HasFilter(std::string_view name);
bool Jinja2HasTest(std::string_view name);

// obj.name(args) for a str, list or dict method; sets *found = false when obj has no such
// method (the sandbox's mutating methods - append, pop, update... - are absent, as
// ImmutableSandboxedEnvironment makes them).
Value CallMethod(const Value& obj, std::string_view name, const CallArgs& args, bool* found);
bool HasMethod(const Value& obj, std::string_view name);

// Python operators on values (TypeError / ZeroDivisionError as Python raises them).
Value BinaryOp(std::string_view op, const Value& a, const Value& b);
bool Contains(const Value& container, const Value& item);  // item in container
bool Hashable(const Value& v);  // Python's hash() would succeed: not a list, dict or namespace, nor a tuple of one
void RequireHashable(const Value& v);  // TypeError "unhashable type" unless Hashable
// v[index] and v[start:stop:step] (undefined when out of range or not subscriptable).
Value Subscript(const Value& v, const Value& index);
Value Slice(const Value& v, const Value& start, const Value& stop, const Value& step);
// Items a for loop walks: list/tuple items, dict keys, string characters; TypeError otherwise.
ValueList Iterate(const Value& v);
// v's attribute path "a.b.0" (dicts by key, sequences by index; undefined when absent).
Value GetPath(const Value& v, const std::string& path);
// Python's fmt.format(*args, **kwargs) (format.cc).
Value PyFormat(const std::string& fmt, const CallArgs& args);

}  // namespace radixlm::jinja
