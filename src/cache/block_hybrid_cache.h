// vLLM+ as Marconi defines it (radix_cache_vllm.py): a prefix tree of fixed token blocks
// (32 tokens by default), every block node holding its KVs *and* one SSM checkpoint, so states
// are fine-grained and numerous. Matching goes by whole blocks; a trailing partial block is
// reused only if it matches completely and is extended by a later insertion (in place, or as a
// sibling while a request restores it). Eviction is LRU over unlocked leaves; every node on a
// matched or inserted path is refreshed. Corrected accounting: whole checkpoints per new block,
// never above capacity.
//
// Cost: a node's children are found by their first token (one hash probe per block), and the
// evictable leaves are kept ordered by recency (O(log n) per change and per victim), so a
// request costs O(its blocks x log n) whatever the cache holds.
// Thread-safety: none.
#pragma once

#include <memory>

#include "cache/hybrid_cache.h"

namespace radixlm::cache {

std::unique_ptr<HybridPrefixCache> MakeBlockHybridCache(const HybridCacheConfig& config, const CostModel& cost);

}  // namespace radixlm::cache
