#include "cache/kv_policy.h"

namespace radixlm::cache {
namespace {

class Lru final : public KvEvictionPolicy {
 public:
  std::string_view name() const override { return "lru"; }
  EvictKey Key(uint64_t last_access, uint32_t) const override { return {.major = last_access, .minor = 0}; }
};

class Lfu final : public KvEvictionPolicy {
 public:
  std::string_view name() const override { return "lfu"; }
  EvictKey Key(uint64_t last_access, uint32_t hits) const override { return {.major = hits, .minor = last_access}; }
};

struct Row {
  const char* name;
  std::shared_ptr<const KvEvictionPolicy> (*make)();
};
const Row kPolicies[] = {
    {"lru", [] { return std::shared_ptr<const KvEvictionPolicy>(std::make_shared<Lru>()); }},
    {"lfu", [] { return std::shared_ptr<const KvEvictionPolicy>(std::make_shared<Lfu>()); }},
};

}  // namespace

core::StatusOr<std::shared_ptr<const KvEvictionPolicy>> KvEvictionPolicy::Make(std::string_view name) {
  for (const Row& r : kPolicies)
    if (name == r.name) return r.make();
  std::string all;
  for (const std::string& n : Names()) all += (all.empty() ? "" : ", ") + n;
  return core::InvalidArgument("unknown KV eviction policy '" + std::string(name) + "' (choose one of " + all + ")");
}

std::vector<std::string> KvEvictionPolicy::Names() {
  std::vector<std::string> names;
  for (const Row& r : kPolicies) names.push_back(r.name);
  return names;
}

}  // namespace radixlm::cache
