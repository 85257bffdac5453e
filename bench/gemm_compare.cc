// Compares the GEMM back ends available here on the linear-layer shapes of Qwen3-0.6B at
// prefill (M = 512) and decode (M = 1): radixlm's own packed kernel, oneDNN matmul with
// weights pre-packed by reorder, and OpenBLAS sgemm (sgemv for M = 1). Prints a markdown
// table of median GFLOP/s; docs/gemm.md records a run. Usage: gemm_compare [threads] [reps]
//
// oneDNN and OpenBLAS run their own thread pools (OpenMP / pthreads); each is set to the
// same thread count as ours. bf16 weights: only our kernel takes bf16 weights with f32
// activations; oneDNN's bf16 matmul needs bf16 activations and AVX512-BF16 hardware.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <cblas.h>
#include <dnnl.hpp>

#include "core/cpu_features.h"
#include "core/random.h"
#include "kernels/gemm.h"
#include "kernels/peak.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using radixlm::core::DType;

double MedianGflops(const std::function<void()>& fn, double flops, int reps) {
  fn();  // warm-up (first-touch, oneDNN JIT)
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    g.push_back(flops / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
  }
  std::sort(g.begin(), g.end());
  return g[g.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  radixlm::core::ThreadPool pool(threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);

  struct Shape { int64_t m, k, n; const char* what; };
  const std::vector<Shape> shapes = {
      {512, 1024, 4096, "qkv (prefill)"},  {512, 2048, 1024, "o (prefill)"},
      {512, 1024, 6144, "gate+up (prefill)"}, {512, 3072, 1024, "down (prefill)"},
      {1, 1024, 4096, "qkv (decode)"}, {1, 1024, 6144, "gate+up (decode)"}, {1, 3072, 1024, "down (decode)"},
      {1, 1024, 151936, "lm_head (decode)"}};
  std::printf("threads %d, ISA %s, FMA peak %.0f GFLOP/s (median of %d runs each)\n\n", threads,
              radixlm::core::IsaName(radixlm::core::ActiveIsa()), radixlm::kernels::MeasureFmaPeakGflops(pool), reps);
  std::printf("| shape M x K x N | what | radixlm f32 | radixlm bf16 | oneDNN f32 | OpenBLAS f32 |\n|---|---|---:|---:|---:|---:|\n");
  radixlm::core::Rng rng(1);
  for (const Shape& s : shapes) {
    std::vector<float> w(s.n * s.k), x(s.m * s.k), y(s.m * s.n);
    for (float& v : w) v = rng.Normal(0, 0.02f);
    for (float& v : x) v = rng.Normal(0, 1);
    const double flops = 2.0 * s.m * s.n * s.k;
    const auto pf = radixlm::kernels::PackedWeight::Pack(w.data(), DType::kF32, s.n, s.k, DType::kF32);
    const auto pb = radixlm::kernels::PackedWeight::Pack(w.data(), DType::kF32, s.n, s.k, DType::kBF16);
    const double own_f32 = MedianGflops([&] { radixlm::kernels::Gemm(pool, x.data(), s.m, s.k, pf, y.data(), s.n); }, flops, reps);
    const double own_bf16 = MedianGflops([&] { radixlm::kernels::Gemm(pool, x.data(), s.m, s.k, pb, y.data(), s.n); }, flops, reps);

    // oneDNN: W [N, K] row-major is the K x N matrix in format "ba"; let the primitive pick
    // its packed layout (format_tag::any) and reorder once, as a loader would.
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src_md({s.m, s.k}, dt::f32, tag::ab), dst_md({s.m, s.n}, dt::f32, tag::ab);
    dnnl::memory::desc wei_any({s.k, s.n}, dt::f32, tag::any), wei_plain({s.k, s.n}, dt::f32, tag::ba);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    dnnl::memory wplain(wei_plain, eng, w.data()), wpacked(pd.weights_desc(), eng);
    dnnl::reorder(wplain, wpacked).execute(strm, wplain, wpacked);
    dnnl::memory src(src_md, eng, x.data()), dst(dst_md, eng, y.data());
    dnnl::matmul mm(pd);
    const double dnnl_f32 = MedianGflops([&] {
      mm.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wpacked}, {DNNL_ARG_DST, dst}});
      strm.wait();
    }, flops, reps);

    const double blas = MedianGflops([&] {
      if (s.m == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, s.n, s.k, 1.0f, w.data(), s.k, x.data(), 1, 0.0f, y.data(), 1);
      else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.n, s.k, 1.0f, x.data(), s.k, w.data(), s.k, 0.0f, y.data(), s.n);
    }, flops, reps);
    std::printf("| %lld x %lld x %lld | %s | %.1f | %.1f | %.1f | %.1f |\n", (long long)s.m, (long long)s.k,
                (long long)s.n, s.what, own_f32, own_bf16, dnnl_f32, blas);
    std::fflush(stdout);
  }
  std::printf("\nFor M = 1 the figures are weight bandwidth: GB/s = GFLOP/s x 2 (f32) or x 1 (bf16).\n");
  return 0;
}
