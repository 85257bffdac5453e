// Prefix cache for hybrid attention + SSM models (Marconi, Pan et al., MLSys 2025), and the
// common interface of every hybrid cache policy (this tree and the block tree of vLLM+).
//
// What it owns: a token-granular radix tree. Each non-root node holds the KV of its edge tokens
// (all attention layers) and, where admitted, one SSM checkpoint: a slot of the state pool with
// every SSM layer's recurrent and conv state taken at the edge's last token. An SSM state cannot
// be rolled back, so a hit reaches only the deepest matched node that has a checkpoint (for a
// model without SSM layers the KV alone suffices and a hit may end anywhere).
//
// One request, as the engine or the simulator drives it:
//   Lookup(input)          -> hit length; speculative insertion: a dry-run finds whether the
//                             input splits an edge (branch point), whose state prefill must
//                             checkpoint. Refreshes recency (policy-specific).
//   Admit(input + output)  -> two phases: Reserve() computes the bytes the insertion needs
//                             (no side effects); Commit() evicts until they fit, then inserts,
//                             placing at most two checkpoints: at the branch point and after the
//                             last decoded token.
// Lock()/Unlock() pin a lookup's path (KV) and its checkpoint node while a request uses them;
// eviction never touches a locked node.
//
// Policies (one class, chosen by HybridPolicy):
//   kLru            plain radix cache for attention-only models: LRU over leaves, every node
//                   on a matched path refreshed, hits at any token.
//   kSglangPlus     Marconi's admission + LRU over leaves, whole path refreshed.
//   kMarconi        Marconi's admission + FLOP-aware eviction over nodes with <= 1 child:
//                   score = minmax(recency) + alpha * minmax(FLOPs saved per byte); a leaf is
//                   deleted, a one-child node drops its checkpoint and merges into its child;
//                   a hit refreshes only the deepest matched node. alpha is tuned once: at the
//                   first eviction the bootstrap window is set to multiplier x requests seen;
//                   when that many requests have been seen they are replayed on a snapshot of
//                   the initial tree for alpha in {0, 0.1, ..., 2.0} and the alpha saving the
//                   most FLOPs is kept (ties: the smallest).
//   kMarconiStatic  the same with a fixed alpha.
// Accounting::kReference reproduces the Marconi artifact's simulator bit for bit, quirks
// included (docs/hybrid-cache.md): a logical clock advanced on every match, insert and evict;
// the dry-run match inside insert refreshes recency; matching continues below a partially
// matched edge; the bytes credited for an evicted leaf are those of the last candidate scored;
// eviction rescans every candidate per victim (O(N) each, as the reference). kCorrected (default)
// fixes those and keeps the candidates in two ordered indexes (by recency, by FLOP efficiency):
// a victim is found by Fagin's threshold algorithm, typically after a few entries of each
// index, O(log N) to maintain per change.
//
// Thread-safety: none; owned by one loop. Tuning replays run on a ThreadPool if one is given.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
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
core::StatusOr<HybridPolicy> ParseHybridPolicy(const std::string& name);
const char* HybridPolicyName(HybridPolicy policy);

struct HybridCacheConfig {
  HybridPolicy policy = HybridPolicy::kMarconi;
  double capacity_bytes = 0;
  double alpha = 0;              // kMarconiStatic; the starting alpha of kMarconi
  int bootstrap_multiplier = 5;  // kMarconi (Marconi uses 15 for LMSys)
  int tuning_last_n = 500;       // requests whose FLOPs saved decide the tuned alpha
  int vllm_block_tokens = 32;    // kVllmPlus
  Accounting accounting = Accounting::kCorrected;
  core::ThreadPool* tuning_pool = nullptr;  // borrowed; null = replay serially
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

// Per-request record and the totals the simulator and the engine report.
struct HybridRequestStat {
  int64_t input_tokens = 0;
  int64_t hit_tokens = 0;
};
struct HybridCacheStats {
  int64_t requests = 0, hit_requests = 0, input_tokens = 0, hit_tokens = 0;
  Flops flops_saved = 0;
  int64_t evictions = 0, checkpoints_admitted = 0, branch_checkpoints = 0;
  // Eviction cost: victims chosen, candidates scored to choose them, and the candidate-set sizes
  // at those moments (scored / candidates = the fraction an eviction looks at).
  int64_t victim_searches = 0, victim_scored = 0, victim_candidates = 0;
  int64_t bootstrap_window = -1;  // marconi: requests replayed to tune alpha (-1: no eviction yet)
  bool alpha_tuned = false;
  double TokenHitRate() const { return input_tokens ? double(hit_tokens) / input_tokens : 0; }
  double RequestHitRate() const { return requests ? double(hit_requests) / requests : 0; }
};

// Admission with real states (the engine): where the caller holds the branch-point state
// (-1 = wherever the insertion splits, as in simulation) and the state-pool slots ("payloads")
// the new checkpoints take. A split at a position with no state leaves a stateless node
// (SGLang's tombstone): never a hit, merged away as soon as it has one child.
struct HybridAdmitOptions {
  int64_t branch_state_at = -1;
  int32_t branch_payload = -1, leaf_payload = -1;
};
struct HybridAdmitResult {
  bool branch_used = false, leaf_used = false;  // whether each offered payload was kept
  std::vector<int32_t> freed_payloads;          // payloads of checkpoints evicted meanwhile
};

// The seam the simulator and the engine use; one implementation per tree shape.
class HybridPrefixCache {
 public:
  virtual ~HybridPrefixCache() = default;
  // A request arrives: records its hit. REQUIRES: no Admit() pending for another request.
  virtual HybridLookup Lookup(std::span<const int32_t> input) = 0;
  // Phase one: what admitting `sequence` would need; changes nothing.
  virtual HybridReservation Reserve(std::span<const int32_t> sequence) const = 0;
  // Phase two: the request finished with `sequence` = input + output: evict what
  // Reserve() says must go, then admit its states.
  virtual void Admit(std::span<const int32_t> sequence) = 0;
  // Admit with real states (radix policies only; CHECK-fails for vllm+).
  virtual HybridAdmitResult AdmitStates(std::span<const int32_t> sequence, const HybridAdmitOptions& options) = 0;
  // The deepest checkpoint on tokens' path ending at or before `limit` tokens: its length (0 if
  // none) and node / payload (-1 if none). No side effects.
  virtual int64_t CheckpointAtOrBelow(std::span<const int32_t> tokens, int64_t limit, int32_t* node,
                                      int32_t* payload) const = 0;
  virtual void Lock(const HybridLookup& lookup) = 0;
  virtual void Unlock(const HybridLookup& lookup) = 0;
  virtual double TreeBytes() const = 0;
  virtual double alpha() const { return 0; }
  virtual const std::vector<HybridRequestStat>& history() const = 0;
  virtual HybridCacheStats Stats() const = 0;
  // Structural invariants (parent/child links, byte totals, lock counts); CHECK-fails if broken.
  virtual void CheckInvariants() const = 0;
  virtual int64_t NodeCount() const = 0;
};

std::unique_ptr<HybridPrefixCache> MakeHybridCache(const HybridCacheConfig& config,
                                                   const CostModel& cost);

// FLOPs saved over a request history, as the reference computes it (SSM term on the summed
// hit tokens, attention and MLP per request).
Flops HistoryFlopsSaved(const CostModel& cost, std::span<const HybridRequestStat> history);

}  // namespace radixlm::cache
