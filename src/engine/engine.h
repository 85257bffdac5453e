// The engine loop: continuous batching with chunked prefill over a paged KV pool, with or
// without the radix prefix cache. One step: take new submissions and cancellations, make sure
// every running sequence has blocks for this step (evicting cached prefixes, else preempting
// the newest request), admit waiting requests cache-aware (scheduler::AdmissionOrder) within
// the step's token budget, run the executor, sample, stream tokens, finish.
//
// Walkthrough of one request: Submit() validates it (ids in vocabulary, fits the context and
// the pool) and queues it. At admission the cache Reserve()s its longest cached prefix and the
// blocks for the rest of the prompt, and Commit() locks that prefix. Prefill runs in chunks of
// the step budget; when the prompt is done, its KV is inserted into the tree so concurrent
// requests can share it. Each decode step computes one token's KV and samples the next. On
// finish everything computed is inserted, the lock dropped, the request's own blocks released.
// A full pool is never an error: requests wait, cached prefixes are evicted (LRU), and as a
// last resort the newest running request is preempted and later recomputed (its prefix is
// usually still cached).
//
// Threading: Submit/Cancel/Metrics are thread-safe; Step() runs on one thread (Start() runs it
// in a background loop). Token callbacks run on the engine thread.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/kv_events.h"
#include "cache/memory.h"
#include "core/status.h"
#include "engine/clock.h"
#include "engine/executor.h"
#include "engine/request.h"
#include "scheduler/step_planner.h"
#include "speculate/draft_source.h"

namespace radixlm::core {
class ThreadPool;
}

