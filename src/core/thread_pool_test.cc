#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace radixlm::core {
namespace {

using Range = std::pair<int64_t, int64_t>;

std::vector<Range> Ranges(ThreadPool& pool, int64_t n, int64_t chunks) {
  std::mutex mu;
  std::vector<Range> seen;
  pool.ParallelFor(
      n, [&](int t, int64_t b, int64_t e) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, pool.size());
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back({b, e});
      },
      chunks);
  std::sort(seen.begin(), seen.end());
  return seen;
}

TEST(ThreadPoolTest, ChunksCoverTheRangeOnceWithBoundariesFixedByTheirCount) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 16, 97, 1000})
      for (int64_t chunks : {0, 1, 3, 1000}) {
        const std::vector<Range> got = Ranges(pool, n, chunks);
        // The chunk count the pool uses: min(requested or kChunksPerThread per thread, n);
        // a pool of one thread runs the whole range at once.
        int64_t c = std::min<int64_t>(chunks > 0 ? chunks : threads * ThreadPool::kChunksPerThread, n);
        if (threads == 1) c = 1;
        ASSERT_EQ(static_cast<int64_t>(got.size()), c) << threads << " " << n << " " << chunks;
        for (int64_t i = 0; i < c; ++i) EXPECT_EQ(got[i], Range(n * i / c, n * (i + 1) / c));
        // Run to run the same boundaries.
        EXPECT_EQ(Ranges(pool, n, chunks), got);
      }
  }
}

TEST(ThreadPoolTest, ManyShortRegionsEachSeeEveryChunkOnce) {
  // Workers late to a region (still spinning or asleep) must never run a chunk of the next one.
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(64);
  for (int region = 0; region < 20000; ++region) {
    const int64_t n = 1 + region % 64;
    for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    }, region % 3 == 0 ? n : 0);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "region " << region << " item " << i;
    if (region % 1000 == 999) std::this_thread::sleep_for(std::chrono::milliseconds(3));  // let workers sleep
  }
}

TEST(ThreadPoolTest, AStalledThreadHoldsUpAtMostTheChunkItIsIn) {
  // A worker that stops inside its first chunk (as a descheduled thread would) leaves its other
  // home chunks to the caller, which takes them instead of waiting.
  ThreadPool pool(2);
  const ThreadPool::Counters before = pool.counters();
  std::atomic<bool> stalled{false};
  std::vector<std::atomic<int>> by_thread(2);
  pool.ParallelFor(16, [&](int t, int64_t, int64_t) {
    if (t != 0 && !stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    by_thread[t].fetch_add(1);
  }, 16);
  EXPECT_EQ(by_thread[0].load() + by_thread[1].load(), 16);
  if (stalled.load()) {
    // The worker took a chunk and stalled: the caller ran everything else.
    EXPECT_EQ(by_thread[1].load(), 1);
    EXPECT_GE(pool.counters().stolen_chunks - before.stolen_chunks, 7u);
  } else {
    EXPECT_EQ(by_thread[0].load(), 16);  // the worker never came: the caller ran it all
  }
}

TEST(ThreadPoolTest, NestedCallsRunOnTheCallingThread) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.ParallelFor(4, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.ParallelFor(10, [&](int, int64_t ib, int64_t ie) { inner.fetch_add(static_cast<int>(ie - ib)); });
  }, 4);
  EXPECT_EQ(inner.load(), 40);
}

TEST(ThreadPoolTest, RunOnAllCallsEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> calls(threads);
    for (int rep = 0; rep < 100; ++rep) pool.RunOnAll([&](int i) { calls[i].fetch_add(1); });
    for (int i = 0; i < threads; ++i) EXPECT_EQ(calls[i].load(), 100);
  }
}

}  // namespace
}  // namespace radixlm::core
