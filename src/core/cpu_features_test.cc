#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace radixlm::core {
namespace {

// The levels of this build's family are ordered; levels of the other family are never "at
// least" reached (comparing enum values would order ARM's above AVX-512).
TEST(CpuFeatures, LevelsAreOrderedWithinTheBuildsFamilyOnly) {
  const std::vector<Isa> levels = IsaLevels();
  ASSERT_GE(levels.size(), 2u);
  EXPECT_EQ(levels.front(), Isa::kScalar);
  for (size_t i = 0; i < levels.size(); ++i)
    for (size_t j = 0; j < levels.size(); ++j) EXPECT_EQ(AtLeast(levels[i], levels[j]), i >= j) << i << " " << j;
  const std::vector<Isa> other = RADIXLM_ARM ? std::vector<Isa>{Isa::kAvx2, Isa::kAvx512}
                                             : std::vector<Isa>{Isa::kNeon, Isa::kDotprod, Isa::kI8mm};
  for (Isa a : levels)
    for (Isa b : other) {
      EXPECT_FALSE(AtLeast(a, b)) << IsaName(a) << " " << IsaName(b);
      EXPECT_FALSE(AtLeast(b, a) && a != Isa::kScalar) << IsaName(b) << " " << IsaName(a);
    }
}

// The active level is one of the build's, capped by SetIsaCap within the family; a cap of the
// other family caps nothing.
TEST(CpuFeatures, TheCapLowersTheActiveLevelWithinTheFamily) {
  const Isa top = ActiveIsa();
  const std::vector<Isa> levels = IsaLevels();
  ASSERT_NE(std::find(levels.begin(), levels.end(), top), levels.end());
  const CpuFeatures& f = DetectedCpu();
  if (RADIXLM_ARM) {
    EXPECT_EQ(AtLeast(top, Isa::kDotprod), f.dotprod);
    EXPECT_EQ(AtLeast(top, Isa::kI8mm), f.dotprod && f.i8mm);
  } else {
    EXPECT_EQ(AtLeast(top, Isa::kAvx2), f.avx2_fma);
  }
  for (Isa cap : levels) {
    SetIsaCap(cap);
    EXPECT_EQ(ActiveIsa(), AtLeast(top, cap) ? cap : top) << IsaName(cap);
  }
  SetIsaCap(RADIXLM_ARM ? Isa::kAvx512 : Isa::kI8mm);  // the other family's: no cap
  EXPECT_EQ(ActiveIsa(), top);
  SetIsaCap(Isa::kScalar);
  EXPECT_EQ(ActiveIsa(), Isa::kScalar);
  SetIsaCap(levels.back());
  EXPECT_EQ(ActiveIsa(), top);
  std::printf("detected: %s\n", IsaName(top));
}

}  // namespace
}  // namespace radixlm::core
