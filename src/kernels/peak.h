// Measured compute ceilings, for reporting efficiency against the machine in the same run:
// the register-only FMA rate (no memory traffic) on every thread of a pool.
#pragma once

#include "core/thread_pool.h"

namespace radixlm::kernels {

// GFLOP/s of dependent-free FMA chains (AVX2: 12 ymm accumulators per thread), median of 5.
double MeasureFmaPeakGflops(core::ThreadPool& pool);

}  // namespace radixlm::kernels
