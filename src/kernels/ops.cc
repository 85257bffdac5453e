#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/status.h"
#if RADIXLM_X86
#include "kernels/vec_avx2.h"
#endif

namespace radixlm::kernels {
namespace {

#if RADIXLM_X86
bool UseAvx2() { return core::AtLeast(core::ActiveIsa(), core::Isa::kAvx2); }

RADIXLM_AVX2 void RmsNormAvx2(const float* x, const float* w, float* y, int64_t n_rows,
                              int64_t dim, float eps) {
  for (int64_t t = 0; t < n_rows; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256 v = _mm256_loadu_ps(xr + i);
      acc = _mm256_fmadd_ps(v, v, acc);
    }
    float ss = avx2::HSum(acc);
    for (; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    const __m256 vinv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= dim; i += 8)
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vinv),
                                             _mm256_loadu_ps(w + i)));
    for (; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
  }
}
#endif

inline float GeluTanh(float x) {
  const float inner = x * (1.0f + 0.044715f * x * x);
  return x / (1.0f + std::exp(-2.0f * 0.7978845608f * inner));
}

// The gated activations that are x sigmoid(s(x)): Neg(x) is -s(x) on 8 lanes, Scalar the whole
// activation on one element (the tail).
struct SiluGate {
#if RADIXLM_X86
  static RADIXLM_AVX2 __m256 Neg(__m256 x) { return _mm256_sub_ps(_mm256_setzero_ps(), x); }
#endif
  static float Scalar(float g) { return g / (1.0f + std::exp(-g)); }
};
struct GeluTanhGate {  // s(x) = 2 sqrt(2/pi) (x + 0.044715 x^3)
#if RADIXLM_X86
  static RADIXLM_AVX2 __m256 Neg(__m256 x) {
    const __m256 inner = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), x), x, _mm256_set1_ps(1.0f)));
    return _mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.7978845608f), inner);
  }
#endif
  static float Scalar(float g) { return GeluTanh(g); }
};

// out = act(gate) * up over gate_up [n_tokens, gate | up], act(x) = x sigmoid(s(x)).
#if RADIXLM_X86
template <class Gate>
RADIXLM_AVX2 void GatedMulAvx2(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* g = gate_up + t * 2 * ffn;
    const float* u = g + ffn;
    float* o = out + t * ffn;
    int64_t i = 0;
    for (; i + 8 <= ffn; i += 8) {
      const __m256 gv = _mm256_loadu_ps(g + i);
      const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, avx2::Exp(Gate::Neg(gv))));
      _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(gv, sig), _mm256_loadu_ps(u + i)));
    }
    for (; i < ffn; ++i) o[i] = Gate::Scalar(g[i]) * u[i];
  }
}
#endif

}  // namespace

void RmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim, float eps) {
#if RADIXLM_X86
  if (UseAvx2()) return RmsNormAvx2(x, w, y, n_rows, dim, eps);
#endif
  for (int64_t t = 0; t < n_rows; ++t) {
    const float* xr = x + t * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
    for (int64_t i = 0; i < dim; ++i) y[t * dim + i] = xr[i] * inv * w[i];
  }
}

namespace {

// YaRN's frequencies and attention factor (ops.h), from the plain ones in t.
void ApplyYarn(const YarnRopeScaling& y, double theta, RopeTable* t) {
  const int dims = t->rot_dim;
  auto correction_dim = [&](double beta) {
    return dims * std::log(y.original_max_position / (beta * 2 * M_PI)) / (2 * std::log(theta));
  };
  double low = correction_dim(y.beta_fast), high = correction_dim(y.beta_slow);
  if (y.truncate) {
    low = std::max(0.0, std::floor(low));
    high = std::min(dims - 1.0, std::ceil(high));
  }
  for (int i = 0; i < dims / 2; ++i) {
    const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
    const double mix = 1.0 - ramp, extrap = t->inv_freq[i];
    t->inv_freq[i] = static_cast<float>(extrap / y.factor * (1.0 - mix) + extrap * mix);
  }
  t->mscale = static_cast<float>(0.1 * std::log(y.factor) + 1.0);
}

}  // namespace

