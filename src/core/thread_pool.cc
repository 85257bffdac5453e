#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "core/cpu_features.h"

namespace radixlm::core {

namespace {

using Clock = std::chrono::steady_clock;
// An idle worker spins this long (when the pool may spin), then yields until kYieldFor has
// passed since the region ended, then sleeps. Yielding costs a quiet machine nothing (the call
// returns at once) and hands the core to other work on a busy one.
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kYieldFor = std::chrono::microseconds(2000);
// The caller waiting for other threads' last chunks spins this many pauses, then yields.
constexpr int kCallerSpins = 2000;
constexpr int kGenerationBits = 64 - 24;
constexpr uint64_t kGenerationMask = (uint64_t{1} << kGenerationBits) - 1;

}  // namespace

int ThreadPool::DefaultThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : DefaultThreads()),
      may_spin_(n_threads_ <= DefaultThreads()),
      homes_(new Home[n_threads_]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool::Counters ThreadPool::counters() const {
  return {regions_, stolen_.load(std::memory_order_relaxed)};
}

void ThreadPool::WaitForRegion(uint64_t seen) {
  const Clock::time_point start = Clock::now();
  for (uint32_t i = 0;; ++i) {
    if (generation_.load(std::memory_order_acquire) != seen) return;
    if (i % 64 != 63) {
      if (may_spin_) CpuRelax();
      continue;
    }
    const auto waited = Clock::now() - start;
    if (waited < kSpinFor && may_spin_) continue;
    if (waited >= kYieldFor) break;
    sched_yield();
  }
  sleepers_.fetch_add(1);
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return generation_.load() != seen; });
  }
  sleepers_.fetch_sub(1);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    WaitForRegion(seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    Work(index, seen);
  }
}

void ThreadPool::RunChunk(int thread, int64_t chunk) {
  const RangeFn& fn = *fn_.load(std::memory_order_relaxed);
  const int64_t n = n_.load(std::memory_order_relaxed), chunks = chunks_.load(std::memory_order_relaxed);
  fn(thread, n * chunk / chunks, n * (chunk + 1) / chunks);
}

void ThreadPool::Work(int thread, uint64_t generation) {
  // A claim word names its region, so a worker holding a word of a finished region can never
  // take a chunk of the next one; the region's parameters are read only after a claim of it
  // succeeded, while it cannot end.
  const uint64_t tag = generation & kGenerationMask;
  for (int k = 0; k < n_threads_; ++k) {
    const int victim = (thread + k) % n_threads_;
    Home& h = homes_[victim];
    uint64_t c = h.claim.load(std::memory_order_acquire);
    while ((c >> (64 - kGenerationBits)) == tag) {
      const uint64_t idx = c & kIndexMask;
      if (idx == kClosed || static_cast<int64_t>(idx) >= h.end.load(std::memory_order_relaxed)) break;
      if (!h.claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      if (victim != thread) stolen_.fetch_add(1, std::memory_order_relaxed);
      RunChunk(thread, static_cast<int64_t>(idx));
      done_.fetch_add(1, std::memory_order_acq_rel);
      c = h.claim.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  ParallelFor(
      n_threads_, [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) fn(static_cast<int>(i));
      },
      n_threads_);
}

void ThreadPool::ParallelFor(int64_t n, const RangeFn& fn, int64_t chunks) {
  if (n <= 0) return;
  if (chunks <= 0) chunks = n_threads_ * kChunksPerThread;
  chunks = std::min({chunks, n, static_cast<int64_t>(kClosed - 1)});
  if (n_threads_ == 1 || in_parallel_ || chunks == 1) {
    fn(0, 0, n);
    return;
  }
  in_parallel_ = true;
  const uint64_t generation = ++regions_;
  const uint64_t tag = (generation & kGenerationMask) << (64 - kGenerationBits);
  fn_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  chunks_.store(chunks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  for (int t = 0; t < n_threads_; ++t) {
    homes_[t].end.store(chunks * (t + 1) / n_threads_, std::memory_order_relaxed);
    homes_[t].claim.store(tag | static_cast<uint64_t>(chunks * t / n_threads_), std::memory_order_release);
  }
  generation_.store(generation);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }
  Work(0, generation);
  for (int i = 0; done_.load(std::memory_order_acquire) != chunks; ++i) {
    if (i < kCallerSpins) CpuRelax();
    else sched_yield();
  }
  for (int t = 0; t < n_threads_; ++t) homes_[t].claim.store(tag | kClosed, std::memory_order_release);
  in_parallel_ = false;
}

}  // namespace radixlm::core