namespace radixlm::engine {

// The cache's KV events as the engine publishes them (serve sees the engine, not the cache).
using KvEvent = cache::KvEvent;

// Speculative decoding (speculate/draft_source.h): a decoding request's draft joins the step
// as extra rows after its next token; the rows' logits are sampled in order and the draft's
// tokens are kept as long as the model itself produced them (for a draft of fixed tokens this
// is the standard rejection rule: each kept token is a draw from the model's distribution, the
// first disagreeing draw is the next token), so outputs are those of decoding without it.
// Rejected rows are rolled back: the sequence's length is set back, blocks past it are freed,
// the radix tree never sees them, and a recurrent model's state is restored from the state
// captured before the draft (Memory::DraftSlot); the accepted tokens are then recomputed as
// rows of the next step.
struct SpeculateConfig {
  std::string source = "off";  // off | a row of speculate::Sources()
  // Tokens per draft at most. Below it, each draft's length maximises the step's expected
  // tokens per second (speculate::BestDraftLength): the request's acceptance so far
  // (speculate::DraftPolicy) against what steps of so many rows took on this machine
  // (speculate::StepCost, learned from the engine's own steps), so a draft is made only where
  // it pays: not when the batch already keeps the CPU busy, nor for text that does not repeat.
  int draft_max = 8;
  int min_match = 2;           // context tokens a draft's place must share at least
  // Drafts only while the step's decode rows stay within this: past it the batch alone keeps
  // the CPU's arithmetic busy, and verifying a draft costs as much as computing a token.
  int max_step_rows = 16;
  int64_t suffix_index_tokens = 1 << 20;  // the tree source's index of recent sequences
  bool adapt = true;  // false: every draft as long as its source gives (tests, measurements)
  bool on() const { return source != "off"; }
};

// Counters of one draft origin (speculate::Origin).
struct SpeculationCounts {
  int64_t steps = 0;     // verifications: a request's step that computed a draft
  int64_t drafted = 0;   // draft tokens computed
  int64_t accepted = 0;  // of which the model produced
  // Recurrent models: accepted tokens computed again after a rollback (the state went back to
  // before the draft; they are rows of the next step).
  int64_t recomputed = 0;
};

// The name of EngineMetrics::speculation[i]'s draft origin ("context", "suffix", "radix").
inline const char* SpeculationOrigin(size_t i) { return speculate::OriginName(static_cast<speculate::Origin>(i)); }

struct EngineConfig {
  // kByteBudget: the executor stores nothing (a cost model) and the hybrid cache policy alone
  // decides hits (cache::Memory); the pool's size is then irrelevant.
  cache::MemoryMode memory_mode = cache::MemoryMode::kBlockPool;
  // Borrowed: a step's rows are sampled on it in parallel (the executor's pool, idle by then;
  // each request's sampler has its own seeded generator, so the tokens do not depend on it).
  // Null: in order on the engine thread.
  core::ThreadPool* sampling_pool = nullptr;
  int32_t num_blocks = 1024;
  int32_t block_tokens = 16;
  bool prefix_cache = true;
  std::string kv_eviction = "lru";  // the radix tree's eviction policy (cache/kv_policy.h)
  scheduler::SchedulerConfig scheduler;
  // Models with recurrent layers and a hybrid cache: state slots holding cached checkpoints,
  // after the 2 x max_running working and branch-capture slots (plus 2 for admission).
  int32_t checkpoint_slots = 0;
  // Hybrid cache: keep each prompt's end state too (cache::MemoryConfig::prompt_end_checkpoints).
  bool prompt_end_checkpoints = false;
  int64_t prompt_end_min_gap = 0;
  SpeculateConfig speculate;
  // Ids from this one on are never sampled (0: every row): a model's output rows past its
  // tokenizer's tokens (padding, or a mismatched tokenizer) have no text to give.
  int64_t sampled_vocab = 0;
  // A tier shared with other replicas: a request whose prefix another replica is computing into
  // it waits for the blocks (passed over by the scheduler) as long as computing them here would
  // take at the measured prefill rate, rather than computing them (attach across hosts).
  bool await_elsewhere = true;
};

struct EngineMetrics {
  int64_t requests_submitted = 0, requests_finished = 0, requests_rejected = 0, preemptions = 0;
  // Prefix-cache hits, counted at each request's first admission (served and simulated alike).
  int64_t admitted_requests = 0, hit_requests = 0;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, computed_tokens = 0, generated_tokens = 0;
  int64_t waiting = 0, running = 0, steps = 0;
  int32_t blocks_in_use = 0, blocks_total = 0;
  int64_t tree_cached_tokens = 0, evicted_tokens = 0;
  int64_t deduplicated_tokens = 0;  // of computed_tokens, rows another sequence of the step computed
  // The tier under the pool (cache::Memory::TierStats): of cached_prompt_tokens, those loaded
  // from the tier; blocks loaded, loads that failed (recomputed), blocks offered to it.
  int64_t tier_hit_tokens = 0, tier_loaded_blocks = 0, tier_failed_loads = 0, tier_offered_blocks = 0;
  double tier_load_seconds = 0;  // wall time the engine waited for loads (on its clock)
  // Attach across hosts: requests that waited for a prefix another replica was computing, the
  // waits that ran out (computing it here would have been as quick), and the time they waited.
  int64_t remote_waits = 0, remote_wait_timeouts = 0;
  double remote_wait_seconds = 0;
  double step_seconds_total = 0;
  std::array<SpeculationCounts, speculate::kOrigins> speculation{};  // by speculate::Origin
  SpeculationCounts SpeculationTotal() const {
    SpeculationCounts t;
    for (const SpeculationCounts& c : speculation)
      t.steps += c.steps, t.drafted += c.drafted, t.accepted += c.accepted, t.recomputed += c.recomputed;
    return t;
  }
  double TokenHitRate() const { return prompt_tokens ? double(cached_prompt_tokens) / prompt_tokens : 0; }
  double RequestHitRate() const { return admitted_requests ? double(hit_requests) / admitted_requests : 0; }
};

class Engine {
 public:
  // caches: the prefix-cache policies memory uses (borrowed; see cache::PrefixCaches): for
  // serving, the hybrid cache of a model with recurrent layers (null = no prefix reuse for such
  // a model), whose capacity must be checkpoint_slots checkpoints. clock: borrowed; null = the
  // wall clock.
  Engine(EngineConfig config, Executor& executor, cache::PrefixCaches caches = {}, const Clock* clock = nullptr);
  ~Engine();

  // Queues a request; the callback receives every token and a final event.
  core::StatusOr<RequestId> Submit(RequestParams params, TokenCallback callback);
  void Cancel(RequestId id);
  // The client has what it wants (a stop string in the text): the request finishes at the next
  // step as if it had stopped (FinishReason::kStop), its computed tokens kept in the cache as
  // at a natural finish (a cancel discards them).
  void EndEarly(RequestId id);

  // One step of the loop; returns false when there was nothing to do.
  bool Step();
  // Steps until no request is waiting or running (tests, offline runs).
  void RunUntilIdle();
  // Background loop.
  void Start();
  void Stop();

