// Google Benchmark over the same kernel case table the tests check (src/kernels/kernel_cases.h),
// plus paged attention at prefill and decode shapes. Counters: GFLOP/s (flops per second).
// Usage: build/bench/kernels_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>

#include "core/random.h"
#include "kernels/attention.h"
#include "kernels/delta_net.h"
#include "kernels/gemm.h"
#include "kernels/kernel_cases.h"
#include "kernels/ssm.h"

namespace radixlm::kernels {
namespace {

core::ThreadPool& Pool() {
  static core::ThreadPool pool(2);
  return pool;
}

void BM_Gemm(benchmark::State& state, GemmCase c) {
  core::Rng rng(1);
  std::vector<float> x(c.m * c.k), y(c.m * c.n);
  for (float& v : x) v = rng.Normal(0, 1);
  const PackedWeight pw = PackCase(c, 1);
  for (auto _ : state) {
    Gemm(Pool(), x.data(), c.m, c.k, pw, y.data(), c.n);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * c.m * c.n * c.k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(pw.nbytes()), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Causal prefill of `rows` tokens (or one decode row at position `rows - 1`), Qwen3-0.6B heads.
void BM_Attention(benchmark::State& state, int rows, bool decode) {
  const int heads = 16, kv_heads = 8, hd = 128, bt = 16;
  const int blocks = (rows + bt - 1) / bt;
  std::vector<float> k(size_t(blocks) * bt * kv_heads * hd, 0.1f), v(k.size(), 0.1f);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  const int n = decode ? 1 : rows;
  std::vector<int32_t> pos(n);
  std::iota(pos.begin(), pos.end(), decode ? rows - 1 : 0);
  std::vector<float> q(size_t(n) * heads * hd, 0.01f), out(q.size());
  const AttentionParams p{heads, kv_heads, hd, 0.088f};
  const KvLayerView kv{k.data(), v.data(), bt, kv_heads, hd};
  const std::vector<AttentionSeq> seqs{{0, n, table}};
  for (auto _ : state) {
    PagedAttention(Pool(), p, kv, seqs, pos.data(), q.data(), out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  double pairs = 0;
  for (int32_t x : pos) pairs += x + 1;
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * hd * heads * pairs, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// One decode step's attention over every layer of a Qwen3-0.6B-shaped model (28 layers, 8 kv
// heads x 128, bf16 KV) at context `ctx`: the KV bytes of all layers exceed the caches, as in
// a real decode step. Counter: KV GB/s (K and V bytes read per second).
void BM_AttentionDecodeStep(benchmark::State& state, int ctx, core::DType dtype) {
  const int layers = 28, heads = 16, kv_heads = 8, hd = 128, bt = 16;
  const int blocks = (ctx + bt - 1) / bt;
  const size_t elems = size_t(blocks) * bt * kv_heads * hd, bytes = elems * core::DTypeSize(dtype);
  std::vector<std::vector<uint8_t>> k(layers, std::vector<uint8_t>(bytes, 0x3c)), v = k;
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  const int32_t pos = ctx - 1;
  std::vector<float> q(size_t(heads) * hd, 0.01f), out(q.size());
  const AttentionParams p{heads, kv_heads, hd, 0.088f};
  const std::vector<AttentionSeq> seqs{{0, 1, table}};
  for (auto _ : state)
    for (int l = 0; l < layers; ++l) {
      const KvLayerView kv{k[l].data(), v[l].data(), bt, kv_heads, hd, dtype};
      PagedAttention(Pool(), p, kv, seqs, &pos, q.data(), out.data(), nullptr);
      benchmark::DoNotOptimize(out.data());
    }
  state.counters["KV_GB/s"] = benchmark::Counter(2.0 * layers * bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The matrix products of one decode step of Qwen3-0.6B (28 x qkv, o, gate_up, down at M rows,
// then the tied lm_head), all resident at once as in the model, in `layer_type` with the
// lm_head in `head_type` (a Q4_K_M file's layers are Q4_K, its lm_head Q6_K). Counters: weight
// GB/s, the decode ceiling's measure at M = 1; GFLOP/s at M = 32 (a batch of 32 decode rows:
// the GEMM part of `radixlm bench --decode-batch 32` on random:qwen3-0.6b's f32 weights).
void BM_DecodeStepGemm(benchmark::State& state, core::DType layer_type, core::DType head_type, int64_t m) {
  struct Shape { int64_t n, k; };
  const std::vector<Shape> shapes = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
  std::vector<PackedWeight> weights;
  for (int l = 0; l < 28; ++l)
    for (const Shape& s : shapes) weights.push_back(PackCase({1, s.n, s.k, layer_type, Bf16Mode::kExact, 0}, 100 + l));
  weights.push_back(PackCase({1, 151936, 1024, head_type, Bf16Mode::kExact, 0}, 7));
  size_t bytes = 0;
  for (const PackedWeight& w : weights) bytes += w.nbytes();
  std::vector<float> x(m * 3072, 0.5f), y(m * 151936);
  double flops = 0;
  for (const PackedWeight& w : weights) flops += 2.0 * m * w.n_in() * w.n_out();
  for (auto _ : state)
    for (const PackedWeight& w : weights) {
      Gemm(Pool(), x.data(), m, w.n_in(), w, y.data(), w.n_out());
      benchmark::DoNotOptimize(y.data());
    }
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
}

// One Mamba2 layer's scan over `tokens` tokens, all heads on one thread, at hybrid-0.4b's
// shape (32 heads x 64, d_state 128, 1 group): chunk 0 is the exact recurrence, else the
// chunked (SSD) form; decode is tokens = 1 (the state read and written once per token).
void BM_Mamba2Scan(benchmark::State& state, int64_t tokens, int chunk) {
  const Mamba2Dims d{32, 64, 128, 1, 4};
  core::Rng rng(3);
  std::vector<float> xbc(tokens * d.conv_dim()), dt(tokens * d.n_heads), bias(d.n_heads), A(d.n_heads), D(d.n_heads);
  for (float& v : xbc) v = rng.Normal(0, 0.5f);
  for (float& v : dt) v = rng.Normal(-1, 0.5f);
  for (int h = 0; h < d.n_heads; ++h) A[h] = -std::exp(rng.Normal(0, 0.5f)), D[h] = rng.Normal(0, 0.5f), bias[h] = 0.1f;
  std::vector<float> S(d.ssm_state_floats(), 0.0f), y(tokens * d.d_inner());
  ScanInputs in{xbc.data(), xbc.data() + d.d_inner(), xbc.data() + d.d_inner() + d.d_state, d.conv_dim(), dt.data(), d.n_heads,
                bias.data(), A.data(), D.data()};
  for (auto _ : state) {
    Mamba2Scan(d, tokens, 0, chunk, in, S.data(), y.data(), d.d_inner(), {}, 0, d.n_heads);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

// One Gated DeltaNet layer's rule over `tokens` tokens, all heads on one thread, at
// Qwen3.5-0.8B's shape (16 key and 16 value heads x 128): chunk 0 is the exact recurrence,
// else the chunked WY form; decode is tokens = 1.
void BM_GatedDeltaRule(benchmark::State& state, int64_t tokens, int chunk) {
  const DeltaNetDims d{16, 16, 128, 4, true};
  core::Rng rng(4);
  std::vector<float> qkv(tokens * d.conv_dim()), ba(tokens * 2 * d.v_heads), bias(d.v_heads), A(d.v_heads);
  for (float& v : qkv) v = rng.Normal(0, 0.5f);
  for (float& v : ba) v = rng.Normal(0, 1.0f);
  for (int h = 0; h < d.v_heads; ++h) A[h] = -std::exp(rng.Normal(0, 0.5f)), bias[h] = 0.1f;
  std::vector<float> S(d.ssm_state_floats(), 0.0f), y(tokens * d.value_dim());
  const DeltaNetInputs in{qkv.data(), d.conv_dim(), ba.data(), ba.data() + d.v_heads, 2 * d.v_heads, bias.data(), A.data()};
  for (auto _ : state) {
    if (chunk) GatedDeltaRuleChunked(d, tokens, in, S.data(), y.data(), d.value_dim(), chunk, 0, d.v_heads);
    else GatedDeltaRule(d, tokens, in, S.data(), y.data(), d.value_dim(), {}, 0, d.v_heads);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

const int kRegistered = [] {
  for (int64_t tokens : {1, 512})
    for (int chunk : {0, 64})
      benchmark::RegisterBenchmark(("GatedDeltaRule/" + std::string(chunk ? "chunked64" : "exact") + "/tokens" + std::to_string(tokens)).c_str(),
                                   BM_GatedDeltaRule, tokens, chunk)
          ->Unit(benchmark::kMicrosecond);
  for (int64_t tokens : {1, 512})
    for (int chunk : {0, 64})
      benchmark::RegisterBenchmark(("Mamba2Scan/" + std::string(chunk ? "chunked64" : "exact") + "/tokens" + std::to_string(tokens)).c_str(),
                                   BM_Mamba2Scan, tokens, chunk)
          ->Unit(benchmark::kMicrosecond);
  for (auto [layer, head] : std::vector<std::pair<core::DType, core::DType>>{
           {core::DType::kBF16, core::DType::kBF16}, {core::DType::kQ8_0, core::DType::kQ8_0},
           {core::DType::kQ4_0, core::DType::kQ6_K}, {core::DType::kQ4_K, core::DType::kQ6_K}})
    benchmark::RegisterBenchmark(("DecodeStepGemm/" + std::string(core::DTypeName(layer)) + "+" + std::string(core::DTypeName(head))).c_str(),
                                 BM_DecodeStepGemm, layer, head, int64_t{1})
        ->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("DecodeStepGemm/f32+f32/M32", BM_DecodeStepGemm, core::DType::kF32, core::DType::kF32,
                               int64_t{32})
      ->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int ctx : {512, 4096})
    for (core::DType dt : {core::DType::kF32, core::DType::kBF16})
      benchmark::RegisterBenchmark(("AttentionDecodeStep/" + std::string(core::DTypeName(dt)) + "/ctx" + std::to_string(ctx)).c_str(),
                                   BM_AttentionDecodeStep, ctx, dt)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
  for (const GemmCase& c : GemmCases(/*include_large=*/true)) {
    if (c.m * c.n * c.k < (1 << 20)) continue;  // the tiny correctness shapes are not worth timing
    const std::string name = "Gemm/" + c.Name();
    benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, c)->Unit(benchmark::kMillisecond)->UseRealTime();
    // Decode (one row or a batch of 32) through a matrix far larger than the caches
    // (Qwen3-0.6B's tied lm_head): weights streamed from DRAM, the decode ceiling.
    if ((c.m == 1 || c.m == 32) && c.n == 6144) {
      GemmCase lm = c;
      lm.n = 151936;
      benchmark::RegisterBenchmark(("Gemm/" + lm.Name()).c_str(), BM_Gemm, lm)->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
  for (int rows : {512, 4096}) {
    benchmark::RegisterBenchmark(("Attention/prefill/" + std::to_string(rows)).c_str(), BM_Attention, rows, false)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("Attention/decode/ctx" + std::to_string(rows)).c_str(), BM_Attention, rows, true)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  return 0;
}();

}  // namespace
}  // namespace radixlm::kernels

BENCHMARK_MAIN();
