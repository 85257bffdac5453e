// The token-granular radix tree of the hybrid prefix cache (Marconi) with corrected accounting;
// its policy (lru, sglang+, marconi, marconi-static) is a RadixPolicy object (radix_policy.h).
//
// What it owns: a radix tree whose non-root nodes hold the KV of their edge tokens and, unless
// a tombstone, one SSM checkpoint (a payload: the engine's state slot). Admission places at
// most two checkpoints per request: at the branch point speculative insertion found, and after
// the last token. Eviction asks the policy for one victim at a time from a candidate index
// (by recency, by FLOP efficiency), re-planning the insertion after each, and admits nothing
// that cannot fit; the tree never exceeds its capacity. A leaf victim is deleted; a one-child
// victim drops its checkpoint and merges into its child.
//
// Cost: children are found by first token (a hash probe), candidates are kept in ordered
// indexes (O(log n) per change), and marconi's victim is found by Fagin's threshold algorithm,
// typically after a few entries of each index: a request costs O(its tokens + nodes it touches
// x log n), whatever the cache holds. marconi's tuning is AlphaTuner's (bounded, optionally in
// the background).
// Thread-safety: none.
#pragma once

#include <memory>

#include "cache/hybrid_cache.h"

namespace radixlm::cache {

// REQUIRES: config.policy is a radix policy; cost.accounting() == kCorrected.
std::unique_ptr<CheckpointCache> MakeRadixHybridCache(const HybridCacheConfig& config, const CostModel& cost);

}  // namespace radixlm::cache
