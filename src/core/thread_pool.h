// Fork-join thread pool: the only source of compute threads in radixlm.
// ParallelFor splits [0, n) into contiguous ranges, runs them on the workers and the calling
// thread, and returns when all are done. Range boundaries depend only on n and the thread
// count, never on timing, so results are reproducible run to run.
// Workers spin briefly before sleeping: a decode step issues a few hundred small parallel
// regions, and a condition-variable wake-up per region would cost more than the work.
// Thread-safety: one ParallelFor at a time per pool (the engine loop owns it); nested calls
// from inside a task run serially on the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace radixlm::core {

class ThreadPool {
 public:
  // n_threads <= 0 means one per available core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index, begin, end) for each of size() contiguous chunks of [0, n).
  void ParallelFor(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);
  // Calls fn(thread_index) once on every thread.
  void RunOnAll(const std::function<void(int)>& fn);

  static int DefaultThreads();

 private:
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool in_parallel_ = false;
};

}  // namespace radixlm::core
