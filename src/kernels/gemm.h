// Matrix multiply for linear layers: y[M, N] = x[M, K] * W[N, K]^T, with W in PyTorch's
// Linear layout [out_features, in_features] and f32 activations in and out.
//
// Weights are packed once at load into panels of 16 output rows, so a micro-kernel streams
// one contiguous panel while broadcasting activation elements (one zmm = one panel's 16
// outputs). Storage and arithmetic by weight type:
//   f32    [n_panels][K][16] f32; f32 FMA.
//   bf16   [n_panels][K/2][16][2] bf16 (pairs of k interleaved), with either
//          - f32 activations ("exact"): each weight widened to f32, f32 FMA in k order, so a
//            bf16 matrix computes bit for bit what its f32 widening computes, or
//          - bf16 activations: x rounded to bf16 (RNE), vdpbf16ps (AVX512_BF16), f32
//            accumulate; llama.cpp's arithmetic, ~2x the FMA rate.
//   GGML block-quantised types (Q4_0 .. Q6_K, core/quant.h), kept quantised: each block of
//          the panel's 16 rows is repacked so one 64-byte vector holds 4 consecutive codes of
//          each row (vpdpbusd's operand), 4-bit codes two groups to a byte, the 5th/6th bits
//          as bit planes, and the scales as 16-lane vectors (f16 and small integers, as the
//          format has them: memory per weight stays the file's). Activations are quantised per
//          row to int8 in blocks of 32 with an f32 scale (what the formats expect); integer
//          dot products per sub-block (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw), then
//          acc += isum * (w_scale * x_scale) [+ min term] in f32.
//
// Batch invariance (the property every sharing optimisation is checked against): every output
// element y[m, n] is one fixed sequence of f32 operations over k (blocks) in order, whatever
// M is, which micro-kernel shape handles row m, how work is split across threads, and which
// rows share the call; integer sub-block sums are exact, so their order does not matter. A
// row's result is therefore bitwise identical alone or inside any batch, and the AVX-512,
// AVX2 and scalar paths of one weight type agree bit for bit (the bf16-activation path exists
// on AVX512_BF16 only; its scalar emulation is the test oracle).
//
// A packed weight is a list of segments (consecutive output rows of one storage type): fused
// projections whose parts have different types (a Q4_K_M file's q, k in Q4_K and v in Q6_K)
// stay fused, each part computed in its own type.
//
// Complexity: 2*M*N*K flops; each panel group is read once per block of activation rows.
// Thread-safety: Gemm may be called from one thread at a time per ThreadPool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace radixlm::kernels {

inline constexpr int kPanelCols = 16;

// How activations meet bf16 weights.
enum class Bf16Mode : uint8_t { kExact, kBf16Activations };

// Whether this CPU (under the ISA cap) has vdpbf16ps, the bf16-activation path.
bool HasBf16Dot();
// Whether the int8 dot products run on AVX-512 VNNI (else AVX2, else scalar).
bool HasVnni();

struct WeightSegment {
  int64_t row_begin = 0, n_rows = 0;  // output rows [row_begin, row_begin + n_rows)
  core::DType storage = core::DType::kF32;
  Bf16Mode bf16_mode = Bf16Mode::kExact;
  int64_t panel_bytes = 0;            // bytes per panel (all K)
  core::AlignedBuffer buf;            // [n_panels] panels
  int64_t n_panels() const { return (n_rows + kPanelCols - 1) / kPanelCols; }
  const uint8_t* panel(int64_t p) const { return buf.data() + p * panel_bytes; }
};

class PackedWeight {
 public:
  PackedWeight() = default;

  struct Part {
    const void* data = nullptr;  // [rows, n_in] in `dtype` (any DType, quantised included)
    core::DType dtype = core::DType::kF32;
    int64_t rows = 0;
  };
  struct Options {
    // Quantised parts keep their type when keep_quantised; every other part is stored as
    // `storage` (f32 or bf16), converted or dequantised from its source.
    bool keep_quantised = false;
    core::DType storage = core::DType::kF32;
    Bf16Mode bf16_mode = Bf16Mode::kExact;
  };
  // Packs parts with the same n_in stacked along n_out (fused QKV, gate+up). Parallel over
  // panels when `pool` is given.
  // REQUIRES: a quantised part kept quantised has n_in % its block size == 0; bf16_mode
  // kBf16Activations only with storage bf16.
  static PackedWeight PackParts(const std::vector<Part>& parts, int64_t n_in, const Options& options,
                                core::ThreadPool* pool = nullptr);
  // One plain matrix (tests and benchmarks).
  static PackedWeight Pack(const void* w, core::DType src_dtype, int64_t n_out, int64_t n_in, core::DType storage,
                           Bf16Mode bf16_mode = Bf16Mode::kExact);

  int64_t n_out() const { return n_out_; }
  int64_t n_in() const { return n_in_; }
  const std::vector<WeightSegment>& segments() const { return segments_; }
  // The storage type of the largest segment (what `info` and `bench` report).
  core::DType storage() const;
  Bf16Mode bf16_mode() const { return segments_.empty() ? Bf16Mode::kExact : segments_[0].bf16_mode; }
  size_t nbytes() const;
  // W[n, k] as f32, dequantised (references and tests).
  float At(int64_t n, int64_t k) const;
  // out[k] = W[n, k] for all k: lets a tied embedding table be read from the packed lm_head
  // instead of being kept twice.
  void ReadRow(int64_t n, float* out) const;

 private:
  const WeightSegment& SegmentOf(int64_t n) const;
  int64_t n_out_ = 0, n_in_ = 0;
  std::vector<WeightSegment> segments_;
};

// y[m, n] = sum_k x[m * ldx + k] * W[n, k]; y row stride ldy. Overwrites y.
void Gemm(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const PackedWeight& w,
          float* y, int64_t ldy);

// Mixture-of-experts multiply: for each group g, rows [row_begin, row_begin + n_rows) of x times
// output rows [out_begin, out_begin + out_rows) of *w (one expert's slice of all the experts
// stacked in one weight) into columns [0, out_rows) of the same rows of y. Rows grouped by
// expert, so each expert's weights are read once per call and multiplied as a GEMM; a decode
// step reads only the experts it chose. Work is split over threads by cost (rows x panels).
// Every output element is the same fixed sequence of operations Gemm computes for that row
// alone with that slice, so a row's result does not depend on which other rows share its expert
// (batch invariance).
// REQUIRES: every group's weight has the same n_in and segment types; a slice starts on a
// panel (16 rows) of its segment and ends on one or at the segment's end; groups' row ranges
// lie in [0, M).
struct GemmGroup {
  const PackedWeight* w = nullptr;
  int64_t out_begin = 0, out_rows = 0;
  int64_t row_begin = 0, n_rows = 0;
};
void GemmGrouped(core::ThreadPool& pool, const float* x, int64_t M, int64_t ldx, std::span<const GemmGroup> groups,
                 float* y, int64_t ldy);

// Plain triple loop in double precision over W's f32 values (dequantised for quantised
// storage) and x unrounded: the accuracy oracle for tests (quantised and bf16-activation
// paths differ from it by their activation rounding).
void GemmReference(const float* x, int64_t M, int64_t ldx, const PackedWeight& w, float* y,
                   int64_t ldy);

}  // namespace radixlm::kernels
