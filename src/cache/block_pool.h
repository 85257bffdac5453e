// Fixed pool of KV block ids with a free list and reference counts. Deals in ids only: the
// memory behind a block lives in models::KvStore. A block is free exactly when its
// reference count is zero; blocks_in_use() returns to zero when nobody holds a block.
// Complexity: Allocate O(n), Ref/Release O(1). Single-threaded (owned by the engine loop).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace radixlm::cache {

struct BlockPoolConfig {
  int32_t num_blocks = 0;
  int32_t block_tokens = 16;
};

class BlockPool {
 public:
  explicit BlockPool(BlockPoolConfig config);

  // n fresh blocks with reference count 1, or nullopt (and no change) if fewer are free.
  std::optional<std::vector<int32_t>> Allocate(int32_t n);
  void Ref(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void Release(int32_t block);

  int32_t num_blocks() const { return config_.num_blocks; }
  int32_t block_tokens() const { return config_.block_tokens; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t blocks_in_use() const { return config_.num_blocks - num_free(); }
  int32_t ref_count(int32_t block) const { return refs_[block]; }
  // Empty string when consistent, else a description of the first violation.
  std::string CheckInvariants() const;

 private:
  BlockPoolConfig config_;
  std::vector<int32_t> free_;   // stack of free ids
  std::vector<int32_t> refs_;   // [num_blocks]
};

}  // namespace radixlm::cache
