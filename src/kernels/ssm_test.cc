#include "kernels/ssm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu_features.h"
#include "core/random.h"
#include "kernels/recurrence_test.h"

namespace radixlm::kernels {
namespace {

struct Problem {
  Mamba2Dims d;
  int64_t T;
  std::vector<float> xbc, dt, dt_bias, A, D;
  ScanInputs In(int64_t offset = 0) const {
    ScanInputs in;
    const int64_t ld = d.conv_dim();
    in.x = xbc.data() + offset * ld;
    in.B = in.x + d.d_inner();
    in.C = in.B + int64_t{d.n_groups} * d.d_state;
    in.ld = ld;
    in.dt = dt.data() + offset * d.n_heads;
    in.ld_dt = d.n_heads;
    in.dt_bias = dt_bias.data();
    in.A = A.data();
    in.D = D.data();
    return in;
  }
};

Problem MakeProblem(int64_t T, int H, int P, int N, int G, uint64_t seed) {
  Problem p;
  p.d = {H, P, N, G, 4};
  p.T = T;
  core::Rng rng(seed);
  auto fill = [&](std::vector<float>& v, size_t n, float scale, float mean = 0) {
    v.resize(n);
    for (auto& x : v) x = rng.Normal(mean, scale);
  };
  fill(p.xbc, T * p.d.conv_dim(), 0.5f);
  fill(p.dt, T * H, 0.5f, -1.0f);
  fill(p.dt_bias, H, 0.3f);
  p.A.resize(H);
  for (auto& a : p.A) a = -std::exp(rng.Normal(0.0f, 0.5f));
  fill(p.D, H, 0.5f);
  return p;
}

TEST(Mamba2Scan, ChunkedEqualsTheSequentialRecurrenceWithStatesAtAnyToken) {
  for (int chunk : {1, 4, 16, 64}) {
    for (int G : {1, 2}) {
      Problem p = MakeProblem(150, 4, 16, 8, G, 11 + chunk + G);
      const int64_t sf = p.d.ssm_state_floats();
      std::vector<float> s_ref(sf, 0.0f), s_chk(sf, 0.0f), y_ref(p.T * p.d.d_inner()), y_chk(y_ref.size());
      // Checkpoints on the chunk grid, strictly inside a chunk, and at the end.
      std::vector<int32_t> at = {16, 37, 64, 101, 150};
      std::vector<std::vector<float>> c_ref(at.size(), std::vector<float>(sf)), c_chk = c_ref;
      std::vector<StateCapture> cap_ref, cap_chk;
      for (size_t i = 0; i < at.size(); ++i) {
        cap_ref.push_back({at[i], c_ref[i].data(), nullptr});
        cap_chk.push_back({at[i], c_chk[i].data(), nullptr});
      }
      Mamba2ScanReference(p.d, p.T, p.In(), s_ref.data(), y_ref.data(), p.d.d_inner(), cap_ref);
      Mamba2Scan(p.d, p.T, 0, chunk, p.In(), s_chk.data(), y_chk.data(), p.d.d_inner(), cap_chk, 0, p.d.n_heads);
      EXPECT_LT(MaxRelErr(y_chk, y_ref), 1e-5) << "chunk " << chunk << " groups " << G;
      EXPECT_LT(MaxRelErr(s_chk, s_ref), 1e-5);
      for (size_t i = 0; i < at.size(); ++i) EXPECT_LT(MaxRelErr(c_chk[i], c_ref[i]), 1e-5) << "after " << at[i];
    }
  }
}

TEST(Mamba2Scan, ResumingFromACheckpointReproducesTheRestBitForBit) {
  Problem p = MakeProblem(200, 4, 16, 8, 2, 5);
  const int64_t sf = p.d.ssm_state_floats(), di = p.d.d_inner();
  for (int32_t split : {64, 77}) {  // on the chunk grid, and inside a chunk
    std::vector<float> full_state(sf, 0.0f), y_full(p.T * di), ckpt(sf);
    StateCapture cap{split, ckpt.data(), nullptr};
    Mamba2Scan(p.d, p.T, 0, 32, p.In(), full_state.data(), y_full.data(), di, {&cap, 1}, 0, p.d.n_heads);
    std::vector<float> y_rest((p.T - split) * di);
    Mamba2Scan(p.d, p.T - split, split, 32, p.In(split), ckpt.data(), y_rest.data(), di, {}, 0, p.d.n_heads);
    EXPECT_EQ(ckpt, full_state) << "split " << split;
    EXPECT_TRUE(std::equal(y_rest.begin(), y_rest.end(), y_full.begin() + split * di));
  }
}

TEST(Mamba2Scan, HeadRangesAndIsaDoNotChangeTheResult) {
  // Model-like widths (head_dim 64, d_state 128) so the SIMD tiles, not the scalar tails, run.
  Problem p = MakeProblem(90, 8, 64, 128, 2, 9);
  const int64_t sf = p.d.ssm_state_floats(), di = p.d.d_inner();
  std::vector<float> s_all(sf, 0.1f), y_all(p.T * di);
  Mamba2Scan(p.d, p.T, 3, 32, p.In(), s_all.data(), y_all.data(), di, {}, 0, 8);
  std::vector<float> s_split(sf, 0.1f), y_split(p.T * di);
  Mamba2Scan(p.d, p.T, 3, 32, p.In(), s_split.data(), y_split.data(), di, {}, 0, 3);
  Mamba2Scan(p.d, p.T, 3, 32, p.In(), s_split.data(), y_split.data(), di, {}, 3, 8);
  EXPECT_EQ(s_all, s_split);
  EXPECT_EQ(y_all, y_split);
  // Every ISA path the CPU has runs the same operations: bitwise the default path.
  for (core::Isa isa : core::IsaLevels()) {
    if (!core::AtLeast(core::ActiveIsa(), isa)) continue;
    core::SetIsaCap(isa);
    std::vector<float> s_isa(sf, 0.1f), y_isa(p.T * di);
    Mamba2Scan(p.d, p.T, 3, 32, p.In(), s_isa.data(), y_isa.data(), di, {}, 0, 8);
    core::SetIsaCap(core::Isa::kAvx512);
    EXPECT_EQ(y_isa, y_all) << core::IsaName(isa);
    EXPECT_EQ(s_isa, s_all) << core::IsaName(isa);
  }
}

// The exact recurrence (chunk 0): the reference's results to rounding, and bitwise the same
// however the tokens are split into calls (decode steps, random prefill pieces, a capture),
// on every ISA the CPU has, with head widths that leave SIMD tails (head_dim 40).
TEST(Mamba2Scan, TheRecurrenceGivesTheSameBitsHoweverTheTokensAreSplit) {
  for (auto [P, N] : {std::pair{64, 128}, std::pair{40, 16}}) {
    Problem p = MakeProblem(150, 6, P, N, 2, 21);
    const int64_t sf = p.d.ssm_state_floats(), di = p.d.d_inner();
    std::vector<float> s_ref(sf, 0.05f), y_ref(p.T * di);
    Mamba2ScanReference(p.d, p.T, p.In(), s_ref.data(), y_ref.data(), di, {});
    const auto run = [&](int64_t t, int64_t n, float* state, float* y, std::span<const StateCapture> captures) {
      Mamba2Scan(p.d, n, t, 0, p.In(t), state, y, di, captures, 0, p.d.n_heads);
    };
    // Random pieces, single tokens among them, a restart from the capture, and every ISA.
    const RecurrenceOutput one = ExpectTheSameBitsHoweverSplit(
        run, {.tokens = p.T, .state_floats = sf, .ld = di, .initial_state = 0.05f, .capture_at = 97, .split_seed = 5,
              .max_piece = 70, .label = std::to_string(P)});
    EXPECT_LT(MaxRelErr(one.y, y_ref), 1e-5) << P;
    EXPECT_LT(MaxRelErr(one.state, s_ref), 1e-5) << P;
  }
}

TEST(CausalConv1d, MatchesTheDirectSumAndCarriesItsStateAcrossCalls) {
  Mamba2Dims d{2, 4, 3, 1, 4};
  const int64_t cd = d.conv_dim(), T = 11;
  core::Rng rng(3);
  std::vector<float> in(T * cd), w(d.d_conv * cd), bias(cd);
  for (auto& v : in) v = rng.Normal(0.0f, 1.0f);
  for (auto& v : w) v = rng.Normal(0.0f, 0.5f);
  for (auto& v : bias) v = rng.Normal(0.0f, 0.1f);
  std::vector<float> state(d.conv_state_floats(), 0.0f), out(T * cd), ckpt(d.conv_state_floats());
  StateCapture cap{6, nullptr, ckpt.data()};
  CausalConv1dSilu(d, T, in.data(), cd, w.data(), bias.data(), state.data(), out.data(), {&cap, 1});
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < cd; ++c) {
      double acc = bias[c];
      for (int k = 0; k < d.d_conv; ++k) {
        const int64_t s = t - (d.d_conv - 1) + k;
        if (s >= 0) acc += double(w[k * cd + c]) * in[s * cd + c];
      }
      const double want = acc / (1 + std::exp(-acc));
      ASSERT_NEAR(out[t * cd + c], want, 1e-5);
    }
  }
  // Resume from the checkpoint after 6 tokens: the rest comes out the same.
  std::vector<float> rest((T - 6) * cd);
  CausalConv1dSilu(d, T - 6, in.data() + 6 * cd, cd, w.data(), bias.data(), ckpt.data(), rest.data(), {});
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), out.begin() + 6 * cd));
  EXPECT_EQ(ckpt, state);  // both hold the last d_conv - 1 inputs
  // Rows in pieces (as threads run them) from the same old window, then the window advanced:
  // the same rows and the same window, bitwise.
  std::vector<float> state2(d.conv_state_floats(), 0.0f), pieces(T * cd);
  for (int64_t t0 : {7, 0, 2})
    CausalConv1dSiluRows(d, t0, t0 == 7 ? T : t0 == 2 ? 7 : 2, in.data(), cd, w.data(), bias.data(), state2.data(),
                         pieces.data());
  EXPECT_EQ(pieces, out);
  AdvanceConvState(d, T, in.data(), cd, state2.data(), {});
  EXPECT_EQ(state2, state);
}

