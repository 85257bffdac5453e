#include "core/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace radixlm::core {
namespace {

// One MXFP4 block: scale byte e, every byte of codes `codes`.
BlockMXFP4 Mxfp4Block(uint8_t e, uint8_t codes) {
  BlockMXFP4 b{};
  b.e = e;
  for (uint8_t& q : b.qs) q = codes;
  return b;
}

TEST(Mxfp4, DecodesTheDoubledE2M1ValuesTimesTwoToTheEMinus128) {
  // Code 0x7 (E2M1 6.0, doubled 12) low, 0xA (-1.0, doubled -2) high, scale 2^(127 - 128).
  const BlockMXFP4 b = Mxfp4Block(127, 0xA7);
  float y[32];
  DequantizeRow(DType::kMXFP4, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 6.0f);
    EXPECT_EQ(y[j + 16], -1.0f);
  }
  DecodedBlock d;
  DecodeBlock(DType::kMXFP4, &b, &d);
  EXPECT_EQ(d.u[0], 12 + 12);
  EXPECT_EQ(d.u[16], 12 - 2);
  EXPECT_EQ(F16ToF32(d.d), 0.5f);
}

TEST(Mxfp4, ScalesTheF16CarriesExactlyAndTheRestAreRefusedUnlessTheBlockIsZero) {
  for (int e : {104, 110, 128, 143}) {
    const BlockMXFP4 b = Mxfp4Block(static_cast<uint8_t>(e), 0x11);  // 0.5 everywhere
    float y[32];
    DequantizeRow(DType::kMXFP4, &b, y, 32);
    EXPECT_EQ(y[0], std::ldexp(1.0f, e - 128)) << e;
    EXPECT_EQ(FirstOutOfRange(DType::kMXFP4, &b, 32), -1) << e;
  }
  std::vector<BlockMXFP4> blocks = {Mxfp4Block(120, 0x23), Mxfp4Block(0, 0x88), Mxfp4Block(255, 0x00),
                                    Mxfp4Block(103, 0x81)};
  EXPECT_EQ(FirstOutOfRange(DType::kMXFP4, blocks.data(), 32 * 4), 3);  // 0.5 and -0: a nonzero value
  blocks[3] = Mxfp4Block(144, 0x08);
  EXPECT_EQ(FirstOutOfRange(DType::kMXFP4, blocks.data(), 32 * 4), -1);  // +0 and -0 only
  float y[32 * 4];
  DequantizeRow(DType::kMXFP4, blocks.data(), y, 32 * 4);
  for (int i = 32; i < 128; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  EXPECT_EQ(FirstOutOfRange(DType::kQ4_0, blocks.data(), 32), -1);  // f16 scales: nothing to check
}

}  // namespace
}  // namespace radixlm::core