RopeTable MakeRopeTable(RopeLayout layout, int rot_dim, double theta, const Llama3RopeScaling* llama3,
                        const YarnRopeScaling* yarn) {
  RADIXLM_CHECK(rot_dim % 2 == 0);
  RopeTable t;
  t.layout = layout;
  t.rot_dim = rot_dim;
  t.inv_freq.resize(rot_dim / 2);
  for (int i = 0; i < rot_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * i / rot_dim);
    if (llama3 && llama3->factor > 0) {
      // Llama 3.1 frequency-dependent scaling (HF _compute_llama3_parameters).
      const double low_wavelen = llama3->original_max_position / llama3->low_freq_factor;
      const double high_wavelen = llama3->original_max_position / llama3->high_freq_factor;
      const double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f /= llama3->factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (llama3->original_max_position / wavelen - llama3->low_freq_factor) /
                              (llama3->high_freq_factor - llama3->low_freq_factor);
        f = (1 - smooth) * f / llama3->factor + smooth * f;
      }
    }
    t.inv_freq[i] = static_cast<float>(f);
  }
  if (yarn && yarn->factor > 0) ApplyYarn(*yarn, theta, &t);
  return t;
}

void RopeCosSin(const RopeTable& table, const int32_t* positions, int64_t n_tokens, float* cos_sin) {
  const int half = table.rot_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int i = 0; i < half; ++i) {
      // Angle in double so large positions keep their precision (as HF computes in f32 on
      // float positions, differences stay far below the 1e-4 tolerance).
      const double angle = static_cast<double>(positions[t]) * table.inv_freq[i];
      cos_sin[t * table.rot_dim + 2 * i] = static_cast<float>(std::cos(angle)) * table.mscale;
      cos_sin[t * table.rot_dim + 2 * i + 1] = static_cast<float>(std::sin(angle)) * table.mscale;
    }
}

void ApplyRope(const RopeTable& table, const float* cos_sin, float* x, int64_t n_tokens,
               int n_heads, int head_dim) {
  // Cheap next to the GEMMs (n_tokens * n_heads * head_dim): scalar on every ISA.
  const int half = table.rot_dim / 2;
  const bool neox = table.layout == RopeLayout::kNeox;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cs = cos_sin + t * table.rot_dim;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

void GeluTanhMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn) {
#if RADIXLM_X86
  if (UseAvx2()) return GatedMulAvx2<GeluTanhGate>(gate_up, out, n_tokens, ffn);
#endif
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < ffn; ++i) out[t * ffn + i] = GeluTanh(gate_up[t * 2 * ffn + i]) * gate_up[t * 2 * ffn + ffn + i];
}

void SwigluOaiMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < ffn; ++i) {
      const float g = std::min(gate_up[t * 2 * ffn + i], kLimit);
      const float u = std::clamp(gate_up[t * 2 * ffn + ffn + i], -kLimit, kLimit);
      out[t * ffn + i] = g / (1.0f + std::exp(kAlpha * -g)) * (u + 1.0f);
    }
}

void SiluMul(const float* gate_up, float* out, int64_t n_tokens, int64_t ffn) {
#if RADIXLM_X86
  if (UseAvx2()) return GatedMulAvx2<SiluGate>(gate_up, out, n_tokens, ffn);
#endif
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < ffn; ++i) {
      const float g = gate_up[t * 2 * ffn + i], u = gate_up[t * 2 * ffn + ffn + i];
      out[t * ffn + i] = g / (1.0f + std::exp(-g)) * u;
    }
}

void EmbeddingLookup(const void* table, core::DType dtype, int64_t dim, const int32_t* ids,
                     int64_t n_tokens, float* out, float scale) {
  const size_t row_bytes = core::RowBytes(dtype, dim);  // quantised tables dequantise a row
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * dim;
    core::ConvertToF32(dtype, static_cast<const uint8_t*>(table) + ids[t] * row_bytes, o, dim);
    if (scale != 1.0f)
      for (int64_t i = 0; i < dim; ++i) o[i] *= scale;
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void GatherRows(const float* src, const int32_t* index, int64_t n_rows, int64_t dim, float* dst) {
  for (int64_t i = 0; i < n_rows; ++i)
    std::memcpy(dst + i * dim, src + static_cast<int64_t>(index[i]) * dim, dim * sizeof(float));
}

void ScatterRows(const float* src, const int32_t* index, int64_t n_rows, int64_t dim, float* dst) {
  for (int64_t i = 0; i < n_rows; ++i)
    std::memcpy(dst + static_cast<int64_t>(index[i]) * dim, src + i * dim, dim * sizeof(float));
}

}  // namespace radixlm::kernels
