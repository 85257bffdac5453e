#include "sim/disk_model.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "core/status.h"

namespace radixlm::sim {

size_t ModelledTier::KeyHash::operator()(const cache::TierKey& k) const {
  size_t h;  // a SHA-256 digest: any 8 of its bytes are a good hash
  std::memcpy(&h, k.data(), sizeof h);
  return h;
}

ModelledTier::ModelledTier(int32_t block_tokens, int64_t block_bytes, int64_t capacity_blocks, std::string medium, double gbps)
    : hasher_(block_tokens, kSeed), medium_(std::move(medium)), gbps_(gbps) {
  RADIXLM_CHECK(block_tokens > 0 && block_bytes > 0 && capacity_blocks >= 0 && gbps > 0);
  stats_.capacity_blocks = capacity_blocks;
  stats_.block_bytes = block_bytes;
}

void ModelledTier::Store(const cache::TierKey& key) {
  ++stats_.stores;
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);
    return;
  }
  if (stats_.capacity_blocks == 0) return;
  while (static_cast<int64_t>(index_.size()) >= stats_.capacity_blocks) {
    index_.erase(lru_.front());
    lru_.pop_front();
    ++stats_.evicted_blocks;
  }
  lru_.push_back(key);
  index_.emplace(key, std::prev(lru_.end()));
  ++stats_.written_blocks;
  stats_.bytes_written += stats_.block_bytes;
  stats_.blocks = static_cast<int64_t>(index_.size());
}

bool ModelledTier::Load(const cache::TierKey& key) {
  ++stats_.loads;
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second);
  ++stats_.loaded_blocks;
  stats_.bytes_read += stats_.block_bytes;
  return true;
}

cache::TierReport ModelledTier::Report() const {
  cache::TierReport r{.medium = medium()};
  r.blocks = stats_.blocks;
  r.used_bytes = stats_.blocks * stats_.block_bytes;
  r.capacity_bytes = stats_.capacity_blocks * stats_.block_bytes;
  r.loaded_blocks = stats_.loaded_blocks;
  r.bytes_read = stats_.bytes_read;
  r.written_blocks = stats_.written_blocks;
  r.bytes_written = stats_.bytes_written;
  r.evicted_blocks = stats_.evicted_blocks;
  r.failed_loads = stats_.loads - stats_.loaded_blocks;
  return r;
}

ModelledStack::ModelledStack(std::vector<ModelledTier*> tiers) : tiers_(std::move(tiers)) {
  RADIXLM_CHECK(!tiers_.empty());
  for (const ModelledTier* t : tiers_) RADIXLM_CHECK(t->stats().block_bytes == tiers_.front()->stats().block_bytes);
}

std::vector<std::string> ModelledStack::media() const {
  std::vector<std::string> out;
  for (const ModelledTier* t : tiers_) out.push_back(t->medium());
  return out;
}

bool ModelledStack::Contains(const cache::TierKey& key) const {
  return std::ranges::any_of(tiers_, [&](const ModelledTier* t) { return t->Contains(key); });
}

std::vector<char> ModelledStack::HeldByAll(std::span<const cache::TierKey> keys) const {
  std::vector<char> held(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    held[i] = std::ranges::all_of(tiers_, [&](const ModelledTier* t) { return t->Contains(keys[i]); });
  return held;
}

std::vector<cache::TierReport> ModelledStack::Reports() const {
  std::vector<cache::TierReport> out;
  for (const ModelledTier* t : tiers_) out.push_back(t->Report());
  return out;
}

std::optional<double> ModelledStack::Load(const cache::TierKey& key) {
  for (ModelledTier* t : tiers_)
    if (t->Contains(key)) {
      t->Load(key);
      return t->ReadSeconds(1);
    }
  return std::nullopt;
}

void ModelledStack::Store(const cache::TierKey& key) {
  for (ModelledTier* t : tiers_) t->Store(key);
}

}  // namespace radixlm::sim