// LFM2's short convolution (no bias, no activation): the oracle's multiply-add chain (the
// direct sum in the taps' order, f32) on every ISA the CPU has, bitwise; split into calls
// anywhere (a checkpoint, a chunked prefill, decode steps) it gives the same bits.
TEST(CausalConv1d, TheLinearShortConvIsTheOracleOnEveryIsaAndSplitInvariant) {
  const Mamba2Dims d = DepthwiseConvDims(50, 3);  // six vectors and a tail of 2
  const int64_t cd = d.conv_dim(), T = 23;
  core::Rng rng(49);
  std::vector<float> in(T * cd), w(d.d_conv * cd);
  for (auto& v : in) v = rng.Normal(0.0f, 3.0f);
  for (auto& v : w) v = rng.Normal(0.0f, 0.7f);
  std::vector<float> oracle(T * cd);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < cd; ++c) {
      float acc = 0.0f;
      for (int k = 0; k < d.d_conv; ++k) {
        const int64_t s = t - (d.d_conv - 1) + k;
        const float x = s >= 0 ? in[s * cd + c] : 0.0f;
        acc = acc + w[k * cd + c] * x;  // ssm.cc is built with -ffp-contract=off: no fma here either
      }
      oracle[t * cd + c] = acc;
    }
  // In pieces of 1..5 rows, each call reading and advancing the window as the engine does.
  auto run_split = [&](uint64_t seed) {
    std::vector<float> state(d.conv_state_floats(), 0.0f), out(T * cd);
    core::Rng split(seed);
    for (int64_t t = 0; t < T;) {
      const int64_t n = std::min<int64_t>(T - t, 1 + static_cast<int64_t>(split.Next() % 5));
      CausalConv1dRows(d, 0, n, in.data() + t * cd, cd, w.data(), nullptr, state.data(), out.data() + t * cd);
      AdvanceConvState(d, n, in.data() + t * cd, cd, state.data(), {});
      t += n;
    }
    return out;
  };
  const core::Isa active = core::ActiveIsa();
  int compared = 0;
  for (core::Isa isa : core::IsaLevels()) {
    core::SetIsaCap(isa);
    if (core::ActiveIsa() != isa) continue;  // not on this CPU
    ++compared;
    std::vector<float> whole(T * cd), state(d.conv_state_floats(), 0.0f);
    CausalConv1dRows(d, 0, T, in.data(), cd, w.data(), nullptr, state.data(), whole.data());
    const std::vector<float> split1 = run_split(1), split2 = run_split(2);
    core::SetIsaCap(active);
    EXPECT_EQ(0, std::memcmp(whole.data(), oracle.data(), whole.size() * 4)) << core::IsaName(isa);
    EXPECT_EQ(0, std::memcmp(split1.data(), oracle.data(), split1.size() * 4)) << core::IsaName(isa);
    EXPECT_EQ(0, std::memcmp(split2.data(), oracle.data(), split2.size() * 4)) << core::IsaName(isa);
  }
  core::SetIsaCap(active);
  EXPECT_GE(compared, 1);
}

