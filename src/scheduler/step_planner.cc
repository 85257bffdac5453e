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


// One step's planning: the state PlanStep's phases share.
class StepPlanner {
 public:
  StepPlanner(const PlannerConfig& config, std::span<const SeqView> running, std::span<const SeqView> waiting, Room& room)
      : config_(config), room_(room), running_(running.begin(), running.end()), waiting_(waiting.begin(), waiting.end()),
        budget_(config.scheduler.step_token_budget), shares_(config.shares_step_prefixes),
        await_(shares_ ? 0 : config.scheduler.await_shared_prefill) {}

  StepPlan Plan() {
    PlanRunning();
    AdmitWaiting();
    for (const SeqView& r : running_) plan_.running.push_back(r.id);
    for (size_t i = 0; i < waiting_.size(); ++i)
      if (!admitted_[i]) {
        plan_.waiting.push_back(waiting_[i].id);
        plan_.waited_steps.push_back(waiting_[i].waited_steps);
      }
    return std::move(plan_);
  }

 private:
  int64_t SharedWithPlan(const SeqView& s, int64_t start) const {
    return shares_ ? RowsSharedWithPlan(s.tokens, start, s.share_group, plan_.chunks, plan_tokens_) : 0;
  }
  // A prefill chunk of at most n tokens ending on the alignment grid when it can (too small a
  // budget to reach the grid: split anyway).
  int64_t Aligned(int64_t computed, int64_t n, int64_t remaining) const {
    if (config_.alignment <= 0 || n >= remaining) return n;
    const int64_t end = (computed + n) / config_.alignment * config_.alignment;
    return end > computed ? end - computed : n;
  }
  void PlanChunk(const SeqView& s, int64_t n, int64_t shared) {
    plan_.chunks.push_back({s.id, s.computed, n, s.share_group});
    plan_tokens_.push_back(s.tokens);
    budget_ -= std::max<int64_t>(n - shared, 0);
  }
  void Preempt(size_t i) {
    room_.Preempt(running_[i].id);
    plan_.preempted.push_back(running_[i].id);
    SeqView w = running_[i];
    w.computed = 0;
    w.tokens = w.tokens.first(w.tokens.size() - static_cast<size_t>(w.speculative));  // a draft goes with its memory
    w.speculative = 0;
    waiting_.push_front(w);  // the last preempted first
    running_.erase(running_.begin() + static_cast<int64_t>(i));
  }

  // 1. Running sequences: decodes take one token each, prefills a chunk of the budget.
  void PlanRunning() {
    for (size_t i = 0; i < running_.size(); ++i) {
      const SeqView& r = running_[i];
      const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.speculative - r.computed;
      const bool decode = remaining == 1;
      const int64_t shared = decode ? 0 : SharedWithPlan(r, r.computed);
      const int64_t n = decode ? 1 : Aligned(r.computed, std::min(remaining, shared + std::max<int64_t>(budget_, 0)), remaining);
      if (n <= 0) continue;
      bool room_ok = room_.Grow(r.id, r.computed + n);
      // Out of memory: preempt the newest running sequence not planned yet.
      while (!room_ok && running_.size() - 1 > i) {
        Preempt(running_.size() - 1);
        room_ok = room_.Grow(running_[i].id, running_[i].computed + n);
      }
      if (!room_ok) {  // even alone it cannot grow: give its memory back and retry later
        Preempt(i);
        --i;
        continue;
      }
      PlanChunk(running_[i], n + DraftRows(running_[i], n, budget_, room_), shared);
    }
  }

  // Whether waiting request w should wait for a running prefill that computes more of its
  // prompt than its cache holds (the leader promises to share it ahead).
  bool AwaitsARunningPrefill(const SeqView& w, int64_t cached) {
    const int64_t prompt = static_cast<int64_t>(w.tokens.size()) - 1;  // its last token is always computed
    int64_t best = 0, leader = -1;
    for (const SeqView& r : running_) {
      if (r.share_group != w.share_group) continue;
      const int64_t end = std::min<int64_t>(prompt, static_cast<int64_t>(r.tokens.size()) - 1);
      if (end - cached < await_ || r.computed >= end) continue;
      const int64_t common = std::mismatch(w.tokens.begin(), w.tokens.begin() + end, r.tokens.begin()).first - w.tokens.begin();
      if (common - cached >= await_ && common > r.computed && common > best) best = common, leader = r.id;
    }
    return leader >= 0 && room_.ShareAhead(leader, best);
  }

