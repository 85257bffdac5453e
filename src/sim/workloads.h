// Generators for the three workload shapes of Marconi's evaluation (§5.1), written as traces in
// Marconi's schema. The source datasets (LMSys-Chat-1M, ShareGPT, SWE-bench trajectories) are
// not available here, so turn lengths are drawn from log-normal distributions with the
// datasets' published means; token ids are random Llama-2-vocabulary ids. The *structure* is
// the recipe's:
//   lmsys / sharegpt  multi-turn chat, >= 10 turns per session, session i starts at i / sps,
//                     the next turn arrives after the reply plus the user's typing time
//                     (words / (90 wpm / 60)); a session stops once its context would pass
//                     32,768 tokens. Sessions open with one of a few shared system prompts.
//   swebench          agent sessions: one long shared system prompt + demonstration, a
//                     per-session issue, then [observation, action] pairs; the gap between
//                     turns is Poisson(art) seconds; once an observation falls out of the last
//                     five it is collapsed to a short placeholder (SWE-agent's history
//                     processor), so each input rewrites history in the middle. A session
//                     stops at 32,768 tokens or 50 turns.
// regenerate (default 0): the chance that a turn is sent again verbatim (the user asks for
// another answer; the agent retries its step) a few seconds later, with a new output the
// session then continues from.
// Same knobs and seed -> same trace, byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "sim/trace.h"

namespace radixlm::sim {

struct WorkloadOptions {
  std::string kind;        // lmsys | sharegpt | swebench
  int sessions = 100;
  double sessions_per_second = 1.0;
  double mean_agent_gap_s = 7.5;  // swebench: "art", mean time between agent turns
  uint64_t seed = 0;
  int64_t max_context = 32768;
  int max_turns = 50;
  double regenerate = 0;
};

// Emits the requests in arrival order.
core::Status GenerateWorkload(const WorkloadOptions& options,
                              const std::function<void(const TraceRequest&)>& emit);

}  // namespace radixlm::sim
