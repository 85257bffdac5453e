// The seam every hybrid prefix-cache policy sits behind (Marconi, Pan et al., MLSys 2025): a
// prefix tree whose nodes hold the KV of their edge tokens and, where admitted, one SSM
// checkpoint. A recurrent state cannot be rolled back, so on a model with SSM layers a hit
// reaches only the deepest matched node that holds a checkpoint.
//
// Implementations (one job each):
//   hybrid_radix_cache.h   token-granular radix tree; the policies lru, sglang+, marconi and
//                          marconi-static are small objects deciding hits, recency and victims
//   block_hybrid_cache.h   vLLM+: a tree of fixed token blocks, a checkpoint in every block
//   marconi_reference.h    the Marconi artifact's simulator reproduced bit for bit, quirks
//                          included (`simulate --reference-accounting` and its golden test only)
//
// One request, as the engine's Memory or the simulator drives it:
//   Lookup(input)          -> hit length; speculative insertion (a dry run) finds whether the
//                             input splits a cached edge: the branch point prefill must
//                             checkpoint. Refreshes recency as the policy says.
//   Admit(input + output)  -> two phases: Reserve() says what the insertion needs (no side
//                             effects); Admit() evicts until it fits, then inserts, placing at
//                             most two checkpoints (the branch point, after the last token).
// The engine serving real states uses the CheckpointCache extension: admission with the slots
// ("payloads") holding the states, the deepest checkpoint under a KV hit, and locks.
//
// Thread-safety: none; owned by one loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/cost_model.h"
#include "core/status.h"

namespace radixlm::core {
class ThreadPool;
}

