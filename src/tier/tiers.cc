// The registry of media under the KV pool (tier.h): one row per medium, fastest first.
#include <vector>

#include "tier/disk_tier.h"
#include "tier/tier.h"
#include "tier/tier_stack.h"

namespace radixlm::tier {
namespace {

core::StatusOr<std::unique_ptr<Tier>> OpenDisk(const TierSetup& s) {
  DiskTierConfig c;
  c.dir = s.disk_dir;
  c.capacity_bytes = s.disk_capacity_bytes;
  c.fingerprint = s.fingerprint;
  c.block_tokens = s.block_tokens;
  c.block_bytes = s.block_bytes;
  c.state_bytes = s.state_bytes;
  c.fsync = s.disk_fsync;
  RADIXLM_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> t, DiskTier::Open(std::move(c)));
  return std::unique_ptr<Tier>(std::move(t));
}

struct TierMedium {
  const char* medium;                     // its name in events, metrics and /server_info
  bool (*wanted)(const TierSetup&);       // whether the setup asks for it
  core::StatusOr<std::unique_ptr<Tier>> (*open)(const TierSetup&);
};

constexpr TierMedium kTierMedia[] = {
    {"disk", [](const TierSetup& s) { return !s.disk_dir.empty(); }, &OpenDisk},
};

}  // namespace

core::StatusOr<std::unique_ptr<Tier>> OpenTiers(const TierSetup& setup) {
  std::vector<std::unique_ptr<Tier>> tiers;
  for (const TierMedium& m : kTierMedia) {
    if (!m.wanted(setup)) continue;
    RADIXLM_ASSIGN_OR_RETURN(std::unique_ptr<Tier> t, m.open(setup));
    tiers.push_back(std::move(t));
  }
  if (tiers.empty()) return std::unique_ptr<Tier>();
  if (tiers.size() == 1) return std::move(tiers.front());
  return std::unique_ptr<Tier>(new TierStack(std::move(tiers)));
}

}  // namespace radixlm::tier
