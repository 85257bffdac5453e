#include "scheduler/step_planner.h"

#include <algorithm>
#include <deque>

namespace radixlm::scheduler {

int64_t RowsSharedWithPlan(std::span<const int32_t> tokens, int64_t start, int64_t share_group,
                           std::span<const StepPlan::Chunk> plan,
                           std::span<const std::span<const int32_t>> plan_tokens) {
  if (start >= static_cast<int64_t>(tokens.size())) return 0;
  int64_t best = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const std::span<const int32_t> other = plan_tokens[k];
    if (plan[k].share_group != share_group || plan[k].from != start || other[start] != tokens[start]) continue;
    const int64_t end = std::min<int64_t>(start + plan[k].n, static_cast<int64_t>(tokens.size()));
    const int64_t common = std::mismatch(tokens.begin(), tokens.begin() + end, other.begin()).first - tokens.begin();
    if (common > start) best = std::max(best, common - start);
  }
  return best;
}

namespace {
// Waiting requests (in queue order) checked for a running prefill to wait for, per step.
constexpr int kMaxAwaitedPerStep = 64;

// The draft tokens a chunk of n tokens of r also computes: when it reaches the draft, as many
// as the budget left after it allows and memory gives without preempting anyone.
int64_t DraftRows(const SeqView& r, int64_t n, int64_t budget, Room& room) {
  if (r.speculative <= 0 || r.computed + n + r.speculative != static_cast<int64_t>(r.tokens.size())) return 0;
  const int64_t d = std::min<int64_t>(r.speculative, std::max<int64_t>(budget - n, 0));
  return d > 0 && room.Grow(r.id, r.computed + n + d) ? d : 0;
}
}  // namespace

