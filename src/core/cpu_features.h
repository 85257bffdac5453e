// CPU feature detection, done once; the single place where kernels ask which fast path to
// take. RADIXLM_ISA caps the level (for tests and comparisons): scalar|avx2|avx512 on x86-64,
// scalar|neon|dotprod|i8mm on aarch64.
//
// x86-64: cpuid (through gcc's __builtin_cpu_supports). aarch64: the kernel's HWCAP bits
// (getauxval(AT_HWCAP / AT_HWCAP2)). RADIXLM_X86 / RADIXLM_ARM say which family the build
// targets: each family's intrinsics are compiled only where it is 1.
//
// Levels are ordered within a family (scalar is the bottom of both): compare them with
// AtLeast, never with < or >=, which would order an ARM level above an x86 one.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define RADIXLM_X86 1
#else
#define RADIXLM_X86 0
#endif
#if defined(__aarch64__)
#define RADIXLM_ARM 1
#else
#define RADIXLM_ARM 0
#endif

#include <vector>

namespace radixlm::core {

// kAvx512 means AVX-512 F + BW + VL + DQ; VNNI and BF16 are separate features. On aarch64:
// kNeon is Advanced SIMD (every ARMv8-A CPU), kDotprod adds sdot/udot (FEAT_DotProd),
// kI8mm adds smmla (FEAT_I8MM) on top of dotprod.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3, kDotprod = 4, kI8mm = 5 };

struct CpuFeatures {
  bool avx2_fma = false;  // with F16C (every AVX2 CPU has it)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512_vnni = false;  // vpdpbusd: int8 dot products
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  // aarch64 (HWCAP): Advanced SIMD, sdot/udot, smmla (i8mm), bfdot/bfmmla, SVE, crc32c*.
  bool neon = false, dotprod = false, i8mm = false, bf16 = false, sve = false, crc32 = false;
};

// A spin-wait's pause (x86 pause, ARM yield).
inline void CpuRelax() {
#if RADIXLM_X86
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

const CpuFeatures& DetectedCpu();
// The level kernels use: the detected one, capped by SetIsaCap or RADIXLM_ISA (a cap of the
// other family caps nothing).
Isa ActiveIsa();
void SetIsaCap(Isa cap);
const char* IsaName(Isa isa);
// True when `level` is scalar, or of active's family and not above it.
bool AtLeast(Isa active, Isa level);
// This build's levels, lowest (scalar) first: what tests cap to, one by one.
std::vector<Isa> IsaLevels();

}  // namespace radixlm::core