namespace radixlm::cache {

enum class HybridPolicy { kLru, kSglangPlus, kMarconi, kMarconiStatic, kVllmPlus };

class RadixPolicy;
struct HybridCacheConfig;
class HybridPrefixCache;

// The policies, one row each (hybrid_cache.cc's kHybridPolicies): a name and what every part
// of the system needs to know of it. A new policy is its enum value, its row, and its class (a
// RadixPolicy in radix_policy.cc, or a HybridPrefixCache of its own).
struct HybridPolicyRow {
  HybridPolicy policy;
  const char* name;
  const char* alias;   // also accepted (null: none)
  bool block_tree;     // a checkpoint in every block (vLLM's layout), not a radix tree of them
  bool serves_ssm;     // keeps the SSM checkpoints of a hybrid model (the engine's state slots)
  bool needs_alpha;    // takes its FLOP weight as given (--alpha), not tuned
  bool in_reference;   // the Marconi artifact implements it (marconi_reference.h)
  // A radix tree's eviction policy (null for a block tree); model_has_ssm: hits end at checkpoints.
  std::shared_ptr<const RadixPolicy> (*radix)(bool model_has_ssm);
};
std::span<const HybridPolicyRow> HybridPolicies();
const HybridPolicyRow& HybridPolicyRowOf(HybridPolicy policy);
core::StatusOr<HybridPolicy> ParseHybridPolicy(const std::string& name);
const char* HybridPolicyName(HybridPolicy policy);
// The names of the rows `pick` selects, as "a, b or c" (for messages).
std::string HybridPolicyNames(bool (*pick)(const HybridPolicyRow&), const char* last_joiner = " or ");

struct HybridCacheConfig {
  HybridPolicy policy = HybridPolicy::kMarconi;
  double capacity_bytes = 0;
  double alpha = 0;              // marconi-static; marconi's starting value
  int bootstrap_multiplier = 5;  // marconi: window = this x requests seen at the first eviction
  int tuning_last_n = 500;       // requests whose FLOPs saved decide the tuned alpha
  // marconi: the window stops growing at this many tokens (its requests are kept for the
  // replays); tuning then runs on what it holds. Bounds the tuner's memory on long traces.
  int64_t tuning_max_tokens = int64_t{1} << 26;
  // marconi: run the 21 replays on a background thread and switch alpha when they finish (the
  // engine: no step waits for them); false replays at once (deterministic: the simulator).
  bool tune_in_background = false;
  int vllm_block_tokens = 32;    // vllm+
  core::ThreadPool* tuning_pool = nullptr;  // borrowed; replays run on it (null: serially)
  bool verify_victims = false;  // tests: CHECK each indexed victim against an exhaustive scan
};

struct HybridLookup {
  int64_t hit_tokens = 0;        // prefix served from cache (ends at a checkpoint)
  int64_t matched_tokens = 0;    // raw token match, may end inside an edge
  bool branch_checkpoint = false;  // prefill must checkpoint the state at matched_tokens
  int32_t node = -1;             // deepest node of the hit (-1: none); for Lock()
};

// What admitting a finished request would take (Reserve: no side effects).
struct HybridReservation {
  int64_t new_tokens = 0;   // tokens whose KV is not cached yet
  int checkpoints = 0;      // SSM checkpoints to place (branch point, last decoded token)
  int64_t bytes_needed = 0;
  double bytes_over_capacity = 0;  // what eviction must free first (0: fits)
};

// Per-request record and the totals.
struct HybridRequestStat {
  int64_t input_tokens = 0;
  int64_t hit_tokens = 0;
};
struct HybridCacheStats {
  int64_t requests = 0, hit_requests = 0, input_tokens = 0, hit_tokens = 0;
  Flops flops_saved = 0;
  int64_t evictions = 0, checkpoints_admitted = 0, branch_checkpoints = 0, prompt_end_checkpoints = 0;
  // Eviction cost: victims chosen, candidates scored to choose them, and the candidate-set sizes
  // at those moments (scored / candidates = the fraction an eviction looks at).
  int64_t victim_searches = 0, victim_scored = 0, victim_candidates = 0;
  int64_t bootstrap_window = -1;  // marconi: requests replayed to tune alpha (-1: no eviction yet)
  bool alpha_tuned = false;
  int64_t tuning_window_tokens = 0;  // marconi: tokens the tuning window held at its largest
  double TokenHitRate() const { return input_tokens ? double(hit_tokens) / input_tokens : 0; }
  double RequestHitRate() const { return requests ? double(hit_requests) / requests : 0; }
};

class HybridPrefixCache {
 public:
  virtual ~HybridPrefixCache() = default;
  // A request arrives: records its hit.
  virtual HybridLookup Lookup(std::span<const int32_t> input) = 0;
  // Phase one: what admitting `sequence` would need; changes nothing.
  virtual HybridReservation Reserve(std::span<const int32_t> sequence) const = 0;
  // Phase two: the request finished with `sequence` = input + output: evict what Reserve()
  // says must go, then admit it.
  virtual void Admit(std::span<const int32_t> sequence) = 0;
  // The same, also keeping the state after `prompt_end` tokens (the prompt but its last token:
  // what an exact repeat of the prompt can reuse) if it fits. Policies without such a choice
  // (vllm+ keeps a state per block; the reference) admit as Admit(sequence).
  virtual void Admit(std::span<const int32_t> sequence, int64_t prompt_end) { Admit(sequence); }
  // Pin a lookup's path against eviction while a request uses it.
  virtual void Lock(const HybridLookup& lookup) = 0;
  virtual void Unlock(const HybridLookup& lookup) = 0;
  virtual double TreeBytes() const = 0;
  virtual double alpha() const { return 0; }
  virtual const std::vector<HybridRequestStat>& history() const = 0;
  virtual HybridCacheStats Stats() const = 0;
  // Structural invariants (links, byte totals, lock counts, indexes); CHECK-fails if broken.
  virtual void CheckInvariants() const = 0;
  virtual int64_t NodeCount() const = 0;
};

// Admission with real states (the engine): where the caller holds the branch-point state
// (-1 = wherever the insertion splits, as in simulation) and the state-pool slots ("payloads")
// the new checkpoints take. A split at a position with no state leaves a stateless node
// (SGLang's tombstone): never a hit, merged away as soon as it has one child.
struct HybridAdmitOptions {
  int64_t branch_state_at = -1;
  int32_t branch_payload = -1, leaf_payload = -1;
  // The state after prompt_end tokens (-1: none), placed after the insertion if it fits.
  int64_t prompt_end_at = -1;
  int32_t prompt_end_payload = -1;
};
struct HybridAdmitResult {
  bool branch_used = false, leaf_used = false, prompt_end_used = false;  // each offered payload kept?
  std::vector<int32_t> freed_payloads;          // payloads of checkpoints evicted meanwhile
};

// Told of every checkpoint the cache places or drops (KV cache events' SSM extension,
// cache/kv_events.h): path = the tokens from position 0 to the checkpoint.
class StateObserver {
 public:
  virtual ~StateObserver() = default;
  virtual void StateStored(std::span<const int32_t> path) = 0;
  virtual void StateRemoved(std::span<const int32_t> path) = 0;
};

// A hybrid cache whose checkpoints are real states in slots of the engine's state store.
class CheckpointCache : public HybridPrefixCache {
 public:
  // Borrowed; null: nobody listens.
  virtual void set_state_observer(StateObserver* observer) = 0;
  // Every checkpoint held, as its path from position 0 (any order).
  virtual void VisitCheckpoints(const std::function<void(std::span<const int32_t> path)>& fn) const = 0;
  virtual HybridAdmitResult AdmitStates(std::span<const int32_t> sequence, const HybridAdmitOptions& options) = 0;
  // What Lookup(input) would answer, without recording a request, refreshing or tuning (a
  // re-admission after preemption is no new request).
  virtual HybridLookup Peek(std::span<const int32_t> input) const = 0;
  // The deepest checkpoint on tokens' path ending at or before `limit` tokens: its length (0 if
  // none) and node / payload (-1 if none). No side effects.
  virtual int64_t CheckpointAtOrBelow(std::span<const int32_t> tokens, int64_t limit, int32_t* node,
                                      int32_t* payload) const = 0;
};

// The policy's cache with corrected accounting (cost.accounting() must be kCorrected).
std::unique_ptr<HybridPrefixCache> MakeHybridCache(const HybridCacheConfig& config, const CostModel& cost);
// A cache the engine can keep real states in: the radix policies (vllm+ keeps a state in every
// block, which the engine's slots cannot hold: an error).
core::StatusOr<std::unique_ptr<CheckpointCache>> MakeCheckpointCache(const HybridCacheConfig& config,
                                                                     const CostModel& cost);

// The engine's checkpoint cache: room for exactly `slots` checkpoints of `shape` (KV is the
// block tree's business, so the shape's KV is not counted; half a checkpoint of slack for
// rounding). Policies sglang+, marconi, marconi-static (alpha). A server tunes marconi in the
// background (no engine step waits for its replays); the simulator tunes inline, so a run's
// result does not depend on thread timing.
core::StatusOr<std::unique_ptr<CheckpointCache>> MakeSlotCheckpointCache(HybridPolicy policy, int slots,
                                                                         HybridShape shape, double alpha = 0,
                                                                         bool tune_in_background = true);

// FLOPs saved over a request history, as the reference computes it (SSM term on the summed
// hit tokens, attention and MLP per request; the sum is linear, so this equals the per-request
// sum of CostModel::PrefixFlops).
Flops HistoryFlopsSaved(const CostModel& cost, std::span<const HybridRequestStat> history);

}  // namespace radixlm::cache
