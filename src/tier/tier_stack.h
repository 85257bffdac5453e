// Tiers stacked under the KV pool (pool -> disk -> remote), as one Tier: a load is taken from
// the first (fastest) tier that holds the block and arrives verified; a store is written through
// to every tier, each with its own admission rule (its queue, its bound); a probe asks each in
// turn. A block loaded from a slower tier is not copied up into the faster ones here: the pool
// now holds it, and the cache offers a block a tier lacks again only when it enters the tree.
// Reports, media and drops are each tier's, in order.
//
// Every tier of a stack names blocks with the same chain (one fingerprint, one block size): the
// first tier's hasher is the stack's. Thread-safety: as its tiers' (each is thread-safe).
#pragma once

#include <memory>
#include <vector>

#include "tier/tier.h"

namespace radixlm::tier {

class TierStack final : public Tier {
 public:
  // REQUIRES: at least one tier.
  explicit TierStack(std::vector<std::unique_ptr<Tier>> tiers);

  std::string medium() const override { return tiers_.front()->medium(); }
  std::vector<std::string> media() const override;
  const cache::BlockHasher& hasher() const override { return tiers_.front()->hasher(); }
  bool Contains(const cache::TierKey& key) const override;
  std::vector<char> ContainsMany(std::span<const cache::TierKey> keys) const override;
  std::vector<char> HeldByAll(std::span<const cache::TierKey> keys) const override;
  std::vector<cache::TierState> StatesAfter(const cache::TierKey& parent) const override;
  cache::TierReport Report() const override { return tiers_.front()->Report(); }
  std::vector<cache::TierReport> Reports() const override;
  void ReportDrops() override;
  std::vector<cache::TierDrops> TakeDropped() override;
  // Marks go to every tier (those no other process reads ignore them); a mark is the first
  // tier's that has one.
  bool SharesMarks() const override;
  void MarkComputing(std::span<const cache::TierKey> keys, double ttl_seconds, double tokens_per_second) override;
  void ClearComputing(std::span<const cache::TierKey> keys) override;
  std::optional<double> ComputingElsewhere(const cache::TierKey& key) const override;

  bool Load(const cache::TierKey& key, std::span<const iovec> dst) override;
  // Each tier in turn loads (its own way) what the tiers before it did not.
  void LoadMany(std::span<const cache::TierKey> keys, std::span<const std::vector<iovec>> dst, std::span<char> ok) override;
  void Store(const cache::TierKey& key, std::span<const iovec> segments) override;
  void StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                  std::span<const iovec> segments) override;
  bool LoadState(const cache::TierKey& key, std::span<const iovec> dst) override;
  void Flush() override;

  size_t size() const { return tiers_.size(); }

 private:
  std::vector<std::unique_ptr<Tier>> tiers_;
};

}  // namespace radixlm::tier
