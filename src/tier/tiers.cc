// The registry of media under the KV pool (tier.h): one row per medium, fastest first.
#include <vector>

#include <fstream>

#include "tier/disk_tier.h"
#include "tier/redis_tier.h"
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

core::StatusOr<std::unique_ptr<Tier>> OpenRemote(const TierSetup& s) {
  RedisTierConfig c;
  c.url = s.remote_url;
  if (!s.remote_password_file.empty()) {
    std::ifstream in(s.remote_password_file);
    if (!in) return core::NotFound("--cache-remote-password-file " + s.remote_password_file + ": cannot read it");
    std::getline(in, c.password);
    if (!c.password.empty() && c.password.back() == '\r') c.password.pop_back();
    if (c.password.empty()) return core::InvalidArgument("--cache-remote-password-file " + s.remote_password_file + " is empty");
  }
  c.fingerprint = s.fingerprint;
  c.block_tokens = s.block_tokens;
  c.block_bytes = s.block_bytes;
  c.state_bytes = s.state_bytes;
  RADIXLM_ASSIGN_OR_RETURN(std::unique_ptr<RedisTier> t, RedisTier::Open(std::move(c)));
  return std::unique_ptr<Tier>(std::move(t));
}

struct TierMedium {
  const char* medium;                     // its name in events, metrics and /server_info
  bool (*wanted)(const TierSetup&);       // whether the setup asks for it
  core::StatusOr<std::unique_ptr<Tier>> (*open)(const TierSetup&);
};

constexpr TierMedium kTierMedia[] = {
    {"disk", [](const TierSetup& s) { return !s.disk_dir.empty(); }, &OpenDisk},
    {"remote", [](const TierSetup& s) { return !s.remote_url.empty(); }, &OpenRemote},
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
