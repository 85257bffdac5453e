// Multi-turn workloads for `radixlm replay`, read from a data folder: MT-Bench two-turn
// conversations (the model's own answer goes into the history) and SWE-agent trajectories (each
// assistant turn is requested with the trajectory's real history before it, its recorded answer
// kept for --recorded).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace radixlm::replay {

struct Turn {
  std::vector<tokenizer::ChatMessage> history;  // for SWE-agent: the real history before the turn
  std::string recorded;                          // SWE-agent: the assistant message the trajectory recorded
};
struct Conversation {
  std::string name;
  std::vector<Turn> turns;
  bool model_answers_in_history = false;  // MT-Bench: the next turn includes the generated answer
};

// name: "mtbench" (DATA/chat/mt_bench_questions.jsonl) or "swe-agent" (DATA/agents/swe_agent/*.traj,
// in name order); at most max_conv conversations of at most max_turns turns. A malformed line or
// file is an error naming it.
core::StatusOr<std::vector<Conversation>> LoadWorkload(const std::string& name, const std::string& data, int max_conv,
                                                       int max_turns);

// A chat service's shared system prompt: the first message of every request, unless the
// conversation already starts with a system message of its own.
void AddSystemPrompt(std::vector<Conversation>& convs, const std::string& prompt);

}  // namespace radixlm::replay