  // KV cache events (cache/kv_events.h): after every step that changed which full blocks the
  // prefix cache holds, `sink` gets that step's events, on the engine thread (keep it short:
  // hand them to another thread). ssm_checkpoints: a hybrid model's checkpoints too (the
  // extension). REQUIRES: before Start. An error without the prefix cache, or when
  // checkpoints are asked of a model without them.
  core::Status PublishKvEvents(cache::BlockHasher hasher, std::function<void(std::vector<cache::KvEvent>)> sink,
                               bool ssm_checkpoints = false);
  // The keys of every full block the prefix cache holds now, sorted (a router's resync
  // snapshot), computed on the engine loop. REQUIRES: PublishKvEvents; the loop running.
  // nullopt when the loop did not answer within `timeout`.
  std::optional<std::vector<uint64_t>> CachedBlockKeys(std::chrono::milliseconds timeout);
  // The same for SSM checkpoints (cache::CachedStateKeys); empty unless they are published.
  std::optional<std::vector<uint64_t>> CachedStateKeys(std::chrono::milliseconds timeout);
  bool publishes_ssm_checkpoints() const { return kv_states_; }
  // Runs fn on the engine loop at the start of its next step (idle: within ~50 ms).
  void RunOnLoop(std::function<void()> fn);

  EngineMetrics Metrics() const;
  const cache::RadixTree* tree() const { return memory_.tree(); }
  const cache::BlockPool& pool() const { return memory_.pool(); }
  const cache::Memory& memory() const { return memory_; }
  // The tier under the KV pool (null: none); its Report() is thread-safe.
  const cache::BlockTier* tier() const { return memory_.tier(); }
  const EngineConfig& config() const { return config_; }
  // The most tokens (prompt + max_tokens) one request can hold: the model's context or the
  // whole KV pool, whichever is smaller; Submit refuses more.
  int64_t max_request_tokens() const { return std::min(executor_.max_context(), memory_.max_sequence_tokens()); }

 private:
  struct SampledInfo {
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
  };
  struct Req {
    RequestId id = 0;
    RequestParams params;
    TokenCallback callback;
    std::vector<int32_t> tokens;        // prompt + generated
    int64_t prompt_len = 0;
    int64_t computed = 0;               // tokens whose KV (and state) memory holds
    bool prompt_inserted = false;
    cache::MemorySeq mem;               // blocks, locks and state slots: Memory's to change
    sampling::Sampler sampler;
    SampledInfo last;                   // logprobs of the token just sampled
    std::string error;                  // why a kError finish happened
    Usage usage;
    bool first_admission = true;
    // Attach across hosts: when it began waiting for another replica's blocks (-1: it did not),
    // until when it may, the tokens it lacked at the last progress, whether the wait is over;
    // when its own marks were last set (-1: none).
    double await_since = -1, await_until = 0;
    int64_t await_missing = -1;
    bool await_over = false;
    double marked_at = -1, marked_rate = 0;
    bool cancelled = false;
    bool end_early = false;  // with cancelled: finish as stopped, keep the cache
    int64_t arrival = 0, waited_steps = 0;
    double submit_time = 0;
    // Speculative decoding: the last `drafted` of `tokens` are this step's draft.
    int64_t drafted = 0;
    speculate::Origin draft_origin = speculate::Origin::kContext;
    int draft_match = 0;  // the context match that found the draft
    speculate::DraftPolicy draft_policy;
    Req(const sampling::SamplingParams& s, const SpeculateConfig& spec) : sampler(s), draft_policy(spec.min_match) {}
  };
  // A token a step produced for a request, with what its event carries.
  struct Emitted {
    int32_t token = -1;
    double logprob = 0;  // for best_of's cumulative log-probability
    SampledInfo info;
  };
  struct Produced {
    std::vector<Emitted> tokens;
    bool no_token = false;  // the constraint allowed none after these
  };

