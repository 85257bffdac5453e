// Everything running sequences hold in memory, as ids, in one object (llama.cpp's
// llama_memory_hybrid: one memory owning the KV cache and the recurrent states behind one
// interface, with an apply step). It owns:
//  - the KV block pool and, with the prefix cache on, the radix tree over it;
//  - for a model with recurrent (Mamba2) layers, the layout of the state store's slots
//      [0, R)                 each running sequence's working state        (R = max_running)
//      [R, 2R)                each running sequence's branch-point capture (hybrid cache only)
//      [2R, 3R)               each running sequence's prompt-end capture (prompt_end_checkpoints)
//      then C + S             the hybrid cache's C checkpoints, and S spare (2, or 3 with
//                             prompt-end checkpoints) for admitting a finished sequence's states
//    (StateSlots() is the one place that says how many slots that is);
//  - the hybrid prefix cache of checkpoints (the policy object, borrowed);
//  - with a tier under the pool (cache/block_tier.h, borrowed), the loads and stores between
//    them (attention-only models: KV blocks; hybrid models: recurrent states with the blocks
//    they follow, PlanStateLoad / OfferState): a match that ends in the pool goes on through the blocks
//    the tier holds (Admitted::loads, into the request's fresh blocks; Loaded() says how many
//    arrived), and every full block the tree takes is offered to the tier (TakeStores), so
//    eviction from the pool leaves it there.
// A sequence's share is a MemorySeq: the engine keeps it in its request; only Memory changes it.
//
// Two modes (MemoryMode):
//  - kBlockPool (serving): KV lives in pool blocks, shared through the radix tree; a hybrid
//    model's hits end at a checkpoint of the hybrid cache whose KV is still in the tree.
//  - kByteBudget (a cost-model executor, which stores nothing): no blocks and no state slots;
//    the hybrid cache policy alone decides hits, counting KV and checkpoints against one byte
//    budget, as Marconi's simulator does. A request is looked up once (its prompt, at its first
//    admission) and admitted whole (prompt + every output token) when it finishes.
//
// One sequence's life, as the engine calls it:
//   CachedPrefix(tokens)        tokens a hit would serve now (no side effects: admission order)
//   Admit(tokens, ...)          match (the KV tree and, for hybrids, the deepest checkpoint at or
//                               below it; speculative insertion finds the branch point prefill
//                               must checkpoint), reserve blocks (planning LRU evictions, no side
//                               effects), commit: block table, locks, a working state slot, a
//                               copy-on-write of a partial block and a state restore for the
//                               executor; or refuse and change nothing
//   Grow(seq, upto)             blocks for positions [0, upto), evicting cached prefixes
//   StateFor(seq, from, n)      the state slots a step over tokens [from, from + n) uses
//   ShareAhead(seq, computed, at)  promise tokens [0, at) to others before the prompt's end:
//                               a hybrid's prefill captures the state there (branch slot)
//   PublishAhead(tokens, c, seq)   after a step: once [0, at) is computed, share its KV; a
//                               captured branch-slot state goes into the hybrid cache
//   Publish(tokens, n, seq)     the prompt [0, n) is computed: share its KV (insert in the tree)
//   Release(tokens, n, how)     put the computed KV [0, n) in the tree (finish, preempt), admit
//                               the states into the hybrid cache (finish), unlock, hand blocks
//                               and slots back; returns the state copies to make first
// Memory never touches KV or state data: the copies it asks for (BlockCopy, StateCopy) are the
// executor's to make, before the step that follows.
// Thread-safety: none; owned by the engine loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_pool.h"
#include "cache/block_tier.h"
#include "cache/hybrid_cache.h"
#include "cache/radix_tree.h"

