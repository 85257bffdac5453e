// Replaying a workload through radixlm's HTTP server as concurrent clients see it: streamed chat
// completions on loopback, each prompt rendered with the server's chat template and tokenized
// client-side with the same tokenizer, so the oracle sees exactly the ids the server sees.
// Oracle: an unbounded cache holding every earlier prompt and every finished request's prompt +
// output (minus its last token, whose KV is never computed); a prompt's oracle hit is its longest
// prefix there, capped at all but its last token as the engine caps matches.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "replay/workload.h"
#include "sim/trace.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::replay {

struct RunResult {
  // Token counts are over the requests that ran (an error has no usage): the oracle's too, so
  // its hit rate is an upper bound of the server's on the same requests.
  int64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, oracle_tokens = 0, completion_tokens = 0, errors = 0;
  std::map<std::string, std::pair<int64_t, std::string>> errors_by_cause;  // "HTTP 400 code" -> (count, first message)
  std::vector<sim::TraceRequest> trace;  // requests as served, in completion order (Marconi schema)
  std::vector<double> ttft;
  double seconds = 0;
  nlohmann::json ToJson() const;
};

struct ClientOptions {
  int clients = 4;      // concurrent clients, each taking the next conversation
  int max_tokens = 16;  // greedy tokens per request
};

// The workload against a server listening on host:port as model_name (a progress bar on stderr).
RunResult Replay(const std::string& host, int port, const std::string& model_name, const std::vector<Conversation>& convs,
                 const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format, const ClientOptions& o);

// Starts an in-process serve::Server on a free loopback port over eng (which must not be
// running), replays the workload through it with fixed-length answers (no stop tokens), stops
// both. The report is RunResult::ToJson plus the engine's computed / deduplicated tokens,
// preemptions and the radix tree's block-aligned hit rate and copy-on-write copies.
core::StatusOr<RunResult> ReplayInProcess(engine::Engine& eng, const std::vector<Conversation>& convs,
                                          const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format,
                                          const ClientOptions& o, nlohmann::json* report);

}  // namespace radixlm::replay
