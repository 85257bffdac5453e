// CPU feature detection, done once; the single place where kernels ask which fast path to
// take. RADIXLM_ISA=scalar|avx2|avx512 caps the level (for tests and comparisons).
#pragma once

namespace radixlm::core {

// kAvx512 means AVX-512 F + BW + VL + DQ; VNNI and BF16 are separate features.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2_fma = false;  // with F16C (every AVX2 CPU has it)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512_vnni = false;  // vpdpbusd: int8 dot products
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
};

const CpuFeatures& DetectedCpu();
// The level kernels use: the detected one, capped by SetIsaCap or RADIXLM_ISA.
Isa ActiveIsa();
void SetIsaCap(Isa cap);
const char* IsaName(Isa isa);

}  // namespace radixlm::core