namespace radixlm::cache {

enum class MemoryMode { kBlockPool, kByteBudget };

struct MemoryConfig {
  MemoryMode mode = MemoryMode::kBlockPool;
  int32_t num_blocks = 1024;
  int32_t block_tokens = 16;
  bool prefix_cache = true;
  std::string eviction = "lru";   // the radix tree's eviction policy (cache/kv_policy.h)
  int32_t max_running = 16;       // sequences holding memory at once
  bool recurrent = false;         // the model has recurrent layers: sequences need state slots
  int32_t checkpoint_slots = 0;   // the hybrid cache's capacity in checkpoints
  // Hybrid cache: also keep the state after each prompt but its last token, so a prompt sent
  // again verbatim (a retry, a regeneration) is a hit. Costs a checkpoint per request where it
  // is kept: only where the prompt end lies at least prompt_end_min_gap tokens past the state
  // the request starts from or captures at its branch point (a repeat would recompute that
  // much; a chat turn's repeat recomputes only its last user message without it).
  bool prompt_end_checkpoints = false;
  int64_t prompt_end_min_gap = 0;
  // Speculative decoding on a recurrent model: one more slot per working slot, where a step
  // that verifies a draft keeps the state from before the draft (DraftSlot).
  bool draft_states = false;
  // Marked prefixes (Mark) may hold at most this share of the pool's blocks.
  double mark_share = 0.5;
};

// What one sequence holds. Fields are Memory's to change.
struct MemorySeq {
  int64_t ns = 0;                    // cache namespace (a hash of cache_salt; 0: the shared default)
  std::vector<int32_t> block_table;  // KV block of each block index of the sequence
  std::vector<int32_t> owned;        // blocks the sequence must release
  NodeId locked = kRootNode;         // its cached prefix, pinned against eviction
  bool has_lock = false;
  int32_t state_slot = -1;           // working recurrent state
  // Hybrid cache: the checkpoint to restore first, and the branch point to capture.
  int32_t restore_slot = -1;
  bool needs_restore = false;
  HybridLookup checkpoint_lock;
  int64_t branch_at = -1;
  bool branch_captured = false;
  int32_t capture_slot = -1;
  int64_t prompt_end_at = -1;        // the prompt-end state to capture (-1: none)
  bool prompt_end_captured = false;
  int32_t prompt_end_slot = -1;
  int64_t share_at = -1;             // ShareAhead's point, until published (-1: none)
  std::vector<TierKey> tier_keys;    // with a tier: the chain of its first full blocks' keys
  int64_t tier_offered = 0;          // full blocks offered to the tier so far
  int64_t published = 0;             // PublishComputed: prompt tokens in the tree so far
  int64_t marked_from = 0, marked_to = 0;  // MarkComputing: the marked full blocks [from, to)
  bool holds_memory() const { return !block_table.empty() || state_slot >= 0; }
};

struct BlockCopyPlan {
  int32_t src = -1, dst = -1, tokens = 0;  // copy KV slots [0, tokens) of block src into dst
};
struct StateCopy {
  int32_t src = -1, dst = -1;  // copy a whole recurrent state between slots
};

// What a step over tokens [from, from + n) of a sequence does with its states.
struct StepState {
  int32_t slot = -1;           // the working slot (-1: no recurrent layers)
  bool reset = false;          // start from the empty state (position 0)
  int32_t restore_from = -1;   // copy this checkpoint into the working slot first
  struct Capture {
    int32_t after_tokens = 0, slot = -1;  // copy the state after this many of the step's tokens
  };
  std::vector<Capture> captures;
};

enum class ReleaseMode {
  kFinish,   // keep the KV and admit the states (the request is done)
  kPreempt,  // keep the KV (the recompute usually finds it); states are lost
  kCancel,   // keep nothing
};

// The prefix caches a Memory uses (borrowed).
struct PrefixCaches {
  // kBlockPool: the hybrid cache for a recurrent model (null: such a model reuses no prefix);
  // its capacity must be config.checkpoint_slots checkpoints.
  CheckpointCache* checkpoints = nullptr;
  // kByteBudget: the policy deciding every hit (null: nothing is reused).
  HybridPrefixCache* budget = nullptr;
  // kBlockPool: the tier under the pool (null: none); KV blocks, and a hybrid model's states.
  BlockTier* tier = nullptr;
  PrefixCaches() = default;
  PrefixCaches(CheckpointCache* c) : checkpoints(c) {}  // NOLINT: the serving case reads as a pointer
};

class Memory {
 public:
  Memory(MemoryConfig config, PrefixCaches caches);

