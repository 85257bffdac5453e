#include "core/crc32c.h"

#include <array>
#include <cstring>

#include "core/cpu_features.h"
#if defined(__aarch64__)
#include <arm_acle.h>
#endif

namespace radixlm::core {
namespace {

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

// The CPU's CRC-32C instructions (SSE4.2's crc32; ARMv8's crc32cx / crc32cb), 8 bytes a step.
#if RADIXLM_X86
__attribute__((target("sse4.2"))) uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}
bool HasHw() { return __builtin_cpu_supports("sse4.2"); }
#elif defined(__aarch64__)
__attribute__((target("+crc"))) uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __crc32cd(c, v);
  }
  for (; n > 0; --n, ++p) c = __crc32cb(c, *p);
  return ~c;
}
bool HasHw() { return DetectedCpu().crc32; }
#else
uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) { return 0; }
bool HasHw() { return false; }
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  static const bool hw = HasHw();
  return hw ? ExtendHw(crc, static_cast<const uint8_t*>(data), n) : Crc32cExtendPortable(crc, data, n);
}

}  // namespace radixlm::core
