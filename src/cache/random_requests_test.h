// The cache tests' random workloads (radix_tree_test.cc, kv_events_test.cc): a request's tokens
// that share prefixes with earlier ones, so that matches, splits and evictions all happen.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"

namespace radixlm::cache {

// A random request's tokens: unless `seen` is empty or a 1-in-`fresh_one_in` draw says fresh,
// a prefix of a random one of `seen` (its first token to all of it); then 1 to `max_extra` new
// tokens from [0, alphabet).
inline std::vector<int32_t> RandomRequest(core::Rng& rng, const std::vector<std::vector<int32_t>>& seen, uint64_t fresh_one_in,
                                          uint64_t max_extra, uint64_t alphabet) {
  std::vector<int32_t> t;
  if (!seen.empty() && rng.Below(fresh_one_in) != 0) {
    const auto& base = seen[rng.Below(seen.size())];
    t.assign(base.begin(), base.begin() + 1 + rng.Below(base.size()));
  }
  const uint64_t extra = 1 + rng.Below(max_extra);
  for (uint64_t i = 0; i < extra; ++i) t.push_back(static_cast<int32_t>(rng.Below(alphabet)));
  return t;
}

}  // namespace radixlm::cache
