// Offline batch planning (BatchLLM, ../shared/specs/batchllm-reference.md): an offline job knows
// all its prompts up front, so instead of caching prefixes in arrival order it plans them.
//
// Owns nothing but the plan. Pure code over token ids (no engine, no model): `radixlm batch`
// tokenizes the job, calls PlanBatch, and hands the groups to the engine in the plan's order;
// tests check it on hand-built trees with known optima.
//
// What it computes:
//  - the compact prefix tree of all prompts (a node per run of tokens every prompt below it
//    shares; single-child chains merged);
//  - prefix-sharing groups: one level of sharing, each group a prefix computed once and members
//    that continue it. Two ways to choose them: the paper's Algorithm 1 (enlarge the first-level
//    prefixes bottom-up while (members - 1) * tokens > the fork's cost), and the exact optimum
//    of the same objective (sum over groups of (members - 1) * prefix) by dynamic programming
//    over the tree;
//  - the order groups run in (Eq. 3: ascending total prefill tokens, ties by the first prompt);
//  - the predicted saving against no sharing and against the ideal (every shared token once);
//  - a balanced split of whole groups over N workers (MPI ranks) by predicted cost.
// Invariants of a plan: every prompt is in exactly one group; a group's prefix is a common
// prefix of all its members and shorter than each (a member keeps >= 1 token of its own, which
// produces its first logits); a group of one member shares nothing (prefix 0).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace radixlm::scheduler {

enum class Grouping {
  kNone,    // every prompt alone
  kPaper,   // BatchLLM Algorithm 1 (greedy first-level enlargement)
  kExact,   // the optimum of the same one-level objective (DP over the tree)
};

enum class GroupOrder {
  kPrefill,  // Eq. 3: ascending total prefill tokens (prefix once), ties by first prompt
  kFile,     // by first prompt index (the job's order)
};

struct PrefixGroup {
  int64_t prefix_tokens = 0;     // shared by every member; 0 for a group of one
  std::vector<int64_t> members;  // prompt indices, ascending
};

struct BatchPlanStats {
  int64_t prompts = 0;
  int64_t prompt_tokens = 0;     // N_logical: every prompt in full
  int64_t planned_tokens = 0;    // computed under the plan: each prefix once, each member's rest
  int64_t ideal_tokens = 0;      // every shared token once: the compact tree's total length
  int64_t groups = 0, shared_groups = 0;  // shared: two or more members
  double saving() const { return prompt_tokens ? 1.0 - double(planned_tokens) / double(prompt_tokens) : 0.0; }
  double ideal_saving() const { return prompt_tokens ? 1.0 - double(ideal_tokens) / double(prompt_tokens) : 0.0; }
};

struct BatchPlan {
  std::vector<PrefixGroup> groups;  // in execution order
  BatchPlanStats stats;
};

BatchPlan PlanBatch(std::span<const std::vector<int32_t>> prompts, Grouping grouping = Grouping::kExact,
                    GroupOrder order = GroupOrder::kPrefill);

// Sum over groups of (members - 1) * prefix (the one-level saving, before the one-token cap)
// that a grouping mode reaches on these prompts; for tests against known optima.
int64_t GroupingSaving(std::span<const std::vector<int32_t>> prompts, Grouping grouping);

// Whole groups over `workers` by predicted cost (tokens to compute + tokens to generate), the
// longest first to the least loaded (LPT): the worker of each group, in the plan's group order.
// `generate[i]`: tokens prompt i may generate.
std::vector<int> ShardGroups(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                             std::span<const int64_t> generate, int workers);

// The plan with every group whose cost exceeds a worker's fair share (total / workers) cut into
// about cost / share pieces of consecutive members, each computing the prefix once more (a
// piece of one member shares nothing): without it one big group (a system prompt shared by the
// whole job) could not be balanced over workers. Stats updated; workers <= 1: the plan as is.
BatchPlan SplitLargeGroups(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                           std::span<const int64_t> generate, int workers);

// Predicted cost of a group: prefix once + each member's own tokens + its generated tokens.
int64_t GroupCost(const PrefixGroup& g, std::span<const std::vector<int32_t>> prompts, std::span<const int64_t> generate);

// max / mean of the workers' predicted costs under ShardGroups (1.0 = perfectly even).
double ShardImbalance(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                      std::span<const int64_t> generate, int workers);

}  // namespace radixlm::scheduler
