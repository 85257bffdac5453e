// Measured compute ceilings, for reporting efficiency against the machine in the same run:
// register-only rates of the instructions the GEMM kernels use (f32 FMA, vdpbf16ps, vpdpbusd)
// and the DRAM read bandwidth.
#pragma once

#include "core/thread_pool.h"

namespace radixlm::kernels {

// GFLOP/s (2 per multiply-add) of dependency-free f32 FMA chains on the widest vectors the
// active ISA has (AVX-512: 16 zmm accumulators; AVX2: 12 ymm), all threads, the fastest of 9
// runs (interference only slows a run).
double MeasureFmaPeakGflops(core::ThreadPool& pool);
// The same for vdpbf16ps (bf16 pairs, f32 accumulate) and vpdpbusd (int8, i32 accumulate), in
// G-multiply-adds x 2 per second; 0 where the CPU (under the ISA cap) lacks the instruction.
double MeasureBf16DotPeakGflops(core::ThreadPool& pool);
double MeasureInt8DotPeakGops(core::ThreadPool& pool);

// GB/s of streaming reads of a buffer far larger than the caches (512 MiB), split across the
// pool's threads, median of 5: the ceiling for decode, which reads every weight once a token.
double MeasureReadBandwidthGBs(core::ThreadPool& pool);

}  // namespace radixlm::kernels
