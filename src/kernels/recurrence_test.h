// Shared checks of the kernels tests (ssm_test.cc, delta_net_test.cc) for the exact state-space
// recurrences: a relative error, and the property both recurrences promise, the same bits
// however a sequence's tokens are split into calls, restored from a capture, or run on any ISA.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"
#include "kernels/ssm.h"

namespace radixlm::kernels {

// max |a - b| / max |b| over the elements.
inline double MaxRelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// A recurrence kernel on tokens [t, t + n) of one sequence, every head: advances `state` (the
// state after token t - 1) and writes the n tokens' output rows to `y`, capturing as `captures`
// say.
using RecurrenceRun = std::function<void(int64_t t, int64_t n, float* state, float* y, std::span<const StateCapture> captures)>;

struct RecurrenceSplits {
  int64_t tokens = 0, state_floats = 0, ld = 0;  // ld: floats per output row
  float initial_state = 0;                       // every state element before the first token
  int32_t capture_at = 0;                        // the one call captures the state after this many tokens
  uint64_t split_seed = 0;                       // the random pieces' Rng seed
  uint64_t max_piece = 0;                        // a random piece's most tokens
  std::string label;                             // names the case in failures
};

struct RecurrenceOutput {
  std::vector<float> state, y;
};

// Runs all the tokens in one call (capturing at capture_at) and checks that the same bits, final
// state and outputs, come out of: random pieces (a third of them single tokens), the tokens after
// capture_at from the capture, and one call on every ISA the CPU has. Returns the one call's.
inline RecurrenceOutput ExpectTheSameBitsHoweverSplit(const RecurrenceRun& run, const RecurrenceSplits& c) {
  const int64_t T = c.tokens, ld = c.ld;
  RecurrenceOutput one{std::vector<float>(c.state_floats, c.initial_state), std::vector<float>(T * ld)};
  std::vector<float> ckpt(c.state_floats);
  const StateCapture cap{c.capture_at, ckpt.data(), nullptr};
  run(0, T, one.state.data(), one.y.data(), {&cap, 1});
  core::Rng rng(c.split_seed);
  std::vector<float> s_split(c.state_floats, c.initial_state), y_split(T * ld);
  for (int64_t t = 0; t < T;) {
    const int64_t n = std::min<int64_t>(T - t, rng.Below(3) == 0 ? 1 : 1 + rng.Below(c.max_piece));
    run(t, n, s_split.data(), y_split.data() + t * ld, {});
    t += n;
  }
  EXPECT_EQ(y_split, one.y) << c.label;
  EXPECT_EQ(s_split, one.state) << c.label;
  std::vector<float> y_rest((T - c.capture_at) * ld);
  run(c.capture_at, T - c.capture_at, ckpt.data(), y_rest.data(), {});
  EXPECT_TRUE(std::equal(y_rest.begin(), y_rest.end(), one.y.begin() + c.capture_at * ld)) << c.label;
  EXPECT_EQ(ckpt, one.state) << c.label;
  for (core::Isa isa : core::IsaLevels()) {
    if (!core::AtLeast(core::ActiveIsa(), isa)) continue;  // (the paths this CPU lacks run where it has them)
    const core::Isa active = core::ActiveIsa();
    core::SetIsaCap(isa);
    std::vector<float> s_isa(c.state_floats, c.initial_state), y_isa(T * ld);
    run(0, T, s_isa.data(), y_isa.data(), {});
    core::SetIsaCap(active);
    EXPECT_EQ(y_isa, one.y) << core::IsaName(isa) << " " << c.label;
    EXPECT_EQ(s_isa, one.state) << core::IsaName(isa) << " " << c.label;
  }
  return one;
}

}  // namespace radixlm::kernels