  // State slots the executor's state store must hold for `config` (0: not recurrent).
  static int32_t StateSlots(const MemoryConfig& config, bool hybrid_cache);

  // Tokens of tokens[0, size - 1) the KV tree would serve seq now (0 without the prefix cache).
  int64_t CachedPrefix(const std::vector<int32_t>& tokens, const MemorySeq& seq) const;
  // Puts a sequence in the cache namespace of `cache_salt` (empty: the shared default), before
  // its first admission. Sequences of different namespaces never share cached prefixes (KV or
  // checkpoints); they share the memory and its eviction order.
  void Bind(MemorySeq* seq, const std::string& cache_salt);

  struct Admitted {
    int64_t cached_tokens = 0;          // tokens whose KV (and state) the sequence starts with
    int64_t hit_tokens = 0;             // the cache's hit for statistics (= cached_tokens, except
                                        // that kByteBudget reports a whole-prompt hit whole)
    std::vector<BlockCopyPlan> copies;  // copy-on-write of a partially matched block
    // With a tier: blocks to load, in order, continuing the match (then call Loaded).
    std::vector<TierTransfer> loads;
    int64_t load_from = 0;              // the block index of loads[0]
    // Hybrid models: the state after state_at tokens to load into the working slot with the
    // loads (all of them needed: Loaded() takes the hit only if every one arrived).
    std::optional<StateTransfer> state_load;
    int64_t state_at = -1;
  };
  // What a tier served and was offered (cumulative).
  struct TierStats {
    int64_t hit_tokens = 0;       // admitted tokens whose KV came from the tier
    int64_t loaded_blocks = 0, failed_loads = 0;
    int64_t offered_blocks = 0;   // full blocks handed to the tier to store
    int64_t state_hits = 0, offered_states = 0;  // hybrid models: states loaded, states offered
  };
  // Admits a sequence whose positions [0, tokens.size()) need KV, reusing its longest cached
  // prefix. `count_prompt`: tokens to credit to the tree's hit statistics (the prompt on first
  // admission, 0 on a re-admission). `alone`: no other sequence holds memory, so a request that
  // fits the pool must be admitted (without its match if the match pins what it needs).
  // false: no room (or no free state slot); nothing changed.
  bool Admit(const std::vector<int32_t>& tokens, int64_t count_prompt, bool alone, MemorySeq* seq, Admitted* out);
  // The executor loaded the first `loaded` of out->loads (a failed load ends the run): the
  // sequence starts with those blocks' tokens computed; out's cached and hit tokens and its
  // copies follow (a loaded block supersedes a copy-on-write into it).
  // Hybrid models: state_loaded says whether out->state_load arrived.
  void Loaded(MemorySeq* seq, int32_t loaded, Admitted* out, bool state_loaded = false);
  // The full blocks inserted since the last call that the tier does not hold yet: the executor
  // must copy them out before the pool changes again (before the next Admit or step).
  std::vector<TierTransfer> TakeStores() { return std::exchange(stores_, {}); }
  // Hybrid models: the states the hybrid cache kept since the last call (same rule).
  std::vector<StateTransfer> TakeStateStores() { return std::exchange(state_stores_, {}); }
  const TierStats& tier_stats() const { return tier_stats_; }
  BlockTier* tier() const { return tier_; }
  // Attach across replicas sharing a tier (BlockTier::MarkComputing): marks the full blocks of
  // positions [from, to) that seq is about to compute (marking again refreshes; the marks held
  // grow to cover every call's); ClearComputing drops seq's marks (call it after the executor
  // stored its blocks: the tier clears them behind those stores).
  void MarkComputing(const std::vector<int32_t>& tokens, int64_t from, int64_t to, MemorySeq* seq, double ttl_seconds,
                     double tokens_per_second);
  void ClearComputing(MemorySeq* seq);
  // A waiting sequence with `prompt` prompt tokens: the first full block a hit could serve that
  // neither the tree nor the tier holds, when another replica marks it as computing: the prompt
  // tokens from that block on and the marker's tokens per second (nullopt: no such block or no
  // mark). Probes the tier (one round of ContainsMany, one mark).
  struct Elsewhere {
    int64_t missing_tokens = 0;
    double tokens_per_second = 0;
  };
  std::optional<Elsewhere> ComputingElsewhere(const std::vector<int32_t>& tokens, int64_t prompt, MemorySeq* seq) const;
  // Blocks for positions [0, upto), evicting cached prefixes if it must. false: no room.
  bool Grow(MemorySeq* seq, int64_t upto);
  // The states a step over tokens [from, from + n) uses; marks a restore done and a capture taken.
  StepState StateFor(MemorySeq* seq, int64_t from, int64_t n);
  // The prompt tokens[0, n) is computed: concurrent requests may now share it.
  void Publish(const std::vector<int32_t>& tokens, int64_t n, MemorySeq* seq);
  // A prompt being prefilled has computed tokens[0, computed): its full blocks go in the tree
  // now, so that a request arriving with the same prefix attaches to them (its next chunk is the
  // same rows as this one's, which the executor computes once) instead of computing them again.
  // Attention-only models (a recurrent model shares through ShareAhead's checkpoints).
  void PublishComputed(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq);
  // A running sequence that has computed `computed` < at tokens shares tokens [0, at) as soon as
  // it has computed them, for requests waiting on them: on a hybrid model its prefill captures
  // the state after token `at` in its branch-capture slot. false (nothing changed): no prefix
  // cache, kByteBudget mode (nothing is stored), or its capture slot is promised elsewhere.
  bool ShareAhead(MemorySeq* seq, int64_t computed, int64_t at);
  // After a step: if seq has computed its ShareAhead point, inserts that prefix's KV in the tree;
  // a state its prefill captured in the branch slot (a ShareAhead point, or the branch point of
  // speculative insertion) goes into the hybrid cache as a checkpoint now, not at finish (the
  // slot is then free again). Returns the state copies to make before the slots are used again.
  std::vector<StateCopy> PublishAhead(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq);
  // Releases a sequence that computed tokens[0, computed) (see ReleaseMode). The returned state
  // copies must be made before the slots are used again.
  std::vector<StateCopy> Release(const std::vector<int32_t>& tokens, int64_t computed, ReleaseMode mode, MemorySeq* seq);

