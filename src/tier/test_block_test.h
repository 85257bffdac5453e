// A block's payload for the tier tests: 3000 random bytes handed over in two segments (keys,
// then values), as the pool hands a block to a tier.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "core/random.h"

namespace radixlm::tier {

struct TestBlock {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(3000);
  std::vector<iovec> Segments() { return {{bytes.data(), 1000}, {bytes.data() + 1000, 2000}}; }
  static TestBlock Random(uint64_t seed) {
    core::Rng rng(seed);
    TestBlock b;
    for (auto& x : b.bytes) x = static_cast<uint8_t>(rng.Below(256));
    return b;
  }
};

}  // namespace radixlm::tier
