// Matrix multiply for linear layers: y[M, N] = x[M, K] * W[N, K]^T, with W in PyTorch's
// Linear layout [out_features, in_features], f32 or bf16 storage, f32 activations and
// accumulation.
//
// Weights are packed once at load into panels of 16 output columns, [n_panels][K][16], so the
// micro-kernel streams one contiguous panel while broadcasting activation rows.
//
// Batch invariance (the property later sharing optimisations are checked against): every
// output element y[m, n] is one sequential FMA chain over k = 0..K-1, whatever M is, which
// micro-kernel shape handles row m, and how panels are split across threads. So a row's
// result is bitwise identical alone or inside any batch. (Measured alternatives, oneDNN and
// OpenBLAS, do not promise this; see docs/gemm.md and bench/gemm_compare.)
//
// Complexity: 2*M*N*K flops; weights are read once per 256-row block of activations.
// Thread-safety: Gemm may be called from one thread at a time per ThreadPool.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace radixlm::kernels {

inline constexpr int kPanelCols = 16;

class PackedWeight {
 public:
  PackedWeight() = default;
  // Packs W [n_out, n_in] given in `src_dtype` (f32, f16 or bf16) into `storage` (f32 or bf16).
  static PackedWeight Pack(const void* w, core::DType src_dtype, int64_t n_out, int64_t n_in,
                           core::DType storage);
  // Packs several matrices with the same n_in stacked along n_out (fused QKV, gate+up).
  static PackedWeight PackStacked(const void* const* parts, const int64_t* part_rows, int n_parts,
                                  core::DType src_dtype, int64_t n_in, core::DType storage);

  int64_t n_out() const { return n_out_; }
  int64_t n_in() const { return n_in_; }
  int64_t n_panels() const { return (n_out_ + kPanelCols - 1) / kPanelCols; }
  core::DType storage() const { return storage_; }
  size_t nbytes() const { return buf_.size(); }
  const void* panel(int64_t p) const {
    return buf_.data() + static_cast<size_t>(p) * n_in_ * kPanelCols * core::DTypeSize(storage_);
  }
  // W[n, k] as f32 (for references and tests).
  float At(int64_t n, int64_t k) const;
  // out[k] = W[n, k] for all k: lets a tied embedding table be read from the packed lm_head
  // instead of being kept twice.
  void ReadRow(int64_t n, float* out) const;

 private:
  void PackRows(const void* w, core::DType src_dtype, int64_t row0, int64_t rows);

  int64_t n_out_ = 0, n_in_ = 0;
  core::DType storage_ = core::DType::kF32;
  core::AlignedBuffer buf_;
};

// y[m, n] = sum_k x[m * ldx + k] * W[n, k]; y row stride ldy. Overwrites y.
void Gemm(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const PackedWeight& w,
          float* y, int64_t ldy);

// Plain triple loop in double precision over the packed weights: the oracle for tests.
void GemmReference(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, float* y,
                   int64_t ldy);

}  // namespace radixlm::kernels
