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
  return Isa::kScalar;
}

Isa InitialCap() {
  const char* env = std::getenv("RADIXLM_ISA");  // read once at start-up, not per call
  if (!env) return Isa::kAvx512;
  if (!std::strcmp(env, "scalar")) return Isa::kScalar;
  if (!std::strcmp(env, "avx2")) return Isa::kAvx2;
  return Isa::kAvx512;
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

Isa ActiveIsa() { return static_cast<Isa>(std::min(static_cast<int>(DetectedLevel()), static_cast<int>(g_cap))); }
void SetIsaCap(Isa cap) { g_cap = cap; }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace radixlm::core
