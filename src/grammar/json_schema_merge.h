// Internal to the JSON Schema compiler: keyword classification, local $ref resolution, the
// exact merge of schemas that allOf (and $ref with siblings, and unions under sibling keywords)
// needs, enum filtering and a conservative disjointness test for oneOf.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixlm::grammar::schema_internal {

using Json = nlohmann::ordered_json;

// patternProperties patterns whose language is known without a regex: every name (".*", "",
// "^"), or every name without a line terminator ("^.*$": `.` stops at one, `$` is the end).
enum class PatternKind { kEveryName, kOneLineNames, kOther };
PatternKind KindOfPattern(const std::string& pattern);

// The first keyword of s this compiler refuses outright (not, if, patternProperties, ...), or "".
std::string RefusedKeyword(const Json& s);
// Whether s has any validation keyword (annotations and unknown keywords constrain nothing).
bool HasConstraints(const Json& s, bool ignore_ref);
inline bool IsTrivialSchema(const Json& s) {
  return (s.is_boolean() && s.get<bool>()) || (s.is_object() && !HasConstraints(s, false));
}
// The instance types s allows ("integer" alone when only integers; "number" includes them).
std::set<std::string> TypeSet(const Json& s);
// The enum/const values that satisfy the rest of s (types, and the scalar keywords of their
// type); throws SchemaError for a keyword it cannot check.
std::vector<Json> EnumValues(const Json& s, const std::set<std::string>& types);

// Whether s's validation keywords are all string checks StringSatisfies decides (type, enum,
// const, pattern, minLength, maxLength).
bool StringCheckable(const Json& s);
// Whether the string v satisfies s (REQUIRES: StringCheckable(s)); throws SchemaError for a
// pattern it cannot run.
bool StringSatisfies(const std::string& v, const Json& s);

// A schema whose only validation keyword is `required`.
bool RequiredOnly(const Json& s);
// `not` of s: of true / {} it is false; of a required-only schema, the objects missing one of
// its names (non-objects satisfy `required`, so never its negation). Throws for anything else.
Json Negate(const Json& s);
// s's dependencies / dependentRequired / dependentSchemas as schemas all of which must hold:
// for a name n with dependency D, "not an object, or n absent, or n present and D".
std::vector<Json> DependencyConstraints(const Json& s);
// A oneOf whose alternatives are all required-only, as the anyOf of "alternative i holds and
// no other does" (exact); nullopt for other oneOfs.
std::optional<Json> OneOfByPresence(const Json& alternatives);

// How a schema writes a tuple: 2020-12's prefixItems + items, or earlier drafts' items array +
// additionalItems (the other form's keywords are unknown there and constrain nothing); a schema
// without $schema may use either.
enum class TupleForm { kEither, kPrefixItems, kItemsArray };

class Merger {
 public:
  explicit Merger(const Json& root);
  // The schema a local reference ("#", "#/definitions/x", the root's $id + "#/...") names.
  const Json* Resolve(const std::string& ref) const;
  // draft-03..07: keywords beside $ref are ignored.
  bool old_draft() const { return old_draft_; }
  TupleForm tuple_form() const { return tuple_form_; }
  // s without the keywords its declared draft does not have (const in draft-04, dependencies
  // in 2020-12, ...): unknown keywords constrain nothing. s itself when it has none.
  Json Native(const Json& s) const;
  bool HasForeign(const Json& s) const;
  Json WithoutRef(const Json& s) const;
  // A schema whose instances are exactly those of both (an "anyOf" when one side is a union);
  // throws SchemaError naming what cannot be merged.
  Json Merge(const Json& a, const Json& b);
  // s with its allOf merged into it.
  Json MergeAllOf(const Json& s);
  // True only when no instance can satisfy both.
  bool Disjoint(const Json& a, const Json& b);

 private:
  Json Deref(const Json& s, int depth);
  Json MergeFlat(const Json& a, const Json& b);
  void MergeObjects(const Json& a, const Json& b, Json* out);

  const Json& root_;
  bool old_draft_ = false;
  bool draft4_ = false;  // draft-03 / 04
  std::vector<std::string> foreign_;  // keywords the declared draft does not have
  TupleForm tuple_form_ = TupleForm::kEither;
  int depth_ = 0;
  int64_t merges_ = 0;  // Merge calls so far: unions distributed over each other multiply
};

// The most Merge calls one schema may take (allOf over anyOfs distributes: k^n alternatives).
inline constexpr int64_t kMaxMerges = 20000;

}  // namespace radixlm::grammar::schema_internal
