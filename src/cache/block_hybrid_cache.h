// vLLM+ as Marconi defines it (radix_cache_vllm.py): a prefix tree of fixed token blocks
// (32 tokens by default), every block node holding its KVs *and* one SSM checkpoint, so states
// are fine-grained and numerous. Matching goes by whole blocks; a trailing partial block is
// reused only if it matches completely and is extended in place by a later insertion. Eviction
// is LRU over leaves (a heap; a parent left childless joins it); every node on a matched or
// inserted path is refreshed.
// Accounting::kReference keeps the reference's byte estimate for an insertion (it counts the
// root as a matched block and charges extra_tokens/32 fractional checkpoints) and inserts even
// when eviction could not make room; kCorrected charges whole checkpoints for the new blocks and
// never exceeds the capacity.
// Thread-safety: none. Complexity: match O(children x block) per level; eviction O(leaves) to
// build the heap per eviction call, O(log n) per victim.
#pragma once

#include <memory>

#include "cache/hybrid_radix_cache.h"

namespace radixlm::cache {

std::unique_ptr<HybridPrefixCache> MakeBlockHybridCache(const HybridCacheConfig& config,
                                                        const CostModel& cost);

}  // namespace radixlm::cache
