// Which cached KV prefix the radix tree evicts first, as an object (the seam SGLang's
// --radix-eviction-policy is): the tree keeps its unlocked leaves ordered by the key the policy
// gives each one, and evicts the smallest first.
//
//   lru   least recently used (the key is the last access)
//   lfu   least frequently used: fewest hits (matches that reused the node), ties by last access
//
// The key must be a function of the node alone, fixed until the node is touched again (a
// match, an insert through it): the tree plans a request's evictions (Reserve) without side
// effects by walking that order, which a score recomputed over all candidates at each pick
// (Marconi's minmax, cache/radix_policy.h) would not allow.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace radixlm::cache {

struct EvictKey {
  // marked: the tree's own tier (RadixTree::Mark): marked nodes sort after every unmarked one,
  // whatever the policy. Policies set major / minor.
  uint64_t marked = 0;
  uint64_t major = 0, minor = 0;
  auto operator<=>(const EvictKey&) const = default;
};

class KvEvictionPolicy {
 public:
  // "lru" or "lfu"; else InvalidArgument naming the choices.
  static core::StatusOr<std::shared_ptr<const KvEvictionPolicy>> Make(std::string_view name);
  static std::vector<std::string> Names();
  virtual ~KvEvictionPolicy() = default;
  virtual std::string_view name() const = 0;
  // Smaller is evicted first. last_access: the tree's clock at the node's last touch; hits:
  // admissions whose match reached the node.
  virtual EvictKey Key(uint64_t last_access, uint32_t hits) const = 0;
};

}  // namespace radixlm::cache
