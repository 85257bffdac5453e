#include "core/cpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace radixlm::core {
namespace {

Isa DetectedLevel() {
  const CpuFeatures& f = DetectedCpu();
  // The AVX-512 level is F + BW + VL + DQ (every AVX-512 CPU but Knights Landing): kernels of
  // this level may use any of them; VNNI and BF16 are checked per kernel.
  if (f.avx512bw) return Isa::kAvx512;
  if (f.avx2_fma) return Isa::kAvx2;
  // i8mm without dotprod exists in no CPU; the level needs both.
  if (f.i8mm && f.dotprod) return Isa::kI8mm;
  if (f.dotprod) return Isa::kDotprod;
  if (f.neon) return Isa::kNeon;
  return Isa::kScalar;
}

// The family of a level (0 scalar, 1 x86, 2 ARM) and its rank within it.
int Family(Isa isa) { return isa == Isa::kScalar ? 0 : static_cast<int>(isa) <= 2 ? 1 : 2; }
int Rank(Isa isa) { return isa == Isa::kScalar ? 0 : Family(isa) == 1 ? static_cast<int>(isa) : static_cast<int>(isa) - 2; }

constexpr Isa kNoCap = Isa::kAvx512;  // a cap of the other family: none on ARM
Isa InitialCap() {
  const char* env = std::getenv("RADIXLM_ISA");  // read once at start-up, not per call
  if (!env) return RADIXLM_ARM ? Isa::kI8mm : kNoCap;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kDotprod, Isa::kI8mm})
    if (!std::strcmp(env, IsaName(isa))) return isa;
  return RADIXLM_ARM ? Isa::kI8mm : kNoCap;
}

Isa g_cap = InitialCap();

}  // namespace

const CpuFeatures& DetectedCpu() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__aarch64__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f.neon = hw & HWCAP_ASIMD;
    f.dotprod = hw & HWCAP_ASIMDDP;
    f.sve = hw & HWCAP_SVE;
    f.crc32 = hw & HWCAP_CRC32;
    f.i8mm = hw2 & HWCAP2_I8MM;
    f.bf16 = hw2 & HWCAP2_BF16;
#endif
#if RADIXLM_X86
    __builtin_cpu_init();
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    f.avx512f = f.avx2_fma && __builtin_cpu_supports("avx512f");
    f.avx512bw = f.avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512dq");
    f.avx512_vnni = f.avx512bw && __builtin_cpu_supports("avx512vnni");
    f.avx512_bf16 = f.avx512bw && __builtin_cpu_supports("avx512bf16");
#endif
    return f;
  }();
  return features;
}

Isa ActiveIsa() {
  const Isa detected = DetectedLevel();
  if (g_cap == Isa::kScalar) return Isa::kScalar;
  if (Family(g_cap) != Family(detected)) return detected;
  return Rank(g_cap) < Rank(detected) ? g_cap : detected;
}
void SetIsaCap(Isa cap) { g_cap = cap; }

bool AtLeast(Isa active, Isa level) {
  if (level == Isa::kScalar) return true;
  return Family(active) == Family(level) && Rank(active) >= Rank(level);
}

std::vector<Isa> IsaLevels() {
  if (RADIXLM_ARM) return {Isa::kScalar, Isa::kNeon, Isa::kDotprod, Isa::kI8mm};
  return {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
    case Isa::kDotprod: return "dotprod";
    case Isa::kI8mm: return "i8mm";
  }
  return "?";
}

}  // namespace radixlm::core
