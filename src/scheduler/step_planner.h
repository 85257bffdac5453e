// Plans one engine step: which running sequences compute how many tokens, who is preempted when
// memory runs out, and which waiting requests are admitted. The policy lives here, as a function
// of ids, token spans and counts:
//  - a token budget per step: a decode costs 1 (plus the draft tokens it verifies, where the
//    budget and free memory allow), a prefill chunk what fits, ending on the
//    executor's alignment grid when it can (a chunked scan, --ssm-chunk N, is bitwise one
//    prefill only when its chunks meet the grid; the default exact recurrence needs none);
//  - rows of a chunk that a sequence already planned in this step computes (same context, same
//    tokens) are not charged when the executor computes them once (intra-step prefix dedup), so a
//    burst of prompts with one system prompt prefills together;
//  - out of memory, the newest running sequence not yet planned is preempted (its KV stays in
//    the cache, so the recompute usually finds it); a sequence that cannot grow even alone is
//    preempted itself;
//  - admission in AdmissionOrder (longest cached prefix first, starved requests oldest first),
//    stopping at the first request that does not fit (no overtaking) or when the budget and the
//    batch are full;
//  - where the executor does not share a step's rows, a waiting request whose prompt shares at
//    least `await_shared_prefill` uncached tokens with a running prefill still short of them
//    waits (it is passed over, not a stop) while that prefill computes them and shares them
//    ahead of its prompt's end (Room::ShareAhead): a burst of requests with one system prompt on
//    a hybrid model computes it once, then each its own suffix from the shared state;
//  - a waiting request the Room says awaits its prefix from elsewhere (another replica computing
//    it into a shared tier) is passed over too, until the Room says it no longer waits.
// Memory is asked, not modelled: a Room (the engine's cache::Memory, or a counting fake in the
// tests) grows, preempts and admits by id and says whether it could.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/admission.h"

namespace radixlm::scheduler {

struct PlannerConfig {
  SchedulerConfig scheduler;
  int64_t alignment = 0;        // prefill chunks end on multiples of this when they can (0: any)
  bool shares_step_prefixes = false;
};

// A sequence by id: running (memory holds `computed` tokens) or waiting (computed 0).
struct SeqView {
  int64_t id = 0;
  std::span<const int32_t> tokens;  // prompt + generated so far
  int64_t computed = 0;
  int64_t arrival = 0, waited_steps = 0;
  int64_t share_group = 0;  // rows are shared only within a group (a cache namespace)
  // The last `speculative` of `tokens` are a draft (speculative decoding): computed only in a
  // step whose chunk reaches them, as far as the budget and memory allow without preempting
  // anyone; the chunk is then cut or extended by draft tokens alone.
  int64_t speculative = 0;
};

// What the planner asks memory for. Every call may change memory; a false answer changed nothing.
class Room {
 public:
  virtual ~Room() = default;
  // Running sequence `id` needs memory for positions [0, upto).
  virtual bool Grow(int64_t id, int64_t upto) = 0;
  // Releases running sequence `id`'s memory (its computed KV stays cached).
  virtual void Preempt(int64_t id) = 0;
  // Tokens a hit would serve waiting request `id` now (no side effects).
  virtual int64_t CachedPrefix(int64_t id) const = 0;
  // Admits waiting request `id`; *computed: the cached prefix it now holds. `alone`: no other
  // sequence holds memory.
  virtual bool Admit(int64_t id, bool alone, int64_t* computed) = 0;
  // Asks running sequence `id`, which has computed fewer than `at` tokens, to make its first
  // `at` tokens reusable by others as soon as it has computed them (KV, and the recurrent state
  // there). false: it cannot (no prefix cache, or it promised another point).
  virtual bool ShareAhead(int64_t /*id*/, int64_t /*at*/) { return false; }
  // Whether waiting request `id` waits for its prefix from elsewhere (another replica computing
  // it into a shared tier): it is passed over this step, not a stop. May probe the tier.
  virtual bool AwaitsElsewhere(int64_t /*id*/) { return false; }
};

struct StepPlan {
  struct Chunk {
    int64_t id = 0;
    int64_t from = 0, n = 0;  // compute tokens [from, from + n)
    int64_t share_group = 0;
  };
  std::vector<Chunk> chunks;            // in execution order
  std::vector<int64_t> running;         // ids running after the step's admissions, in order
  std::vector<int64_t> waiting;         // ids waiting, in order (preempted first)
  std::vector<int64_t> preempted, admitted;
  // Waited steps of every waiting id after this step (those not admitted waited one more).
  std::vector<int64_t> waited_steps;    // parallel to `waiting`
};

StepPlan PlanStep(const PlannerConfig& config, std::span<const SeqView> running, std::span<const SeqView> waiting,
                  Room& room);

// Rows of a chunk of `tokens` from `start` that a sequence of the same share group already in
// `plan` computes: same context tokens[0, start) (it holds start tokens too), same tokens after.
int64_t RowsSharedWithPlan(std::span<const int32_t> tokens, int64_t start, int64_t share_group,
                           std::span<const StepPlan::Chunk> plan,
                           std::span<const std::span<const int32_t>> plan_tokens);

}  // namespace radixlm::scheduler
