// `replay --recorded`: every SWE-agent turn's recorded answer replayed as the request's
// continuation (the engine computes its KV as if it had generated it, and checks drafts against
// it as against sampled tokens), one request at a time in trajectory order on one engine: what
// speculation would accept on real agent output, and what it saves in engine steps and time.
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "replay/workload.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace radixlm::replay {

// Answers are cut to max_tokens; a turn whose answer has fewer than 2 tokens or that does not fit
// the engine is skipped (counted). The report: requests, skipped, prompt / recorded / cached
// tokens, decode steps and tokens per step, decode time and rate, and drafted / accepted tokens,
// in all and by draft origin.
core::StatusOr<nlohmann::json> RunRecorded(engine::Engine& eng, const std::vector<Conversation>& convs,
                                           const tokenizer::Tokenizer& tok, const tokenizer::ChatTemplate& format,
                                           int max_tokens);

}  // namespace radixlm::replay
