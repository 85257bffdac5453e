#include "runner/ceilings.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/random.h"
#include "kernels/gemm.h"
#include "kernels/peak.h"
#include "models/roofline.h"

namespace radixlm::runner {
namespace {

// GFLOP/s of radixlm's GEMM on the in and out projections CeilingShapesOf picks, best of 5.
double GemmCeiling(const models::Transformer& model, core::ThreadPool& pool, int64_t prompt_tokens) {
  const auto& c = model.config();
  const models::CeilingShapes s = models::CeilingShapesOf(model.weights(), c, prompt_tokens);
  if (!s.in || !s.out) return 0;
  const int64_t M = s.rows, inner = s.out->n_in();
  std::vector<float> x(M * std::max<int64_t>(c.d_model, inner)), y(M * std::max(s.in->n_out(), s.out->n_out()));
  core::Rng rng(1);
  for (float& v : x) v = rng.Normal(0, 1);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::Gemm(pool, x.data(), M, c.d_model, *s.in, y.data(), s.in->n_out());
    kernels::Gemm(pool, x.data(), M, inner, *s.out, y.data(), s.out->n_out());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * M * (double(c.d_model) * s.in->n_out() + double(inner) * s.out->n_out()) / seconds / 1e9);
  }
  return best;
}

}  // namespace

Ceilings MeasureCeilings(const models::Transformer& model, core::ThreadPool& pool, int64_t prompt_tokens) {
  Ceilings c;
  c.fma_gflops = kernels::MeasureFmaPeakGflops(pool);
  c.bf16_dot_gflops = kernels::MeasureBf16DotPeakGflops(pool);
  c.int8_dot_gops = kernels::MeasureInt8DotPeakGops(pool);
  c.read_gb_per_s = kernels::MeasureReadBandwidthGBs(pool, models::DecodeBytesOf(model.weights(), model.config()).read());
  // The instruction the model's largest weights run on: the int8 dot product for quantised
  // weights, vdpbf16ps for bf16 weights with bf16 activations, else f32 FMA.
  const core::DType main_type = model.weight_dtype();
  const bool bf16_dot = main_type == core::DType::kBF16 && model.weights().lm_head.bf16_mode() == kernels::Bf16Mode::kBf16Activations;
  c.isa_gflops = core::IsQuantized(main_type) && c.int8_dot_gops > 0 ? c.int8_dot_gops
                 : bf16_dot && c.bf16_dot_gflops > 0                  ? c.bf16_dot_gflops
                                                                      : c.fma_gflops;
  c.gemm_gflops = GemmCeiling(model, pool, prompt_tokens);
  return c;
}

}  // namespace radixlm::runner
