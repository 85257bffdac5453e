#include "cache/block_hybrid_cache.h"

#include "cache/block_tree_internal.h"
#include "cache/hybrid_internal.h"

namespace radixlm::cache {
namespace {

using internal::BlockTree;

class BlockHybridCache final : public internal::BlockTreeCache {
 public:
  BlockHybridCache(const HybridCacheConfig& config, const CostModel& cost)
      : BlockTreeCache(config, cost, /*keep_child_order=*/false, /*lru_index=*/true) {
    RADIXLM_CHECK(cost.accounting() == Accounting::kCorrected);
  }

  HybridLookup Lookup(std::span<const int32_t> input) override {
    ++clock_;
    const BlockTree::MatchResult m = tree_.Match(input);
    Refresh(m);
    last_lookup_ = {tree_.version(), std::vector<int32_t>(input.begin(), input.end()), m};
    return RecordHit(m, static_cast<int64_t>(input.size()));
  }

  HybridReservation Reserve(std::span<const int32_t> sequence) const override {
    return ReserveFor(sequence, tree_.Match(sequence));
  }

  // One walk per admission: the match refreshes the path, prices the insertion and tells the
  // insertion where to start (the path is re-walked only if eviction ran).
  void Admit(std::span<const int32_t> sequence) override {
    clock_ += 2;  // the insertion, then its match: one clock step each
    // The request's own lookup walked its input against this same tree: go on from there.
    const LastLookup& l = last_lookup_;
    const bool resume = l.version == tree_.version() && l.input.size() <= sequence.size() &&
                        std::equal(l.input.begin(), l.input.end(), sequence.begin());
    BlockTree::MatchResult m = tree_.Match(sequence, resume ? &l.match : nullptr);
    last_lookup_ = {};
    Refresh(m);
    const HybridReservation r = ReserveFor(sequence, m);
    if (r.bytes_over_capacity > 0) {
      Evict(r.bytes_over_capacity);
      m = tree_.Match(sequence);
      if (ReserveFor(sequence, m).bytes_over_capacity > 0) return;
      Refresh(m);  // the insertion touches its path at the clock eviction advanced
    }
    Insert(sequence, m);
  }

  void CheckInvariants() const override {
    tree_.CheckInvariants();
    RADIXLM_CHECK(TreeBytes() <= config_.capacity_bytes);
  }

 private:
  HybridReservation ReserveFor(std::span<const int32_t> sequence, const BlockTree::MatchResult& m) const {
    HybridReservation r;
    r.new_tokens = static_cast<int64_t>(sequence.size()) - m.matched;
    if (r.new_tokens > 0 && !m.nodes.empty()) {
      const BlockTree::Node& last = tree_.node(m.nodes.back());
      if (last.lock_ref > 0 && last.len < tree_.block())
        r.new_tokens += last.len;  // copied into a sibling, see Insert
    }
    r.checkpoints = static_cast<int>((r.new_tokens + tree_.block() - 1) / tree_.block());
    internal::PriceReservation(cost_, TreeBytesExact(), config_.capacity_bytes, &r);
    return r;
  }

  // radix_cache_vllm._insert_helper, iteratively, from the deepest full block of `m` (the
  // nodes above it were refreshed by the match at this clock, as the insertion would).
  void Insert(std::span<const int32_t> key, const BlockTree::MatchResult& m) {
    int32_t node = BlockTree::kRoot;
    const int block = tree_.block();
    for (int32_t n : m.nodes) {
      if (tree_.node(n).len != block) break;
      node = n;
      key = key.subspan(block);
    }
    auto new_block = [this](int32_t parent, std::span<const int32_t> tokens) { return NewBlock(parent, tokens); };
    tree_.Insert(node, key, clock_, new_block, [this](int32_t partial, std::span<const int32_t> more) {
      const BlockTree::Node& n = tree_.node(partial);
      if (n.lock_ref > 0) {
        // A request is restoring this partial block's checkpoint: extending it in place would
        // replace that state. Start a sibling block holding the same tokens plus the new ones.
        const std::span<const int32_t> have = tree_.tokens(partial);
        std::vector<int32_t> full(have.begin(), have.end());
        full.insert(full.end(), more.begin(), more.end());
        return NewBlock(n.parent, full);
      }
      tree_.Extend(partial, more);
      return partial;
    });
  }

  // LRU over unlocked leaves; a parent left childless becomes a candidate.
  void Evict(double bytes_to_remove) {
    ++clock_;
    double evicted = 0;
    for (int32_t x = tree_.Oldest(); evicted < bytes_to_remove && x >= 0; x = tree_.Oldest()) {
      evicted += static_cast<double>(cost_.CheckpointBytes() +
                                     cost_.KvBytes(tree_.node(x).len));
      ++counters_.evictions;
      ++counters_.victim_searches;
      ++counters_.victim_scored;
      counters_.victim_candidates += tree_.evictable();
      tree_.RemoveLeaf(x);
    }
  }

  struct LastLookup {
    uint64_t version = ~uint64_t{0};
    std::vector<int32_t> input;
    BlockTree::MatchResult match;
  };

  LastLookup last_lookup_;
};

}  // namespace

std::unique_ptr<HybridPrefixCache> MakeBlockHybridCache(const HybridCacheConfig& config, const CostModel& cost) {
  return std::make_unique<BlockHybridCache>(config, cost);
}

}  // namespace radixlm::cache
