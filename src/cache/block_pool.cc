#include "cache/block_pool.h"

#include "core/status.h"

namespace radixlm::cache {

BlockPool::BlockPool(BlockPoolConfig config) : config_(config), refs_(config.num_blocks, 0) {
  free_.reserve(config.num_blocks);
  // Lowest ids on top of the stack, so allocation order is 0, 1, 2, ... (easier to read).
  for (int32_t b = config.num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<std::vector<int32_t>> BlockPool::Allocate(int32_t n) {
  if (n < 0 || n > num_free()) return std::nullopt;
  std::vector<int32_t> out(n);
  for (int32_t i = 0; i < n; ++i) {
    out[i] = free_.back();
    free_.pop_back();
    refs_[out[i]] = 1;
  }
  return out;
}

void BlockPool::Ref(int32_t block) {
  RADIXLM_CHECK(block >= 0 && block < config_.num_blocks && refs_[block] > 0);
  ++refs_[block];
}

void BlockPool::Release(int32_t block) {
  RADIXLM_CHECK(block >= 0 && block < config_.num_blocks && refs_[block] > 0);
  if (--refs_[block] == 0) free_.push_back(block);
}

std::string BlockPool::CheckInvariants() const {
  std::vector<char> on_free(config_.num_blocks, 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= config_.num_blocks) return "free list holds out-of-range id " + std::to_string(b);
    if (on_free[b]) return "block " + std::to_string(b) + " is on the free list twice";
    on_free[b] = 1;
  }
  for (int32_t b = 0; b < config_.num_blocks; ++b) {
    if (refs_[b] < 0) return "block " + std::to_string(b) + " has a negative reference count";
    if ((refs_[b] == 0) != static_cast<bool>(on_free[b]))
      return "block " + std::to_string(b) + " is free iff unreferenced: violated";
  }
  return "";
}

}  // namespace radixlm::cache
