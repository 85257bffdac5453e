#include "cache/alpha_tuner.h"

#include <algorithm>
#include <iostream>

#include "core/thread_pool.h"

namespace radixlm::cache {
namespace {
constexpr int kGrid = 21;  // alpha = 0, 0.1, ..., 2.0
}

AlphaTuner::~AlphaTuner() {
  // Shutdown waits for at most the replay in flight, not the remaining grid.
  cancel_->store(true);
  if (pending_.valid()) pending_.wait();
}

void AlphaTuner::RecordLookup(std::span<const int32_t> input) {
  if (tuned_ || !recording_) return;
  if (tokens_ + static_cast<int64_t>(input.size()) > config_.tuning_max_tokens) {
    recording_ = false;  // the window is as large as it may grow; tune on what it holds
    return;
  }
  requests_.push_back({std::vector<int32_t>(input.begin(), input.end()), static_cast<int64_t>(input.size())});
  tokens_ += static_cast<int64_t>(input.size());
  peak_tokens_ = std::max(peak_tokens_, tokens_);
}

void AlphaTuner::RecordFinish(std::span<const int32_t> sequence) {
  if (tuned_ || requests_.empty()) return;
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if (static_cast<int64_t>(it->tokens.size()) == it->input_len && it->tokens.size() <= sequence.size() &&
        std::equal(it->tokens.begin(), it->tokens.end(), sequence.begin())) {
      const int64_t grown = static_cast<int64_t>(sequence.size() - it->tokens.size());
      if (tokens_ + grown > config_.tuning_max_tokens) {
        recording_ = false;
        return;
      }
      it->tokens.assign(sequence.begin(), sequence.end());
      tokens_ += grown;
      peak_tokens_ = std::max(peak_tokens_, tokens_);
      return;
    }
  }
}

void AlphaTuner::OnEviction(int64_t requests_seen) {
  if (window_ < 0) window_ = int64_t{config_.bootstrap_multiplier} * requests_seen;
}

double AlphaTuner::Best(const std::vector<Flops>& saved) {
  int best = 0;
  for (int i = 1; i < kGrid; ++i)
    if (saved[i] > saved[best]) best = i;  // ties keep the smallest alpha
  return static_cast<double>(best) / 10.0;
}

std::optional<double> AlphaTuner::Poll(int64_t requests_seen, const Replay& replay) {
  if (tuned_) return std::nullopt;
  if (pending_.valid()) {
    if (pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
    tuned_ = true;
    try {
      return pending_.get();
    } catch (const std::exception& e) {
      // A failed replay must not take the server down: keep the alpha in use.
      std::cerr << "radixlm: marconi alpha tuning failed, keeping alpha " << "(" << e.what() << ")\n";
      return std::nullopt;
    }
  }
  // >=: the engine looks up several requests between two finishes, so the count can step over.
  if (window_ < 0 || requests_seen < window_ || requests_.empty()) return std::nullopt;
  std::vector<Request> window = std::move(requests_);
  requests_.clear();
  requests_.shrink_to_fit();
  tokens_ = 0;
  recording_ = false;
  const int last_n = config_.tuning_last_n;
  if (config_.tune_in_background) {
    // The replays read only their own copies; the caller's loop goes on with the old alpha.
    pending_ = std::async(std::launch::async, [replay, window = std::move(window), last_n, cancel = cancel_] {
      std::vector<Flops> saved(kGrid, 0);
      for (int i = 0; i < kGrid && !cancel->load(); ++i) saved[i] = replay(i / 10.0, window, last_n);
      return Best(saved);
    });
    return std::nullopt;
  }
  std::vector<Flops> saved(kGrid, 0);
  if (config_.tuning_pool != nullptr) {
    config_.tuning_pool->ParallelFor(kGrid, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) saved[i] = replay(static_cast<double>(i) / 10.0, window, last_n);
    });
  } else {
    for (int i = 0; i < kGrid; ++i) saved[i] = replay(i / 10.0, window, last_n);
  }
  tuned_ = true;
  return Best(saved);
}

}  // namespace radixlm::cache