StepPlan PlanStep(const PlannerConfig& config, std::span<const SeqView> running_in, std::span<const SeqView> waiting_in,
                  Room& room) {
  StepPlan plan;
  std::vector<SeqView> running(running_in.begin(), running_in.end());
  std::deque<SeqView> waiting(waiting_in.begin(), waiting_in.end());
  std::vector<std::span<const int32_t>> plan_tokens;
  int64_t budget = config.scheduler.step_token_budget;
  const bool shares = config.shares_step_prefixes;
  auto shared_with_plan = [&](const SeqView& s, int64_t start) {
    return shares ? RowsSharedWithPlan(s.tokens, start, s.share_group, plan.chunks, plan_tokens) : 0;
  };
  // A prefill chunk of at most n tokens ending on the alignment grid when it can (too small a
  // budget to reach the grid: split anyway).
  auto aligned = [&](int64_t computed, int64_t n, int64_t remaining) {
    if (config.alignment <= 0 || n >= remaining) return n;
    const int64_t end = (computed + n) / config.alignment * config.alignment;
    return end > computed ? end - computed : n;
  };
  auto plan_chunk = [&](const SeqView& s, int64_t n, int64_t shared) {
    plan.chunks.push_back({s.id, s.computed, n, s.share_group});
    plan_tokens.push_back(s.tokens);
    budget -= std::max<int64_t>(n - shared, 0);
  };
  auto preempt = [&](size_t i) {
    room.Preempt(running[i].id);
    plan.preempted.push_back(running[i].id);
    SeqView w = running[i];
    w.computed = 0;
    w.tokens = w.tokens.first(w.tokens.size() - static_cast<size_t>(w.speculative));  // a draft goes with its memory
    w.speculative = 0;
    waiting.push_front(w);  // the last preempted first
    running.erase(running.begin() + static_cast<int64_t>(i));
  };

  // 1. Running sequences: decodes take one token each, prefills a chunk of the budget.
  for (size_t i = 0; i < running.size(); ++i) {
    const SeqView& r = running[i];
    const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.speculative - r.computed;
    const bool decode = remaining == 1;
    const int64_t shared = decode ? 0 : shared_with_plan(r, r.computed);
    const int64_t n =
        decode ? 1 : aligned(r.computed, std::min(remaining, shared + std::max<int64_t>(budget, 0)), remaining);
    if (n <= 0) continue;
    bool room_ok = room.Grow(r.id, r.computed + n);
    // Out of memory: preempt the newest running sequence not planned yet.
    while (!room_ok && running.size() - 1 > i) {
      preempt(running.size() - 1);
      room_ok = room.Grow(running[i].id, running[i].computed + n);
    }
    if (!room_ok) {  // even alone it cannot grow: give its memory back and retry later
      preempt(i);
      --i;
      continue;
    }
    plan_chunk(running[i], n + DraftRows(running[i], n, budget, room), shared);
  }

  // 2. Admit waiting requests, cache-aware, while budget (or rows shared with the plan) and
  // batch slots remain; stop at the first that does not fit (no overtaking). A request that a
  // running prefill will share ahead waits for it (passed over, not a stop).
  const int max_running = config.scheduler.max_running;
  const int64_t await = shares ? 0 : config.scheduler.await_shared_prefill;
  auto awaits_a_running_prefill = [&](const SeqView& w, int64_t cached) {
    const int64_t prompt = static_cast<int64_t>(w.tokens.size()) - 1;  // its last token is always computed
    int64_t best = 0, leader = -1;
    for (const SeqView& r : running) {
      if (r.share_group != w.share_group) continue;
      const int64_t end = std::min<int64_t>(prompt, static_cast<int64_t>(r.tokens.size()) - 1);
      if (end - cached < await || r.computed >= end) continue;
      const int64_t common = std::mismatch(w.tokens.begin(), w.tokens.begin() + end, r.tokens.begin()).first - w.tokens.begin();
      if (common - cached >= await && common > r.computed && common > best) best = common, leader = r.id;
    }
    return leader >= 0 && room.ShareAhead(leader, best);
  };
  // Promises are asked for even in a step with no budget left, so that a leader does not pass
  // the point before the followers' turn comes (the first waiting requests only, to bound the
  // comparisons on a long queue).
  std::vector<char> admitted(waiting.size(), 0), awaiting(waiting.size(), 0);
  std::vector<int64_t> cached(waiting.size(), -1);
  if (await > 0)
    for (size_t i = 0; i < waiting.size() && i < static_cast<size_t>(kMaxAwaitedPerStep); ++i) {
      cached[i] = room.CachedPrefix(waiting[i].id);
      awaiting[i] = awaits_a_running_prefill(waiting[i], cached[i]);
    }
  if ((budget > 0 || shares) && static_cast<int>(running.size()) < max_running && !waiting.empty()) {
    std::vector<WaitingRequest> views;
    int checks = 0;
    for (size_t i = 0; i < waiting.size(); ++i)
      views.push_back({waiting[i].arrival, cached[i] >= 0 ? cached[i] : room.CachedPrefix(waiting[i].id), waiting[i].waited_steps});
    for (size_t idx : AdmissionOrder(views, config.scheduler)) {
      if (static_cast<int>(running.size()) >= max_running) break;
      SeqView w = waiting[idx];
      // A running prefill (or one admitted just now) computes its prefix and shares it ahead.
      if (awaiting[idx] || (await > 0 && checks++ < kMaxAwaitedPerStep && awaits_a_running_prefill(w, views[idx].cached_tokens)))
        continue;
      // Out of budget, a request is still admitted when its first rows are shared with the plan
      // (it starts where its cached prefix ends); otherwise keep the order and wait.
      if (budget <= 0 && shared_with_plan(w, views[idx].cached_tokens) == 0) break;
      if (!room.Admit(w.id, running.empty(), &w.computed)) break;
      admitted[idx] = 1;
      plan.admitted.push_back(w.id);
      const int64_t remaining = static_cast<int64_t>(w.tokens.size()) - w.computed;
      const int64_t shared = shared_with_plan(w, w.computed);
      const int64_t n = aligned(w.computed, std::min(remaining, shared + std::max<int64_t>(budget, 0)), remaining);
      running.push_back(w);
      if (n > 0) plan_chunk(w, n, shared);  // else admitted with no rows this step: it starts in the next
    }
    for (size_t i = 0; i < waiting.size(); ++i)
      if (!admitted[i]) ++waiting[i].waited_steps;
  }
  for (const SeqView& r : running) plan.running.push_back(r.id);
  for (size_t i = 0; i < waiting.size(); ++i)
    if (!admitted[i]) {
      plan.waiting.push_back(waiting[i].id);
      plan.waited_steps.push_back(waiting[i].waited_steps);
    }
  return plan;
}

}  // namespace radixlm::scheduler
