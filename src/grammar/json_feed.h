// Feeds a JSON value to a matcher as serialised text, compactly or in Python's
// json.dumps default style (", " and ": " separators, non-ASCII as \u escapes). Object members
// may come in any order in the value; the helper finds the order the grammar takes (members of
// a schema grammar follow `properties`), by trying members with rollback on failure, within a
// budget. So "accepted" means: some member order of the value's serialisation is accepted.
// Used by the JSON Schema tests and by `radixlm grammar --check-cases` (the differential fuzzer's
// oracle side: fuzz/schema_diff.py).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"

namespace radixlm::grammar {

enum class FeedStyle { kCompact, kPython };

namespace feed_internal {

inline std::string Scalar(const nlohmann::ordered_json& v, FeedStyle style) {
  return v.dump(-1, ' ', /*ensure_ascii=*/style == FeedStyle::kPython);
}

inline bool Feed(Matcher& m, const nlohmann::ordered_json& v, FeedStyle style, int* budget);

inline bool Members(Matcher& m, std::vector<std::pair<std::string, const nlohmann::ordered_json*>> rest, bool first,
                    FeedStyle style, int* budget) {
  if (rest.empty()) return m.AcceptBytes("}");
  if (--*budget < 0) return false;
  const int mark = m.steps();  // each failed try rolls back to here
  for (size_t i = 0; i < rest.size(); ++i) {
    const bool ok = (first || m.AcceptBytes(style == FeedStyle::kPython ? ", " : ",")) &&
                    m.AcceptBytes(Scalar(nlohmann::ordered_json(rest[i].first), style)) &&
                    m.AcceptBytes(style == FeedStyle::kPython ? ": " : ":") && Feed(m, *rest[i].second, style, budget);
    if (ok) {
      auto others = rest;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      if (Members(m, others, false, style, budget)) return true;
    }
    m.Rollback(m.steps() - mark);
  }
  return false;
}

inline bool Feed(Matcher& m, const nlohmann::ordered_json& v, FeedStyle style, int* budget) {
  if (v.is_object()) {
    if (!m.AcceptBytes("{")) return false;
    std::vector<std::pair<std::string, const nlohmann::ordered_json*>> members;
    for (const auto& [k, x] : v.items()) members.push_back({k, &x});
    return Members(m, members, true, style, budget);
  }
  if (v.is_array()) {
    if (!m.AcceptBytes("[")) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0 && !m.AcceptBytes(style == FeedStyle::kPython ? ", " : ",")) return false;
      if (!Feed(m, v[i], style, budget)) return false;
    }
    return m.AcceptBytes("]");
  }
  return m.AcceptBytes(Scalar(v, style));
}

}  // namespace feed_internal

// REQUIRES: m at the start of a value.
inline bool FeedJson(Matcher& m, const nlohmann::ordered_json& v, FeedStyle style) {
  int budget = 2000;
  return feed_internal::Feed(m, v, style, &budget);
}

}  // namespace radixlm::grammar
