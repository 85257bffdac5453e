// Google Benchmark of the radix prefix cache on a chat-like workload: requests extend earlier
// sequences; each is Reserve + Commit + Insert + release, with LRU eviction under pressure.
// Reports requests per second at two pool sizes (no eviction / constant eviction).
#include <benchmark/benchmark.h>

#include "cache/radix_tree.h"
#include "core/random.h"

namespace radixlm::cache {
namespace {

void BM_RadixCacheRequests(benchmark::State& state) {
  const int32_t blocks = static_cast<int32_t>(state.range(0));
  BlockPool pool({.num_blocks = blocks, .block_tokens = 16});
  RadixTree tree(pool);
  core::Rng rng(3);
  std::vector<std::vector<int32_t>> history;
  int64_t requests = 0;
  for (auto _ : state) {
    std::vector<int32_t> t;
    if (!history.empty() && rng.Below(4)) {
      const auto& base = history[rng.Below(history.size())];
      t.assign(base.begin(), base.begin() + 1 + rng.Below(base.size()));
    }
    for (int i = 0; i < 200; ++i) t.push_back(static_cast<int32_t>(rng.Below(50000)));
    if (t.size() > 8000) t.resize(200);
    const Reservation r = tree.Reserve(t, static_cast<int64_t>(t.size()) - 1, t.size());
    if (!r.feasible) continue;
    Admission a = tree.Commit(r, t.size());
    tree.Insert(t, t.size(), a.block_table);
    if (a.cached_tokens > 0) tree.Unlock(a.locked_node);
    for (int32_t b : a.owned_blocks) pool.Release(b);
    if (history.size() < 512) history.push_back(std::move(t));
    else history[rng.Below(history.size())] = std::move(t);
    ++requests;
  }
  state.counters["requests/s"] = benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = tree.stats().hit_rate();
  state.counters["evicted_nodes"] = static_cast<double>(tree.stats().evicted_nodes);
}
BENCHMARK(BM_RadixCacheRequests)->Arg(1 << 20)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace radixlm::cache

BENCHMARK_MAIN();