  const MemoryConfig& config() const { return config_; }
  // The most tokens one sequence can hold (the pool's; unbounded in kByteBudget mode).
  int64_t max_sequence_tokens() const;
  HybridPrefixCache* budget() const { return budget_; }
  const BlockPool& pool() const { return pool_; }
  const RadixTree* tree() const { return tree_.get(); }
  // The radix tree's observer (KV cache events); false when there is no radix tree.
  bool SetBlockObserver(BlockObserver* observer) {
    if (tree_) tree_->set_observer(observer);
    observer_ = tree_ ? observer : nullptr;
    return tree_ != nullptr;
  }
  // The checkpoint cache's (a hybrid model's SSM checkpoints); false when there is none.
  bool SetStateObserver(StateObserver* observer) {
    if (checkpoints_) checkpoints_->set_state_observer(observer);
    return checkpoints_ != nullptr;
  }
  CheckpointCache* checkpoints() const { return checkpoints_; }
  bool prefix_cache() const { return tree_ != nullptr; }
  int32_t free_state_slots() const { return static_cast<int32_t>(free_slots_.size()); }
  // With config.draft_states: the slot paired with seq's working slot (-1: none).
  int32_t DraftSlot(const MemorySeq& seq) const {
    return config_.draft_states && seq.state_slot >= 0 ? draft_slot_base_ + seq.state_slot : -1;
  }
  // Gives back seq's own blocks past what `tokens` positions need (a rejected draft's; they
  // hold no cached KV, the tree never saw them).
  void Trim(MemorySeq* seq, int64_t tokens);
  // The client will send tokens[0, n) again (RequestParams::cache_mark): after the sequence's
  // Release, its cached path is kept ahead of unmarked prefixes until `until` (the engine's
  // clock), within mark_share of the pool (RadixTree::Mark). Returns the tokens marked. The
  // KV tree only: a hybrid model's checkpoints follow their own policy.
  int64_t Mark(const std::vector<int32_t>& tokens, int64_t n, const MemorySeq& seq, double until);
  void ExpireMarks(double now) {
    if (tree_) tree_->ExpireMarks(now);
  }
  // Empty when consistent: the tree's invariants, and every slot accounted for once.
  std::string CheckInvariants() const;

