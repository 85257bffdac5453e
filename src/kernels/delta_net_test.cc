#include "kernels/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/random.h"
#include "kernels/recurrence_test.h"

namespace radixlm::kernels {
namespace {

struct Problem {
  DeltaNetDims d;
  int64_t T = 0;
  std::vector<float> qkv, ba, dt_bias, A;
  DeltaNetInputs In(int64_t from = 0) const {
    return {qkv.data() + from * d.conv_dim(), d.conv_dim(), ba.data() + from * 2 * d.v_heads,
            ba.data() + from * 2 * d.v_heads + d.v_heads, 2 * d.v_heads, dt_bias.data(), A.data(), 1e-6f};
  }
};

Problem Make(int64_t T, int hk, int hv, int S, bool tiled, uint64_t seed) {
  Problem p;
  p.d = {hk, hv, S, 4, tiled};
  p.T = T;
  core::Rng rng(seed);
  p.qkv.resize(T * p.d.conv_dim());
  for (float& x : p.qkv) x = rng.Normal(0.0f, 1.0f);
  p.ba.resize(T * 2 * hv);
  for (float& x : p.ba) x = rng.Normal(0.0f, 1.0f);
  for (int j = 0; j < hv; ++j) {
    p.dt_bias.push_back(rng.Normal(0.0f, 0.5f));
    p.A.push_back(-std::exp(rng.Normal(0.0f, 0.5f)));
  }
  return p;
}

// The recurrence equals the plainly written oracle (f64 sums) to rounding, and gives the same
// bits however the tokens are split into calls, after a restore from a capture, on every ISA
// the CPU has; head_dim 40 leaves SIMD tails, and 4 value heads on 2 key heads test both head
// layouts.
TEST(GatedDeltaRule, TheRecurrenceEqualsTheOracleAndGivesTheSameBitsHoweverSplit) {
  for (auto [S, tiled] : {std::pair{128, true}, std::pair{40, false}, std::pair{64, true}}) {
    Problem p = Make(90, 2, 4, S, tiled, 7);
    const int64_t sf = p.d.ssm_state_floats(), vd = p.d.value_dim();
    std::vector<float> s_ref(sf, 0.01f), y_ref(p.T * vd);
    GatedDeltaRuleReference(p.d, p.T, p.In(), s_ref.data(), y_ref.data(), vd);
    const auto run = [&](int64_t t, int64_t n, float* state, float* y, std::span<const StateCapture> captures) {
      GatedDeltaRule(p.d, n, p.In(t), state, y, vd, captures, 0, p.d.v_heads);
    };
    const RecurrenceOutput one = ExpectTheSameBitsHoweverSplit(
        run, {.tokens = p.T, .state_floats = sf, .ld = vd, .initial_state = 0.01f, .capture_at = 57, .split_seed = 3,
              .max_piece = 40, .label = std::to_string(S)});
    EXPECT_LT(MaxRelErr(one.y, y_ref), 1e-5) << S;
    EXPECT_LT(MaxRelErr(one.state, s_ref), 1e-5) << S;
    // Head ranges (threads): the same bits.
    std::vector<float> s_heads(sf, 0.01f), y_heads(p.T * vd);
    GatedDeltaRule(p.d, p.T, p.In(), s_heads.data(), y_heads.data(), vd, {}, 0, 1);
    GatedDeltaRule(p.d, p.T, p.In(), s_heads.data(), y_heads.data(), vd, {}, 1, p.d.v_heads);
    EXPECT_EQ(y_heads, one.y) << S;
  }
}

// The chunked WY / UT form (chunks of 64, and of 16 so several chunks run) computes the same
// function as the recurrence: outputs and final state within 1e-5 relative (f32).
TEST(GatedDeltaRule, TheChunkedFormEqualsTheRecurrence) {
  for (int chunk : {64, 16}) {
    Problem p = Make(150, 2, 4, 64, true, 11);
    const int64_t sf = p.d.ssm_state_floats(), vd = p.d.value_dim();
    std::vector<float> s_rec(sf, 0.01f), y_rec(p.T * vd), s_chk(sf, 0.01f), y_chk(p.T * vd);
    GatedDeltaRule(p.d, p.T, p.In(), s_rec.data(), y_rec.data(), vd, {}, 0, p.d.v_heads);
    GatedDeltaRuleChunked(p.d, p.T, p.In(), s_chk.data(), y_chk.data(), vd, chunk, 0, p.d.v_heads);
    EXPECT_LT(MaxRelErr(y_chk, y_rec), 1e-5) << chunk;
    EXPECT_LT(MaxRelErr(s_chk, s_rec), 1e-5) << chunk;
  }
}

// The value heads' key heads: GGUF's tiled layout (j % Hk) and HF's grouped one (j / (Hv/Hk))
// read different key heads, so swapping the key heads' inputs permutes the outputs accordingly.
TEST(GatedDeltaRule, ValueHeadsReadTheirKeyHeadInEitherLayout) {
  const DeltaNetDims tiled{2, 4, 8, 4, true}, grouped{2, 4, 8, 4, false};
  EXPECT_EQ(tiled.KeyHead(0), 0);
  EXPECT_EQ(tiled.KeyHead(1), 1);
  EXPECT_EQ(tiled.KeyHead(2), 0);
  EXPECT_EQ(tiled.KeyHead(3), 1);
  EXPECT_EQ(grouped.KeyHead(1), 0);
  EXPECT_EQ(grouped.KeyHead(2), 1);
  Problem p = Make(5, 2, 4, 8, true, 2);
  std::vector<float> s1(p.d.ssm_state_floats(), 0), y1(p.T * p.d.value_dim());
  GatedDeltaRule(p.d, p.T, p.In(), s1.data(), y1.data(), p.d.value_dim(), {}, 0, 4);
  Problem g = p;
  g.d.tiled = false;  // value heads 1 and 2 swap key heads: swap those value heads' inputs too
  for (int64_t t = 0; t < p.T; ++t) {
    float* row = g.qkv.data() + t * g.d.conv_dim() + 2 * g.d.key_dim();
    std::swap_ranges(row + 8, row + 16, row + 16);
    float* ba = g.ba.data() + t * 8;
    std::swap(ba[1], ba[2]);
    std::swap(ba[5], ba[6]);
  }
  std::swap(g.dt_bias[1], g.dt_bias[2]);
  std::swap(g.A[1], g.A[2]);
  std::vector<float> s2(g.d.ssm_state_floats(), 0), y2(g.T * g.d.value_dim());
  GatedDeltaRule(g.d, g.T, g.In(), s2.data(), y2.data(), g.d.value_dim(), {}, 0, 4);
  for (int64_t t = 0; t < p.T; ++t)
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(y1[t * 32 + 8 + c], y2[t * 32 + 16 + c]);
      EXPECT_EQ(y1[t * 32 + 16 + c], y2[t * 32 + 8 + c]);
    }
}

}  // namespace
}  // namespace radixlm::kernels
