// Runs an offline job's planned prefix groups on an engine (BatchLLM's group scheduling), on
// the calling thread.
//
// Owns only *when* each request enters the engine; the engine keeps its own scheduler (token
// budget per step, KV room, preemption, the radix cache). Called by `radixlm batch` with the
// groups of scheduler::PlanBatch; tests drive it on real models.
//
// Per group, in plan order: a group that shares a prefix first submits a prompt-only request
// for the prefix (computed once; it lands in the radix cache), and when that finishes, all its
// members at once: they find the prefix cached, hold its blocks (so it cannot be evicted while
// the group is live) and decode together (one cascade group). The next group starts while the
// projected KV of the groups in flight (each prefix once + every member's own and generated
// tokens) stays under the budget: memory-centric batching with no request cap, so a prefix is
// never evicted before its members come and decodes of early groups mix with later prefills.
// With `submit_all`, every item is submitted at once in item order and nothing is warmed: the
// job as a server would see it if a client sent the whole file (the baseline).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/status.h"
#include "engine/engine.h"
#include "scheduler/batch_plan.h"

namespace radixlm::engine {

struct BatchRunnerOptions {
  double kv_budget = 0.9;   // fraction of the KV pool the groups in flight may project to fill
  bool submit_all = false;  // the baseline: everything at once, in item order, no warm-up
};

struct BatchRunStats {
  int64_t warm_requests = 0, warm_tokens = 0;  // prompt-only prefix requests and their tokens
  int64_t max_groups_in_flight = 0;
};

// Every event of item i's request; return false to end it early (the caller has what it
// wants, e.g. a stop string: it finishes as stopped). A request the engine refuses gets one
// final kError event with the reason.
using BatchItemEvent = std::function<bool(int64_t item, const TokenEvent& ev)>;

// REQUIRES: the groups cover item indices at most once; members of a group with prefix P start
// with the same P tokens. Items not in any group are not run.
BatchRunStats RunBatchGroups(Engine& engine, std::span<const RequestParams> items,
                             std::span<const scheduler::PrefixGroup> groups, const BatchRunnerOptions& options,
                             const BatchItemEvent& on_event);

}  // namespace radixlm::engine
