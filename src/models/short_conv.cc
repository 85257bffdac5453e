// LFM2's gated short convolution, as llama.cpp's lfm2 graph (src/models/lfm2.cpp,
// build_shortconv_block) and Hugging Face's Lfm2ShortConv compute it:
//   B | C | x = in_proj(norm(x));  bx = B * x;  y = C * conv(bx);  x += out_proj(y),
// conv a causal depthwise convolution of short_conv taps (no bias, no activation) whose state is
// each sequence's last short_conv - 1 rows of bx (SsmStateStore, like a Mamba2 conv window, so
// checkpoints, prompt ends and speculation rollback work unchanged).
#include "models/for_rows.h"
#include "models/transformer.h"

namespace radixlm::models {

void Transformer::ShortConvSublayer(core::ThreadPool& pool, const ShortConvLayerWeights& w, const ForwardBatch& b,
                                    SsmStateStore& states, int64_t n) {
  const int64_t d = config_.d_model;
  Grow(zxbcdt_, n * 3 * d);
  Grow(xbc_, 2 * n * d);
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  Gemm(pool, xn_.data(), n, d, w.in_proj, zxbcdt_.data(), 3 * d);  // [n, B | C | x]
  float* bx = xbc_.data();
  float* conv = xbc_.data() + n * d;
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = zxbcdt_.data() + r * 3 * d;
      for (int64_t c = 0; c < d; ++c) bx[r * d + c] = row[c] * row[2 * d + c];
    }
  });
  ConvAllSequences(pool, config_.short_conv_dims(), b, n, states, w.state_index, bx, d, w.conv_w.data(), nullptr, conv,
                   /*silu=*/false);
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* c_gate = zxbcdt_.data() + r * 3 * d + d;
      for (int64_t c = 0; c < d; ++c) conv[r * d + c] *= c_gate[c];
    }
  });
  Gemm(pool, conv, n, d, w.out_proj, xn_.data(), d);
  AddResidual(pool, n);
}

}  // namespace radixlm::models
