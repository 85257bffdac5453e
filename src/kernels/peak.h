// Measured compute ceilings, for reporting efficiency against the machine in the same run:
// the register-only FMA rate (no memory traffic) and the DRAM read bandwidth.
#pragma once

#include "core/thread_pool.h"

namespace radixlm::kernels {

// GFLOP/s of dependent-free FMA chains (AVX2: 12 ymm accumulators per thread), median of 5.
double MeasureFmaPeakGflops(core::ThreadPool& pool);

// GB/s of streaming reads of a buffer far larger than the caches (512 MiB), split across the
// pool's threads, median of 5: the ceiling for decode, which reads every weight once a token.
double MeasureReadBandwidthGBs(core::ThreadPool& pool);

}  // namespace radixlm::kernels
