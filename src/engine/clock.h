// The engine's notion of time (submission, first token, step durations): the wall clock when
// serving; the simulator's clock, advanced by its cost model, when simulating.
#pragma once

namespace radixlm::engine {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double Now() const = 0;  // seconds
};

// Seconds on the steady clock.
double NowSeconds();

class WallClock final : public Clock {
 public:
  double Now() const override { return NowSeconds(); }
};

}  // namespace radixlm::engine
