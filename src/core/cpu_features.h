// CPU feature detection, done once; the single place where kernels ask which fast path to
// take. RADIXLM_ISA=scalar|avx2|avx512 caps the level (for tests and comparisons).
//
// x86-64: cpuid (through gcc's __builtin_cpu_supports). aarch64: the kernel's HWCAP bits
// (getauxval(AT_HWCAP / AT_HWCAP2)); the ARM features are read, and every ARM build runs the
// scalar paths so far (Isa has no ARM level yet). RADIXLM_X86 says which family the build
// targets: x86 intrinsics are compiled only where it is 1.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define RADIXLM_X86 1
#else
#define RADIXLM_X86 0
#endif

namespace radixlm::core {

// kAvx512 means AVX-512 F + BW + VL + DQ; VNNI and BF16 are separate features.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

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
// The level kernels use: the detected one, capped by SetIsaCap or RADIXLM_ISA.
Isa ActiveIsa();
void SetIsaCap(Isa cap);
const char* IsaName(Isa isa);

}  // namespace radixlm::core