 private:
  // A salt's namespace: a 62-bit hash (no table to grow with the number of salts; finding a
  // salt that collides with another tenant's unknown one takes ~2^61 tries).
  static int64_t Namespace(const std::string& salt);
  // The hybrid cache's key for tokens[0, n) of namespace ns: outside the default namespace, two
  // leading tokens no vocabulary has (negative, 30 bits of ns each), so positions there are
  // offset by two.
  struct CheckpointKey {
    CheckpointKey(const std::vector<int32_t>& tokens, int64_t n, int64_t ns);
    std::vector<int32_t> storage;
    std::span<const int32_t> span;
    int64_t offset = 0;
  };
  // Where to keep a prompt's end state (-1: nowhere), given the state at `covered` it has anyway.
  int64_t PromptEnd(int64_t prompt_len, int64_t covered) const;
  // The tier's key of seq's full block `index` (extends seq's chain over tokens as needed).
  const TierKey& TierKeyOf(const std::vector<int32_t>& tokens, int64_t index, MemorySeq* seq) const;
  // Offers seq's full blocks of tokens[0, n) that the tier lacks (after they entered the tree).
  void OfferToTier(const std::vector<int32_t>& tokens, int64_t n, MemorySeq* seq);
  // kByteBudget: the hybrid policy's lookup of a prompt (its hit and where its end state goes).
  void LookupBudget(const std::vector<int32_t>& tokens, int64_t count_prompt, MemorySeq* seq, Admitted* out);
  // Admit's paged part: the tree's blocks (up to the deepest checkpoint on hybrid models); false
  // if they do not fit.
  bool AdmitToTree(const std::vector<int32_t>& tokens, int64_t count_prompt, bool alone, MemorySeq* seq,
                   Admitted* out);
  // Hybrid models: the branch point, the restored checkpoint (locked) and the state slots of an
  // admitted sequence whose hit ends at `limit`.
  void PlanCheckpoints(const std::vector<int32_t>& tokens, int64_t count_prompt, int64_t limit, int32_t ckpt_node,
                       int32_t ckpt_slot, MemorySeq* seq);
  // Attention-only models: loads of the full blocks the tier holds past the pool's hit.
  void PlanBlockLoads(const std::vector<int32_t>& tokens, int64_t limit, MemorySeq* seq, Admitted* out);
  // The end of the run of seq's full blocks [from, end) the tier holds, probed in one round.
  int64_t HeldRun(const std::vector<int32_t>& tokens, int64_t from, int64_t end, MemorySeq* seq);
  // Hybrid models: the deepest state the tier holds past the pool's hit whose blocks it holds too.
  void PlanStateLoad(const std::vector<int32_t>& tokens, MemorySeq* seq, Admitted* out);
  // Hybrid models: offers the state after tokens[0, p) held in `slot`.
  void OfferState(const std::vector<int32_t>& tokens, int64_t p, int32_t slot, MemorySeq* seq);
  // A finished sequence's states into the hybrid cache: returns the copies into cache slots.
  std::vector<StateCopy> AdmitStates(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq);

  MemoryConfig config_;
  BlockPool pool_;
  std::unique_ptr<RadixTree> tree_;
  CheckpointCache* checkpoints_ = nullptr;
  HybridPrefixCache* budget_ = nullptr;
  BlockTier* tier_ = nullptr;
  BlockObserver* observer_ = nullptr;
  std::vector<TierTransfer> stores_;
  std::vector<StateTransfer> state_stores_;
  TierStats tier_stats_;
  // Free slots of each kind (see the layout above).
  std::vector<int32_t> free_slots_, capture_free_, prompt_end_free_, checkpoint_free_;
  int32_t draft_slot_base_ = 0;  // DraftSlot's: after every other slot
};

}  // namespace radixlm::cache
