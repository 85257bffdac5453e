// The Marconi artifact's simulator (ruipeterpan/marconi@0801661) reproduced bit for bit, quirks
// included, for `simulate --reference-accounting` and its golden test only: the production
// caches (hybrid_radix_cache.h, block_hybrid_cache.h) fix what it gets wrong. Every difference
// is listed in docs/hybrid-cache.md; in short:
//  - a logical clock advanced on every match, insert and evict; the insertion's dry-run match
//    refreshes recency like a real one;
//  - matching continues below a partially matched edge (it can count tokens never compared);
//  - admission: one eviction call for an estimate (at least one checkpoint even for a
//    duplicate), then the insertion whatever was freed; the bytes credited for an evicted leaf
//    are those of the last candidate scored (the tree can end above capacity);
//  - marconi rescans every candidate per victim (O(n) each); ties go to the first candidate in
//    DFS order over children in insertion order; leaf heaps pop in CPython heapq order;
//  - vLLM+: the root counts as a matched block, checkpoints are charged extra/32 fractionally,
//    a partial block is always extended in place.
// The cost model must use the reference formulas (CostModel with Accounting::kReference).
#pragma once

#include <memory>

#include "cache/hybrid_cache.h"

namespace radixlm::cache {

// REQUIRES: cost.accounting() == kReference. Policies: vllm+, sglang+, marconi, marconi-static.
core::StatusOr<std::unique_ptr<HybridPrefixCache>> MakeMarconiReferenceCache(const HybridCacheConfig& config,
                                                                             const CostModel& cost);

}  // namespace radixlm::cache
