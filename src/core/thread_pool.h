// Fork-join thread pool: the only source of compute threads in radixlm.
//
// ParallelFor splits [0, n) into a fixed list of contiguous chunks (their boundaries depend only
// on n, the pool's size and the caller's chunk count, never on timing, so results are
// reproducible run to run) and every thread claims chunks: first those of its own home range
// (in a quiet machine each thread does exactly its home chunks, the same data every step, as a
// static split would), then, once its own are done, the unclaimed chunks of the others. A thread
// the OS deschedules therefore holds up the region by at most the one chunk it is in, never by
// its whole share: the caller and the threads still running take the rest.
//
// Waiting: an idle worker spins briefly (a decode step issues hundreds of small regions, and a
// wake-up per region would cost more than the work), then yields its core to whatever else wants
// it, then sleeps; the caller waiting for the last chunks spins briefly, then yields. A pool of
// more threads than the process has cores never spins (spinning threads would take the cores
// the working ones need). A worker late to a region finds its chunks taken and goes back to
// waiting without touching the region.
//
// Thread-safety: one ParallelFor at a time per pool (the engine loop owns it); nested calls
// from inside a task run serially on the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace radixlm::core {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int, int64_t, int64_t)>;

  // n_threads <= 0 means one per available core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index, begin, end) once for each chunk of [0, n), from any thread
  // (thread_index is the calling thread's, in [0, size())). chunks <= 0 picks kChunksPerThread
  // chunks per thread; chunks >= n gives one item per chunk (for items of unequal cost).
  void ParallelFor(int64_t n, const RangeFn& fn, int64_t chunks = 0);
  // Calls fn(i) once for every i in [0, size()), each on whichever thread claims it (a
  // descheduled worker's call is taken by another thread). For measurements that want every
  // thread busy at once (kernels/peak).
  void RunOnAll(const std::function<void(int)>& fn);

  static int DefaultThreads();
  static constexpr int64_t kChunksPerThread = 4;

  // Regions run, and chunks taken from another thread's home range (a sign of a thread that
  // was late or descheduled); for benchmarks and tests.
  struct Counters {
    uint64_t regions = 0, stolen_chunks = 0;
  };
  Counters counters() const;

 private:
  struct alignas(64) Home {  // one thread's home range of the current region
    std::atomic<uint64_t> claim{0};  // (generation << kIndexBits) | next unclaimed chunk
    std::atomic<int64_t> end{0};     // one past its last chunk
  };
  static constexpr int kIndexBits = 24;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  static constexpr uint64_t kClosed = kIndexMask;  // the index of a closed range

  void WorkerLoop(int index);
  void WaitForRegion(uint64_t seen);
  // Claims and runs chunks of region `generation` until none is left.
  void Work(int thread, uint64_t generation);
  void RunChunk(int thread, int64_t chunk);

  int n_threads_;
  bool may_spin_;  // no more threads than cores
  std::vector<std::thread> workers_;
  std::unique_ptr<Home[]> homes_;
  // The current region (valid while its generation's ranges are open).
  std::atomic<const RangeFn*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, chunks_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> stolen_{0};
  uint64_t regions_ = 0;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool in_parallel_ = false;
};

}  // namespace radixlm::core
