// Gemma 4's mixture-of-experts block (MoeConfig::dense_branch), as llama.cpp's gemma4 graph
// computes it (src/models/gemma4.cpp, the is_moe_layer branch): the dense MLP and the experts
// side by side, each on its own norm of x, each output normed, their sum normed into the
// residual. Every row on its own.
#include <cmath>

#include "models/for_rows.h"
#include "models/transformer.h"

namespace radixlm::models {

void Transformer::DenseBranchMoeSublayer(core::ThreadPool& pool, const MoeLayerWeights& w, int64_t n) {
  const int64_t d = config_.d_model, K = config_.moe.used;
  // mlp = post_norm_1(MLP(ffn_norm(x))), into moe_shared_.
  NormRows(pool, x_.data(), w.norm.data(), xn_.data(), n, d);
  SharedExpert(pool, w, n);
  NormRows(pool, moe_shared_.data(), w.dense_post_norm.data(), moe_shared_.data(), n, d);
  // The router reads rms_norm(x) / sqrt(d) * router_scale (router_norm: ones, a weightless norm).
  NormRows(pool, x_.data(), w.router_norm.data(), xn_.data(), n, d);
  const float inv = 1.0f / std::sqrt(static_cast<float>(d));
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * d; i < r1 * d; ++i) xn_[i] = xn_[i] * inv * w.router_scale[i % d];
  });
  Route(pool, w, n);
  // The experts on pre_norm_2(x).
  NormRows(pool, x_.data(), w.expert_norm.data(), xn_.data(), n, d);
  RunExperts(pool, w, n);
  // xn_ = mlp + post_norm_2(sum_j weight_j (y_j down_scale_e)); x += post_ffw_norm(xn_).
  ForRows(pool, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* out = xn_.data() + r * d;
      for (int64_t j = 0; j < K; ++j) {
        const float wt = moe_w_[r * K + j];
        const float s = w.down_scale.empty() ? 1.0f : w.down_scale[moe_ids_[r * K + j]];
        const float* y = moe_y_.data() + int64_t{moe_pos_[r * K + j]} * d;
        for (int64_t k = 0; k < d; ++k) out[k] = j == 0 ? wt * (y[k] * s) : out[k] + wt * (y[k] * s);
      }
      kernels::RmsNorm(out, w.expert_post_norm.data(), out, 1, d, config_.rms_eps);
      const float* mlp = moe_shared_.data() + r * d;
      for (int64_t k = 0; k < d; ++k) out[k] = mlp[k] + out[k];
    }
  });
  AddResidual(pool, n, w.post_norm);
}

}  // namespace radixlm::models
