#include "engine/batch_runner.h"

#include <deque>
#include <vector>

namespace radixlm::engine {

BatchRunStats RunBatchGroups(Engine& engine, std::span<const RequestParams> items,
                             std::span<const scheduler::PrefixGroup> groups, const BatchRunnerOptions& options,
                             const BatchItemEvent& on_event) {
  BatchRunStats stats;
  const double budget = options.kv_budget * engine.pool().num_blocks() * engine.config().block_tokens;
  auto projected = [&](const scheduler::PrefixGroup& g) {
    double t = static_cast<double>(g.prefix_tokens);
    for (int64_t m : g.members)
      t += static_cast<double>(items[m].prompt.size()) - static_cast<double>(g.prefix_tokens) + items[m].max_tokens;
    return t;
  };
  // Events arrive inside Step(); what they ask for (members to submit, requests to end early,
  // groups done) is done after it returns, outside the engine's call.
  std::vector<RequestId> end_early;
  std::deque<size_t> warmed;            // groups whose prefix is cached: submit their members
  std::vector<int64_t> open(groups.size(), 0);  // members not finished
  std::vector<size_t> group_of_item(items.size(), SIZE_MAX);
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t m : groups[g].members) group_of_item[m] = g;
  size_t next = 0, live = 0;
  double in_flight = 0;
  auto group_done = [&](size_t g) {
    --live;
    in_flight -= projected(groups[g]);
  };
  auto item_finished = [&](int64_t item) {
    const size_t g = group_of_item[item];
    if (--open[g] == 0) group_done(g);
  };
  auto submit_item = [&](int64_t item) {
    auto id = engine.Submit(items[item], [&, item](const TokenEvent& ev) {
      if (!on_event(item, ev) && ev.finish == FinishReason::kNone) end_early.push_back(ev.id);
      if (ev.finish != FinishReason::kNone) item_finished(item);
    });
    if (id.ok()) return;
    TokenEvent ev;
    ev.finish = FinishReason::kError;
    ev.error = id.status().message();
    on_event(item, ev);
    item_finished(item);
  };
  auto submit_members = [&](size_t g) {
    for (int64_t m : groups[g].members) submit_item(m);
  };
  auto start = [&](size_t g) {
    ++live;
    stats.max_groups_in_flight = std::max<int64_t>(stats.max_groups_in_flight, static_cast<int64_t>(live));
    in_flight += projected(groups[g]);
    open[g] = static_cast<int64_t>(groups[g].members.size());
    if (options.submit_all || groups[g].members.size() < 2 || groups[g].prefix_tokens == 0) return submit_members(g);
    RequestParams warm = items[groups[g].members[0]];
    warm.prompt.resize(static_cast<size_t>(groups[g].prefix_tokens));
    warm.continuation = std::vector<int32_t>{};
    ++stats.warm_requests;
    stats.warm_tokens += groups[g].prefix_tokens;
    // Whatever becomes of the warm-up (a refusal included), the members go next: they answer
    // for themselves.
    auto id = engine.Submit(std::move(warm), [&, g](const TokenEvent& ev) {
      if (ev.finish != FinishReason::kNone) warmed.push_back(g);
    });
    if (!id.ok()) warmed.push_back(g);
  };
  for (;;) {
    while (next < groups.size() && (live == 0 || options.submit_all || in_flight + projected(groups[next]) <= budget))
      start(next++);
    while (!warmed.empty()) {
      const size_t g = warmed.front();
      warmed.pop_front();
      submit_members(g);
    }
    for (RequestId id : end_early) engine.EndEarly(id);
    end_early.clear();
    const bool stepped = engine.Step();
    // An idle engine with nothing pending: done (or, were groups still open, their requests
    // are gone; the caller sees the items that never finished).
    if (!stepped && warmed.empty() && end_early.empty() && (live > 0 || next == groups.size())) break;
  }
  return stats;
}

}  // namespace radixlm::engine
