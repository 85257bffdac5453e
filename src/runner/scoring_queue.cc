#include "runner/scoring_queue.h"

#include <exception>
#include <string>

namespace radixlm::runner {

ScoringQueue::ScoringQueue(RunnerFactory factory, int64_t max_input_tokens, int64_t max_batch_inputs)
    : factory_(std::move(factory)),
      max_input_tokens_(max_input_tokens),
      max_batch_inputs_(max_batch_inputs),
      worker_([this] { Work(); }) {}

ScoringQueue::~ScoringQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  for (Pending& p : queue_) p.promise.set_value(core::ResourceExhausted("the scoring service is shutting down"));
}

bool ScoringQueue::SameBatchKind(const ScoringJob& a, const ScoringJob& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == ScoringJob::Kind::kEmbed) return a.pooling == b.pooling && a.normalize == b.normalize;
  if (a.kind == ScoringJob::Kind::kPromptLogprobs) return a.top_k == b.top_k;
  return a.yes_id == b.yes_id && a.no_id == b.no_id;
}

std::future<core::StatusOr<ScoringResult>> ScoringQueue::Submit(ScoringJob job) {
  Pending p{std::move(job), {}};
  auto future = p.promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      p.promise.set_value(core::ResourceExhausted("the scoring service is shutting down"));
      return future;
    }
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
  return future;
}

ScoringStats ScoringQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

namespace {

// A runner that cannot be made, or a batch that cannot get its memory, fails that batch's jobs
// with an error; the service (and the server's generation) goes on.
core::Status Failed(const std::exception& e) {
  return core::ResourceExhausted(std::string("the scoring batch could not run: ") + e.what());
}

// The forward of the batch's kind (the first job's parameters: SameBatchKind).
core::Status RunKind(ScoringRunner& runner, const ScoringJob& first, const std::vector<std::vector<int32_t>>& inputs,
                     ScoringResult* all) {
  try {
    if (first.kind == ScoringJob::Kind::kEmbed) {
      auto r = runner.Embed(inputs, first.pooling, first.normalize);
      if (!r.ok()) return r.status();
      all->embeddings = std::move(*r);
    } else if (first.kind == ScoringJob::Kind::kPromptLogprobs) {
      auto r = runner.PromptLogprobs(inputs, first.top_k);
      if (!r.ok()) return r.status();
      all->prompt_logprobs = std::move(*r);
    } else {
      auto r = runner.YesNoLogits(inputs, first.yes_id, first.no_id);
      if (!r.ok()) return r.status();
      all->logits = std::move(*r);
    }
  } catch (const std::exception& e) {
    return Failed(e);
  }
  return core::Status::Ok();
}

// One job's n results from offset of the batch's.
ScoringResult Slice(ScoringJob::Kind kind, ScoringResult& all, size_t offset, size_t n) {
  ScoringResult mine;
  if (kind == ScoringJob::Kind::kEmbed)
    mine.embeddings.assign(std::make_move_iterator(all.embeddings.begin() + offset),
                           std::make_move_iterator(all.embeddings.begin() + offset + n));
  else if (kind == ScoringJob::Kind::kPromptLogprobs)
    mine.prompt_logprobs.assign(std::make_move_iterator(all.prompt_logprobs.begin() + offset),
                                std::make_move_iterator(all.prompt_logprobs.begin() + offset + n));
  else
    mine.logits.assign(all.logits.begin() + offset, all.logits.begin() + offset + n);
  return mine;
}

}  // namespace

std::vector<ScoringQueue::Pending> ScoringQueue::TakeBatch() {
  std::vector<Pending> batch;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
  if (stop_) return batch;
  int64_t inputs = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const bool first = batch.empty();
    if (!first && (!SameBatchKind(batch.front().job, it->job) ||
                   inputs + static_cast<int64_t>(it->job.inputs.size()) > max_batch_inputs_)) {
      ++it;
      continue;
    }
    inputs += static_cast<int64_t>(it->job.inputs.size());
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return batch;
}

core::Status ScoringQueue::RunBatch(std::vector<Pending>& batch, std::vector<Pending*>* valid, ScoringResult* all) {
  // Validate each job alone; the valid ones run as one batch.
  std::vector<std::vector<int32_t>> inputs;
  for (Pending& p : batch) {
    if (core::Status st = runner_->Validate(p.job.inputs); !st.ok()) {
      p.promise.set_value(st);
      continue;
    }
    valid->push_back(&p);
    for (auto& in : p.job.inputs) inputs.push_back(std::move(in));  // the job keeps its count
  }
  return valid->empty() ? core::Status::Ok() : RunKind(*runner_, valid->front()->job, inputs, all);
}

void ScoringQueue::CountBatch(size_t jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  const ScoringStats service = stats_;
  stats_ = runner_->stats();  // forward-level counters; the service's own carried over
  stats_.batches = service.batches + 1;
  stats_.jobs = service.jobs;
  stats_.merged_jobs = service.merged_jobs;
  stats_.jobs += static_cast<int64_t>(jobs);
  if (jobs > 1) stats_.merged_jobs += static_cast<int64_t>(jobs);
}

void ScoringQueue::Work() {
  while (true) {
    std::vector<Pending> batch = TakeBatch();
    if (batch.empty()) return;
    if (!runner_) {
      try {
        runner_ = factory_();
      } catch (const std::exception& e) {
        for (Pending& p : batch) p.promise.set_value(Failed(e));
        continue;
      }
    }
    std::vector<Pending*> valid;
    ScoringResult all;
    const core::Status st = RunBatch(batch, &valid, &all);
    CountBatch(batch.size());
    // Answered after the stats are updated, so a client that reads /metrics next sees its job.
    size_t offset = 0;
    for (Pending* p : valid) {
      if (!st.ok()) {
        p->promise.set_value(st);
        continue;
      }
      const size_t n = p->job.inputs.size();
      p->promise.set_value(Slice(p->job.kind, all, offset, n));
      offset += n;
    }
  }
}

}  // namespace radixlm::runner
