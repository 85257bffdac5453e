#include "core/thread_pool.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>

namespace radixlm::core {

int ThreadPool::DefaultThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : DefaultThreads()) {
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

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    // Spin for a short while (a few microseconds) before blocking.
    for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen; ++spin)
      _mm_pause();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    (*task_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  if (n_threads_ == 1 || in_parallel_) {
    for (int i = 0; i < n_threads_; ++i) fn(i);
    return;
  }
  in_parallel_ = true;
  task_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  fn(0);
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  task_ = nullptr;
  in_parallel_ = false;
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int parts = static_cast<int>(std::min<int64_t>(n_threads_, n));
  if (parts == 1 || in_parallel_) {
    fn(0, 0, n);
    return;
  }
  RunOnAll([&](int t) {
    if (t >= parts) return;
    const int64_t begin = n * t / parts, end = n * (t + 1) / parts;
    fn(t, begin, end);
  });
}

}  // namespace radixlm::core
