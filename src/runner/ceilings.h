// The ceilings `radixlm bench` reports a model's rates against, measured in the same run: the
// register-only rates of the instructions the GEMMs use (kernels/peak.h), radixlm's own GEMM on
// the model's prefill shapes (models/roofline.h's CeilingShapesOf), and the read bandwidth for
// a decode token's bytes (DecodeBytesOf). Each is the best of its runs: interference on a
// shared machine only slows a run, and a ceiling read low would put a rate above it.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "models/transformer.h"

namespace radixlm::runner {

struct Ceilings {
  double fma_gflops = 0;       // f32 FMA
  double bf16_dot_gflops = 0;  // vdpbf16ps (0: absent)
  double int8_dot_gops = 0;    // the quantised GEMM's int8 dot product
  double isa_gflops = 0;       // of those, the one the model's largest weights run on
  double gemm_gflops = 0;      // radixlm's GEMM on the model's shapes
  double read_gb_per_s = 0;    // reading a decode token's bytes
};

Ceilings MeasureCeilings(const models::Transformer& model, core::ThreadPool& pool, int64_t prompt_tokens);

}  // namespace radixlm::runner
