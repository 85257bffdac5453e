#include "kernels/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"

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

double MaxRel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
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
    std::vector<float> s_one(sf, 0.01f), y_one(p.T * vd), ckpt(sf);
    StateCapture cap{57, ckpt.data(), nullptr};
    GatedDeltaRule(p.d, p.T, p.In(), s_one.data(), y_one.data(), vd, {&cap, 1}, 0, p.d.v_heads);
    EXPECT_LT(MaxRel(y_one, y_ref), 1e-5) << S;
    EXPECT_LT(MaxRel(s_one, s_ref), 1e-5) << S;
    core::Rng rng(3);
    std::vector<float> s_split(sf, 0.01f), y_split(p.T * vd);
    for (int64_t t = 0; t < p.T;) {
      const int64_t n = std::min<int64_t>(p.T - t, rng.Below(3) == 0 ? 1 : 1 + rng.Below(40));
      GatedDeltaRule(p.d, n, p.In(t), s_split.data(), y_split.data() + t * vd, vd, {}, 0, p.d.v_heads);
      t += n;
    }
    EXPECT_EQ(y_split, y_one) << S;
    EXPECT_EQ(s_split, s_one) << S;
    std::vector<float> y_rest((p.T - 57) * vd);
    GatedDeltaRule(p.d, p.T - 57, p.In(57), ckpt.data(), y_rest.data(), vd, {}, 0, p.d.v_heads);
    EXPECT_TRUE(std::equal(y_rest.begin(), y_rest.end(), y_one.begin() + 57 * vd)) << S;
    EXPECT_EQ(ckpt, s_one) << S;
    // Head ranges (threads) and every ISA the CPU has: the same bits.
    std::vector<float> s_heads(sf, 0.01f), y_heads(p.T * vd);
    GatedDeltaRule(p.d, p.T, p.In(), s_heads.data(), y_heads.data(), vd, {}, 0, 1);
    GatedDeltaRule(p.d, p.T, p.In(), s_heads.data(), y_heads.data(), vd, {}, 1, p.d.v_heads);
    EXPECT_EQ(y_heads, y_one) << S;
    for (core::Isa isa : {core::Isa::kScalar, core::Isa::kAvx2, core::Isa::kAvx512}) {
      if (isa > core::ActiveIsa()) continue;  // (the paths this CPU lacks run where it has them)
      const core::Isa active = core::ActiveIsa();
      core::SetIsaCap(isa);
      std::vector<float> s_isa(sf, 0.01f), y_isa(p.T * vd);
      GatedDeltaRule(p.d, p.T, p.In(), s_isa.data(), y_isa.data(), vd, {}, 0, p.d.v_heads);
      core::SetIsaCap(active);
      EXPECT_EQ(y_isa, y_one) << core::IsaName(isa) << " " << S;
      EXPECT_EQ(s_isa, s_one) << core::IsaName(isa) << " " << S;
    }
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
    EXPECT_LT(MaxRel(y_chk, y_rec), 1e-5) << chunk;
    EXPECT_LT(MaxRel(s_chk, s_rec), 1e-5) << chunk;
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
