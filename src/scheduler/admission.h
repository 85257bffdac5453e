// Cache-aware admission order (SGLang's longest-prefix-first), with a starvation bound:
// waiting requests are admitted longest cached prefix first, so requests that share a prefix
// run while it is still cached; but any request that has waited `starvation_steps` steps goes
// ahead of all others, oldest first, so no request waits forever behind a stream of better
// cache hits. Deals in ids and counts only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace radixlm::scheduler {

struct SchedulerConfig {
  int max_running = 16;           // sequences in one batch
  int step_token_budget = 256;    // tokens computed per step (decodes + prefill chunks)
  int64_t starvation_steps = 32;  // after this long in the queue a request is served FCFS
  // A waiting request whose prompt shares at least this many tokens, past its cached prefix,
  // with a running prefill that has not computed them yet waits for that prefill to share them
  // (Room::ShareAhead) instead of computing them again (0: never). Applies where the executor
  // does not share a step's rows (hybrids; intra-step dedup off).
  int64_t await_shared_prefill = 64;
};

struct WaitingRequest {
  int64_t arrival = 0;            // submission order
  int64_t cached_tokens = 0;      // current longest cached prefix
  int64_t waited_steps = 0;
};

// Indices of `waiting` in the order to try admitting them.
std::vector<size_t> AdmissionOrder(std::span<const WaitingRequest> waiting, const SchedulerConfig& config);

}  // namespace radixlm::scheduler