// The conv's and the gated norm's SiLU run 8 lanes at a time on AVX2 (ExpVec8) and in GCC's zmm
// vectorisation on AVX-512: bitwise the scalar path on every ISA the CPU has, for channel counts
// that leave a tail and for inputs across exp's range, its clamps (|x| > 87) and the infinities.
TEST(CausalConv1d, EveryIsaGivesTheScalarBitsForTheConvAndTheGatedNorm) {
  Mamba2Dims d{20, 2, 5, 1, 4};  // conv_dim = 2 * 20 + 2 * 5 = 50: six vectors and a tail of 2
  const int64_t cd = d.conv_dim(), T = 9, di = d.d_inner();
  core::Rng rng(17);
  std::vector<float> in(T * cd), w(d.d_conv * cd), bias(cd), z(T * di), y0(T * di), gw(di);
  for (auto& v : in) v = rng.Normal(0.0f, 4.0f);
  for (auto& v : w) v = rng.Normal(0.0f, 1.0f);
  for (auto& v : bias) v = rng.Normal(0.0f, 0.1f);
  for (auto& v : z) v = rng.Normal(0.0f, 30.0f);
  for (auto& v : y0) v = rng.Normal(0.0f, 1.0f);
  for (auto& v : gw) v = rng.Normal(1.0f, 0.1f);
  const float edges[] = {0.0f, -0.0f, 87.0f, -87.0f, 87.5f, -87.5f, 88.5f, -88.5f, 100.0f, -100.0f, 1e-30f, -1e-30f,
                         std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < std::size(edges); ++i) z[3 * i] = edges[i];
  for (size_t i = 0; i < 8; ++i) bias[i] = edges[i] * 3.0f;  // conv outputs past the clamps
  auto run = [&](std::vector<float>* conv, std::vector<float>* norm) {
    std::vector<float> state(d.conv_state_floats(), 0.0f);
    conv->assign(T * cd, 0.0f);
    CausalConv1dSilu(d, T, in.data(), cd, w.data(), bias.data(), state.data(), conv->data(), {});
    *norm = y0;
    GatedRmsNorm(norm->data(), di, z.data(), di, gw.data(), T, di, 10, 1e-5f);
  };
  const core::Isa active = core::ActiveIsa();
  core::SetIsaCap(core::Isa::kScalar);
  std::vector<float> conv_ref, norm_ref;
  run(&conv_ref, &norm_ref);
  int compared = 0;
  for (core::Isa isa : core::IsaLevels()) {
    if (isa == core::Isa::kScalar) continue;
    core::SetIsaCap(isa);
    if (core::ActiveIsa() != isa) continue;  // not on this CPU
    ++compared;
    std::vector<float> conv, norm;
    run(&conv, &norm);
    core::SetIsaCap(active);
    EXPECT_EQ(0, std::memcmp(conv.data(), conv_ref.data(), conv.size() * 4)) << core::IsaName(isa);
    EXPECT_EQ(0, std::memcmp(norm.data(), norm_ref.data(), norm.size() * 4)) << core::IsaName(isa);
  }
  core::SetIsaCap(active);
  if (compared == 0) GTEST_SKIP() << "no SIMD level on this CPU: nothing to compare with the scalar path";
}

TEST(GatedRmsNorm, NormalisesEachGroupAfterTheGate) {
  std::vector<float> y = {1, 2, 3, 4}, z = {0, 1, 2, 3}, w = {1, 1, 2, 2};
  GatedRmsNorm(y.data(), 4, z.data(), 4, w.data(), 1, 4, 2, 0.0f);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  const double a = 1 * silu(0), b = 2 * silu(1), c = 3 * silu(2), e = 4 * silu(3);
  const double r1 = std::sqrt((a * a + b * b) / 2), r2 = std::sqrt((c * c + e * e) / 2);
  EXPECT_NEAR(y[1], b / r1, 1e-6);
  EXPECT_NEAR(y[2], 2 * c / r2, 1e-6);
}

}  // namespace
}  // namespace radixlm::kernels