  // 2. Admit waiting requests, cache-aware, while budget (or rows shared with the plan) and
  // batch slots remain; stop at the first that does not fit (no overtaking). A request that a
  // running prefill will share ahead waits for it (passed over, not a stop).
  void AdmitWaiting() {
    const int max_running = config_.scheduler.max_running;
    // Promises are asked for even in a step with no budget left, so that a leader does not pass
    // the point before the followers' turn comes (the first waiting requests only, to bound the
    // comparisons on a long queue).
    admitted_.assign(waiting_.size(), 0);
    std::vector<char> awaiting(waiting_.size(), 0);
    std::vector<int64_t> cached(waiting_.size(), -1);
    if (await_ > 0)
      for (size_t i = 0; i < waiting_.size() && i < static_cast<size_t>(kMaxAwaitedPerStep); ++i) {
        cached[i] = room_.CachedPrefix(waiting_[i].id);
        awaiting[i] = AwaitsARunningPrefill(waiting_[i], cached[i]);
      }
    if (!(budget_ > 0 || shares_) || static_cast<int>(running_.size()) >= max_running || waiting_.empty()) return;
    std::vector<WaitingRequest> views;
    int checks = 0;
    for (size_t i = 0; i < waiting_.size(); ++i)
      views.push_back({waiting_[i].arrival, cached[i] >= 0 ? cached[i] : room_.CachedPrefix(waiting_[i].id), waiting_[i].waited_steps});
    for (size_t idx : AdmissionOrder(views, config_.scheduler)) {
      if (static_cast<int>(running_.size()) >= max_running) break;
      SeqView w = waiting_[idx];
      // A running prefill (or one admitted just now) computes its prefix and shares it ahead.
      if (awaiting[idx] || (await_ > 0 && checks++ < kMaxAwaitedPerStep && AwaitsARunningPrefill(w, views[idx].cached_tokens)))
        continue;
      // Out of budget, a request is still admitted when its first rows are shared with the plan
      // (it starts where its cached prefix ends); otherwise keep the order and wait.
      if (budget_ <= 0 && SharedWithPlan(w, views[idx].cached_tokens) == 0) break;
      if (room_.AwaitsElsewhere(w.id)) continue;  // another replica computes its prefix
      if (!room_.Admit(w.id, running_.empty(), &w.computed)) break;
      admitted_[idx] = 1;
      plan_.admitted.push_back(w.id);
      const int64_t remaining = static_cast<int64_t>(w.tokens.size()) - w.computed;
      const int64_t shared = SharedWithPlan(w, w.computed);
      const int64_t n = Aligned(w.computed, std::min(remaining, shared + std::max<int64_t>(budget_, 0)), remaining);
      running_.push_back(w);
      if (n > 0) PlanChunk(w, n, shared);  // else admitted with no rows this step: it starts in the next
    }
    for (size_t i = 0; i < waiting_.size(); ++i)
      if (!admitted_[i]) ++waiting_[i].waited_steps;
  }

  const PlannerConfig& config_;
  Room& room_;
  StepPlan plan_;
  std::vector<SeqView> running_;
  std::deque<SeqView> waiting_;
  std::vector<std::span<const int32_t>> plan_tokens_;
  std::vector<char> admitted_;
  int64_t budget_;
  const bool shares_;
  const int64_t await_;
};

}  // namespace

StepPlan PlanStep(const PlannerConfig& config, std::span<const SeqView> running, std::span<const SeqView> waiting, Room& room) {
  return StepPlanner(config, running, waiting, room).Plan();
}

}  // namespace radixlm::scheduler
