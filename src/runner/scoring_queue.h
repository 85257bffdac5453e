// The request queue of the embedding / reranking service: requests that arrive while a batch
// runs are merged into the next batch, so concurrent requests sharing an instruction or a
// query share rows across requests too (the runner packs the merged inputs into forwards and
// compacts them below its threshold).
//
// Owns: one worker thread and the ScoringRunner (made on first use: its KV store is sized
// for a whole forward, which a server that only generates never needs).
// Invariants: a job is validated alone before it joins a batch, so a bad request fails by
// itself and never costs another its answer; jobs are answered in arrival order of batches;
// a batch takes queued jobs of the same kind (and pooling / yes-no ids) up to
// max_batch_inputs inputs (the first job whole), bounding how long a newcomer waits.
// Thread-safety: Submit and stats from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runner/scoring.h"

namespace radixlm::runner {

using engine::ScoringJob;
using engine::ScoringResult;

class ScoringQueue : public engine::ScoringService {
 public:
  using RunnerFactory = std::function<std::unique_ptr<ScoringRunner>()>;
  // max_input_tokens: the runner's (checked by the server before it submits).
  ScoringQueue(RunnerFactory factory, int64_t max_input_tokens, int64_t max_batch_inputs = 1024);
  ~ScoringQueue() override;  // answers queued jobs with an error and joins the worker

  std::future<core::StatusOr<ScoringResult>> Submit(ScoringJob job) override;
  ScoringStats stats() const override;
  int64_t max_input_tokens() const override { return max_input_tokens_; }

 private:
  struct Pending {
    ScoringJob job;
    std::promise<core::StatusOr<ScoringResult>> promise;
  };
  void Work();
  // Blocks for work: the oldest job, then queued jobs of the same kind while the input budget
  // lasts. Empty: the queue is stopping.
  std::vector<Pending> TakeBatch();
  // The batch's valid jobs' inputs as one forward; the jobs that fail validation are answered.
  core::Status RunBatch(std::vector<Pending>& batch, std::vector<Pending*>* valid, ScoringResult* all);
  void CountBatch(size_t jobs);
  static bool SameBatchKind(const ScoringJob& a, const ScoringJob& b);

  RunnerFactory factory_;
  const int64_t max_input_tokens_, max_batch_inputs_;
  std::unique_ptr<ScoringRunner> runner_;  // worker thread only
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  ScoringStats stats_;
  std::thread worker_;
};

}  // namespace radixlm::runner
