// Measured compute ceilings, for reporting efficiency against the machine in the same run:
// register-only rates of the instructions the GEMM kernels use (f32 FMA, vdpbf16ps, vpdpbusd;
// on ARM fmla, sdot, smmla) and the DRAM read bandwidth. 0 where the active level has no probe.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace radixlm::kernels {

// GFLOP/s (2 per multiply-add) of dependency-free f32 FMA chains on the widest vectors the
// active ISA has (AVX-512: 16 zmm accumulators; AVX2: 12 ymm; NEON: 16 q registers), all
// threads, the fastest of 9 runs (interference only slows a run).
double MeasureFmaPeakGflops(core::ThreadPool& pool);
// The same for vdpbf16ps (bf16 pairs, f32 accumulate; 0 where the CPU under the ISA cap lacks
// it) and for the int8 dot product the quantised GEMM runs (vpdpbusd with AVX-512 VNNI, else
// AVX2's vpmaddubsw summed in int16 as gemm_avx2.cc does; smmla at kI8mm, sdot at kDotprod), in
// G-multiply-adds x 2 per second.
double MeasureBf16DotPeakGflops(core::ThreadPool& pool);
double MeasureInt8DotPeakGops(core::ThreadPool& pool);

// GB/s of streaming reads of a buffer of `bytes` (clamped to 1 MiB .. 512 MiB), split across the
// pool's threads, the fastest of 9: the ceiling for decode, which reads that many bytes of
// weights once a token (a model whose weights fit the caches reads them at the caches' rate,
// and so does this probe).
double MeasureReadBandwidthGBs(core::ThreadPool& pool, int64_t bytes = int64_t{512} << 20);

}  // namespace radixlm::kernels
