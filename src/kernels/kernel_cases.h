// One table of kernel cases (shapes, weight types, tolerances) shared by the GoogleTest
// comparisons against the oracles and by the Google Benchmark programs (ggml's
// test-backend-ops idea): what is benchmarked is what is tested.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant.h"
#include "core/random.h"
#include "kernels/gemm.h"

namespace radixlm::kernels {

struct GemmCase {
  int64_t m, n, k;
  core::DType weights;  // f32, bf16 or a quantised type
  Bf16Mode bf16_mode;
  // Max |fast - oracle| / max |oracle| against GemmReference (unrounded activations).
  float rel_tolerance;
  std::string Name() const {
    return std::string(core::DTypeName(weights)) + (bf16_mode == Bf16Mode::kBf16Activations ? "xbf16" : "") + "/M" +
           std::to_string(m) + "_N" + std::to_string(n) + "_K" + std::to_string(k);
  }
};

inline std::vector<core::DType> QuantisedTypes() {
  using core::DType;
  return {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
          DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kMXFP4};
}

// Model shapes of Qwen3-0.6B (qkv, o, gate_up, down) at decode (M = 1), a batch of 32 decode
// rows (M = 32) and prefill (M = 512), plus ragged shapes that hit every micro-kernel and the
// ragged panel.
inline std::vector<GemmCase> GemmCases(bool include_large) {
  using core::DType;
  std::vector<GemmCase> cases;
  struct Kind { DType dt; Bf16Mode mode; float tol; };
  std::vector<Kind> kinds = {{DType::kF32, Bf16Mode::kExact, 1e-5f},  // f32 accumulation, K <= 3072
                             {DType::kBF16, Bf16Mode::kExact, 1e-5f},
                             {DType::kBF16, Bf16Mode::kBf16Activations, 1e-2f}};  // activations rounded to bf16
  // int8 activations per 32 (scale amax / 127): a few per mille of the largest output.
  for (DType q : QuantisedTypes()) kinds.push_back({q, Bf16Mode::kExact, 3e-2f});
  for (const Kind& kind : kinds) {
    const int64_t block = core::BlockElems(kind.dt) > 1 ? core::BlockElems(kind.dt) : 1;
    for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 13})
      for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 32}, {37, 96}, {100, 256}, {64, 512}, {48, 19}}) {
        if (k % block != 0 || (k % 32 != 0 && block > 1)) continue;
        cases.push_back({m, n, k, kind.dt, kind.mode, kind.tol});
      }
    if (include_large) {
      for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {512, 4096, 1024}, {512, 1024, 2048}, {512, 6144, 1024}, {512, 1024, 3072}, {32, 6144, 1024}, {32, 1024, 3072},
               {1, 6144, 1024}, {1, 1024, 3072}})
        cases.push_back({m, n, k, kind.dt, kind.mode, kind.tol});
    }
  }
  return cases;
}

// Random weights of a case: N(0, 1) values packed as the case's type; quantised types get
// random blocks (every byte pattern is a valid block) with finite f16 scales of plausible size
// (MXFP4: E8M0 scales of plausible size).
inline std::vector<uint8_t> RandomWeightBytes(core::DType dt, int64_t n, int64_t k, uint64_t seed) {
  core::Rng rng(seed);
  if (!core::IsQuantized(dt)) {
    std::vector<uint8_t> bytes(n * k * 4);
    float* w = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < n * k; ++i) w[i] = rng.Normal(0, 1);
    return bytes;
  }
  const size_t block_bytes = core::BlockBytes(dt);
  const int64_t blocks = n * k / core::BlockElems(dt);
  std::vector<uint8_t> bytes(block_bytes * blocks);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.Below(256));
  if (dt == core::DType::kMXFP4) {  // an E8M0 scale byte: 2^(e - 128) around 0.01, in range
    for (int64_t b = 0; b < blocks; ++b) bytes[b * block_bytes] = static_cast<uint8_t>(116 + rng.Below(8));
    return bytes;
  }
  // The f16 fields of each format (byte offsets within a block).
  std::vector<int> fields;
  switch (dt) {
    case core::DType::kQ4_1: case core::DType::kQ5_1: case core::DType::kQ4_K: case core::DType::kQ5_K: fields = {0, 2}; break;
    case core::DType::kQ2_K: fields = {80, 82}; break;
    case core::DType::kQ3_K: fields = {108}; break;
    case core::DType::kQ6_K: fields = {208}; break;
    default: fields = {0}; break;
  }
  for (int64_t b = 0; b < blocks; ++b)
    for (int off : fields) {
      const uint16_t h = core::F32ToF16(rng.Normal(0, 0.01f));
      std::memcpy(bytes.data() + b * block_bytes + off, &h, 2);
    }
  return bytes;
}

inline PackedWeight PackCase(const GemmCase& c, uint64_t seed) {
  const auto bytes = RandomWeightBytes(c.weights, c.n, c.k, seed);
  const core::DType src = core::IsQuantized(c.weights) ? c.weights : core::DType::kF32;
  return PackedWeight::Pack(bytes.data(), src, c.n, c.k, c.weights, c.bf16_mode);
}

}  // namespace radixlm::kernels
