// A progress bar on stderr for long command-line work (perplexity, scoring files, replay, simulate):
// redrawn in place at most ten times a second when stderr is a terminal, silent otherwise (logs
// keep only the command's one-line summary). Owned by one command on one thread.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace radixlm::core {

class Progress {
 public:
  // total <= 0: unknown (a running count instead of a bar).
  Progress(std::string label, int64_t total)
      : label_(std::move(label)), total_(total), tty_(isatty(2) != 0), start_(Clock::now()) {}
  ~Progress() { Done(); }

  void Update(int64_t done) {
    if (!tty_ || finished_) return;
    const auto now = Clock::now();
    if ((total_ <= 0 || done < total_) && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    Draw(done);
  }
  // Clears the bar (the command prints its summary next).
  void Done() {
    if (!tty_ || finished_) return;
    finished_ = true;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(int64_t done) {
    constexpr int kWidth = 30;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (total_ <= 0) {  // total unknown: a count
      std::fprintf(stderr, "\r\033[K%s %lld  %.0f s", label_.c_str(), static_cast<long long>(done), elapsed);
      std::fflush(stderr);
      return;
    }
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %lld/%lld  %.1f/s, %.0f s, ~%.0f s left", label_.c_str(), bar.c_str(),
                 100 * frac, static_cast<long long>(done), static_cast<long long>(total_), elapsed > 0 ? done / elapsed : 0.0,
                 elapsed, eta);
    std::fflush(stderr);
  }

  std::string label_;
  int64_t total_;
  bool tty_;
  bool finished_ = false;
  Clock::time_point start_, last_{};
};

}  // namespace radixlm::core