  // Draws r's next token from its logits row (processors, constraint, sampler); -1 when the
  // constraint allows none. cumulative: the drawn token's log-probability (best_of).
  void SampleRow(Req& r, std::span<float> logits, int64_t generated, int32_t* token, double* cumulative, SampledInfo* info);
  // r's tokens from its logit rows (its next token, then one per draft token while the draft
  // agrees with what was drawn), or from its recorded continuation.
  void SampleRows(Req& r, float* logits, int32_t rows, Produced* out);
  void ContinueRecorded(const Req& r, Produced* out) const;
  // Speculative decoding: appends drafts to the running requests before the step is planned;
  // after planning, takes back the draft tokens a request's chunk does not reach; after the
  // step, keeps the accepted ones and rolls the rest back.
  void ProposeDrafts();
  void DropDraft(Req& r, int64_t keep);
  void SettleDraft(Req& r, const Produced& produced);
  // Emits r's produced tokens in order (events, stop, length); false when r finished.
  bool EmitTokens(std::unique_ptr<Req>& owner, Produced& produced);
  // The pieces of a step. Planned: a request and the tokens the step computes for it.
  struct Planned {
    Req* r;
    int64_t n;
  };
  class PlanRoom;
  // The scheduler's plan (chunks, preemptions, admissions); the running and waiting lists in
  // its order. by_id: every request of the step; copies: the block copies admissions made.
  scheduler::StepPlan PlanAndReorder(std::unordered_map<RequestId, Req*>* by_id, std::vector<BlockCopy>* copies);
  std::vector<StepSequence> BuildSequences(std::span<const Planned> planned);
  // Every planned request's tokens from its logit rows (requests in parallel on the sampling pool).
  void SampleAll(std::span<const Planned> planned, std::span<const StepSequence> seqs, std::vector<Produced>* produced);
  // After the step: r computed n more tokens; settles its draft, publishes, emits what it
  // produced. Returns the tokens emitted.
  int64_t Advance(Req& r, int64_t n, Produced& produced);
  void DrainInbox();
  // alone: no other request holds memory.
  bool Admit(Req& r, std::vector<BlockCopy>* copies, bool alone);
  void Preempt(Req& r);
  // Releases r's memory and makes the state copies memory asks for.
  void Release(Req& r, cache::ReleaseMode mode);
  // Releases the request, delivers the final event (with `last_token` when one ends it).
  void Finish(std::unique_ptr<Req>& r, FinishReason reason, int32_t last_token = -1);
  // Hands the blocks memory offered to the tier to the executor (right after the call that
  // offered them: their pool blocks may be reused by what follows).
  void StoreToTier();
  // Attach across hosts (cache/block_tier.h MarkComputing): whether waiting r waits for its
  // prefix from another replica; r's marks on the blocks it computes (set at admission,
  // refreshed as its prefill goes on, cleared once its prompt's blocks are stored).
  bool AwaitsElsewhere(Req& r);
  void MarkComputing(Req& r);
  void RefreshMarks(Req& r);
  double MarkSeconds() const;
  // What a step's timing teaches: a decode-only step the draft cost model, a step mostly of
  // prefill rows the prefill rate (attach across hosts bounds its waits by it).
  void ObserveStep(bool decode_only, int64_t computed, int64_t prefill, double seconds);
  void PublishMetrics(int64_t computed, int64_t generated, double seconds);

  static cache::MemoryConfig MemoryConfigOf(const EngineConfig& config, const Executor& executor);

  EngineConfig config_;
  Executor& executor_;
  WallClock wall_clock_;
  const Clock* clock_;
  cache::Memory memory_;
  std::vector<std::unique_ptr<Req>> waiting_, running_;

  mutable std::mutex mu_;  // guards inbox_, cancels_, tasks_, metrics_, next_id_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Req>> inbox_;
  std::vector<std::pair<RequestId, bool>> cancels_;  // (id, end early)
  std::vector<std::function<void()>> tasks_;         // RunOnLoop's
  EngineMetrics metrics_;
  RequestId next_id_ = 1;
  int64_t arrivals_ = 0;

  std::thread loop_;
  std::atomic<bool> stop_{false};
  std::vector<float> logits_;
  std::unique_ptr<cache::KvEventLog> kv_events_;  // the tree's observer when events are published
  std::function<void(std::vector<cache::KvEvent>)> kv_sink_;
  bool kv_states_ = false;
  std::unique_ptr<speculate::DraftSource> drafter_;  // null: no speculative decoding
  double prefill_rate_ = 0;  // rows per second of steps mostly of prefill rows (smoothed)
  speculate::StepCost step_cost_;                    // decode steps' durations by rows
  speculate::AcceptanceByMatch acceptance_;          // draft tokens accepted, by match length
};

}  // namespace radixlm::engine
