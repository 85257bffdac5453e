// Marconi's bootstrap tuning of alpha (the FLOP-efficiency weight of its eviction score), used
// by the marconi policy of the corrected radix cache and by the reference cache.
//
// The window: at the first eviction it is set to bootstrap_multiplier x requests seen so far.
// Every request looked up since the start is recorded (its input, replaced by input + output
// when it finishes). When the window's requests have been seen, they are replayed from the
// initial (empty) tree once per alpha in {0, 0.1, ..., 2.0}; the alpha that saves the most FLOPs
// over the last tuning_last_n requests is kept (ties: the smallest).
//
// Bounded: recording stops at config.tuning_max_tokens tokens (tuning then replays the
// requests recorded). Off the critical path: with tune_in_background the replays run on their
// own thread (using tuning_pool if given) and the caller keeps its alpha until Poll() sees the
// result; otherwise they run inside Poll() (deterministic, as the simulator needs).
// Thread-safety: the tuner is owned by one cache and called from its loop only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <future>
#include <optional>
#include <span>
#include <vector>

#include "cache/hybrid_cache.h"

namespace radixlm::cache {

class AlphaTuner {
 public:
  struct Request {
    std::vector<int32_t> tokens;  // input, then input + output once finished
    int64_t input_len = 0;
  };
  // FLOPs a replay of `window` with this alpha saves over its last `last_n` requests.
  using Replay = std::function<Flops(double alpha, const std::vector<Request>& window, int last_n)>;

  explicit AlphaTuner(const HybridCacheConfig& config) : config_(config) {}
  AlphaTuner(const AlphaTuner&) = delete;
  AlphaTuner& operator=(const AlphaTuner&) = delete;
  ~AlphaTuner();

  bool active() const { return !tuned_; }
  bool tuned() const { return tuned_; }
  int64_t window() const { return window_; }
  int64_t peak_tokens() const { return peak_tokens_; }

  void RecordLookup(std::span<const int32_t> input);
  // The latest unfinished request whose input starts `sequence` (with concurrent requests, not
  // necessarily the last looked up) becomes the whole sequence.
  void RecordFinish(std::span<const int32_t> sequence);
  // An eviction happened after `requests_seen` lookups; the first one fixes the window.
  void OnEviction(int64_t requests_seen);
  // The tuned alpha once it is known (at most once); `replay` runs the replays.
  std::optional<double> Poll(int64_t requests_seen, const Replay& replay);

 private:
  static double Best(const std::vector<Flops>& saved);

  HybridCacheConfig config_;
  std::vector<Request> requests_;
  int64_t tokens_ = 0, peak_tokens_ = 0;
  bool recording_ = true;
  int64_t window_ = -1;
  bool tuned_ = false;
  std::future<double> pending_;
  // Set when the tuner goes away; the background replays stop at the next alpha.
  std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
};

// Poll for a radix cache type C (the production cache and the Marconi reference share it): the
// replay of one alpha is a replica C(*snapshot, alpha) serving the window's requests (Lookup of
// the input, Admit of input + output); its score, the FLOPs saved over its last `last_n`.
template <class C>
std::optional<double> PollTuner(AlphaTuner& tuner, std::shared_ptr<const C> snapshot, const CostModel& cost, int64_t requests) {
  auto replay = [snapshot, cost](double alpha, const std::vector<AlphaTuner::Request>& window, int last_n) {
    C replica(*snapshot, alpha);
    for (const AlphaTuner::Request& r : window) {
      std::span<const int32_t> all(r.tokens);
      replica.Lookup(all.first(r.input_len));
      replica.Admit(all);
    }
    const std::vector<HybridRequestStat>& h = replica.history();
    const size_t take = std::min<size_t>(h.size(), last_n);
    return HistoryFlopsSaved(cost, std::span<const HybridRequestStat>(h).subspan(h.size() - take));
  };
  return tuner.Poll(requests, replay);
}

}  // namespace radixlm::cache
