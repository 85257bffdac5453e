#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/cpu_features.h"
#include "core/fast_exp.h"

namespace radixlm::sampling {

double LogProb(std::span<const float> logits, int32_t id) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float x : logits) mx = std::max(mx, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return static_cast<double>(logits[static_cast<size_t>(id)]) - mx - std::log(sum);
}

double LogSumExp(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float x : logits) mx = std::max(mx, x);
  if (!std::isfinite(mx)) return mx;
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return mx + std::log(sum);
}

void TopLogProbs(std::span<const float> logits, int k, double lse, std::vector<std::pair<int32_t, float>>* top) {
  top->clear();
  if (k <= 0) return;
  // A min-heap of the best k (logit, id): the root is the worst kept.
  auto worse = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<std::pair<float, int32_t>> heap;
  heap.reserve(static_cast<size_t>(k) + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const std::pair<float, int32_t> c{logits[i], static_cast<int32_t>(i)};
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (worse(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  }
  std::sort(heap.begin(), heap.end(), worse);
  for (const auto& [logit, id] : heap) top->push_back({id, static_cast<float>(logit - lse)});
}

namespace {

bool ByWeight(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The passes over the whole vocabulary run at the machine's vector width: each body below is
// compiled three times (baseline x86-64, AVX2, AVX-512F) by target attributes on small
// wrappers, and core::ActiveIsa() picks one per call, as the kernels do. (Not GCC's
// target_clones: its ifunc resolvers run before ThreadSanitizer's runtime starts and crash it.)
// Sums and maxima keep 16 independent lanes combined in a fixed order, so every width gives the
// same bits (one accumulator would not vectorise; a vectorised one would round differently per
// width), and the file is built without FP contraction (CMakeLists.txt).
constexpr size_t kLanes = 16;

[[gnu::always_inline]] inline float MaxBody(const float* x, size_t n) {
  float lane[kLanes];
  for (size_t j = 0; j < kLanes; ++j) lane[j] = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float m = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// w[i] = exp(logit_i / T - best), 0 below e^-30 (see the header).
[[gnu::always_inline]] inline void WeightsBody(const float* l, size_t n, float inv_t, float best, float* w) {
  for (size_t i = 0; i < n; ++i) {
    const float z = l[i] * inv_t - best;
    const float e = core::ExpVec(z < -30.0f ? -30.0f : z);
    w[i] = z > -30.0f ? e : 0.0f;
  }
}

[[gnu::always_inline]] inline float SumBody(const float* w, size_t n) {
  float lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] += w[i + j];
  float s = 0;
  for (size_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) s += w[i];
  return s;
}

// The nucleus as a cut in ByWeight order: a token is in when it is at or above the cut.
struct Cut {
  float w = 0.0f;  // members: weight > w, or weight == w and id <= id
  int32_t id = -1;
  bool In(float x, int32_t i) const { return x > w || (x == w && i <= id); }
};

// The members' weights summed, ids from `first` (16 lanes, as SumBody).
[[gnu::always_inline]] inline float MaskedSumBody(const float* w, size_t first, size_t n, Cut cut) {
  float lane[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const float x = w[i + j];
      const int32_t id = static_cast<int32_t>(first + i + j);
      lane[j] += (x > cut.w || (x == cut.w && id <= cut.id)) ? x : 0.0f;
    }
  float s = 0;
  for (size_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) s += cut.In(w[i], static_cast<int32_t>(first + i)) ? w[i] : 0.0f;
  return s;
}

// The first i >= from with x[i] == v (n: none), 16 lanes at a time.
[[gnu::always_inline]] inline size_t FindBody(const float* x, size_t from, size_t n, float v) {
  size_t i = from;
  for (; i + kLanes <= n; i += kLanes) {
    bool any = false;
    for (size_t j = 0; j < kLanes; ++j) any |= x[i + j] == v;
    if (any) break;
  }
  for (; i < n; ++i)
    if (x[i] == v) return i;
  return n;
}

#define RADIXLM_SAMPLING_ISA(SUFFIX, TARGET)                                                                  \
  TARGET size_t Find##SUFFIX(const float* x, size_t from, size_t n, float v) { return FindBody(x, from, n, v); } \
  TARGET float MaskedSum##SUFFIX(const float* w, size_t first, size_t n, Cut cut) {                          \
    return MaskedSumBody(w, first, n, cut);                                                                     \
  }                                                                                                             \
  TARGET float Max##SUFFIX(const float* x, size_t n) { return MaxBody(x, n); }                                \
  TARGET void Weights##SUFFIX(const float* l, size_t n, float inv_t, float best, float* w) {                 \
    WeightsBody(l, n, inv_t, best, w);                                                                          \
  }                                                                                                             \
  TARGET float Sum##SUFFIX(const float* w, size_t n) { return SumBody(w, n); }
#if RADIXLM_X86
RADIXLM_SAMPLING_ISA(Avx512, __attribute__((target("avx512f"))))
RADIXLM_SAMPLING_ISA(Avx2, __attribute__((target("avx2"))))
#else  // no x86 level on this CPU family: the names exist, the dispatch never reaches them
RADIXLM_SAMPLING_ISA(Avx512, )
RADIXLM_SAMPLING_ISA(Avx2, )
#endif
RADIXLM_SAMPLING_ISA(Base, )
#undef RADIXLM_SAMPLING_ISA

float MaxOf(const float* x, size_t n) {
  switch (core::ActiveIsa()) {
    case core::Isa::kAvx512: return MaxAvx512(x, n);
    case core::Isa::kAvx2: return MaxAvx2(x, n);
    default: return MaxBase(x, n);
  }
}

void WeightsOf(const float* l, size_t n, float inv_t, float best, float* w) {
  switch (core::ActiveIsa()) {
    case core::Isa::kAvx512: return WeightsAvx512(l, n, inv_t, best, w);
    case core::Isa::kAvx2: return WeightsAvx2(l, n, inv_t, best, w);
    default: return WeightsBase(l, n, inv_t, best, w);
  }
}

float MaskedSumOf(const float* w, size_t first, size_t n, Cut cut) {
  switch (core::ActiveIsa()) {
    case core::Isa::kAvx512: return MaskedSumAvx512(w, first, n, cut);
    case core::Isa::kAvx2: return MaskedSumAvx2(w, first, n, cut);
    default: return MaskedSumBase(w, first, n, cut);
  }
}

size_t FindOf(const float* x, size_t n, float v) {
  switch (core::ActiveIsa()) {
    case core::Isa::kAvx512: return FindAvx512(x, 0, n, v);
    case core::Isa::kAvx2: return FindAvx2(x, 0, n, v);
    default: return FindBase(x, 0, n, v);
  }
}

float SumOf(const float* w, size_t n) {
  switch (core::ActiveIsa()) {
    case core::Isa::kAvx512: return SumAvx512(w, n);
    case core::Isa::kAvx2: return SumAvx2(w, n);
    default: return SumBase(w, n);
  }
}

// A weight's bucket, heaviest first: positive floats order as their bit patterns, so the
// distance in bits from 1.0 (the best token's weight) shifted by 20 gives 8 buckets per power of
// two. Weights are at most 1 and above e^-30 > 2^-44: 44 x 8 + 1 buckets hold them all. Fine
// buckets keep the one bucket the nucleus search selects in small.
constexpr int kBuckets = 360;
inline int BucketOf(float w) { return static_cast<int>((std::bit_cast<uint32_t>(1.0f) - std::bit_cast<uint32_t>(w)) >> 20); }

// The fewest heaviest items (ByWeight order) whose weights reach `need`, moved to the front of
// c; returns how many. Halving by selection over c[0, hi) (if the heavier half holds what is
// still needed, the cut is inside it; otherwise all of it is in), a sort of at most 64, and
// when rounding leaves [0, hi) short, the rest of c in order.
size_t HeaviestHolding(std::vector<std::pair<float, int32_t>>& c, size_t hi, double need) {
  size_t lo = 0;
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.begin() + lo, c.begin() + mid, c.begin() + hi, ByWeight);
    double mass = 0;
    for (size_t i = lo; i < mid; ++i) mass += c[i].first;
    if (mass >= need) {
      hi = mid;
    } else {
      need -= mass;
      lo = mid;
    }
  }
  std::sort(c.begin() + lo, c.begin() + hi, ByWeight);
  size_t n = lo;
  double cum = 0;
  while (n < hi) {
    cum += c[n++].first;
    if (cum >= need) return n;
  }
  std::sort(c.begin() + hi, c.end(), ByWeight);
  while (n < c.size() && cum < need) cum += c[n++].first;
  return n;
}

// The nucleus without sorting the vocabulary: the mass per weight bucket, from the heaviest
// bucket down until top_p of the mass is reached; every token of the heavier buckets is
// in, and only the boundary bucket is sorted to take the fewest of its tokens that complete it.
// The same set as the textbook sort (ties by id), at O(V) plus a sort of one bucket.
Cut NucleusCut(const std::vector<float>& w, float top_p, std::vector<std::pair<float, int32_t>>* edge) {
  // Four interleaved histograms: consecutive tokens in one bucket would otherwise wait on
  // each other's add. A weight of 0 lands in the last bucket, adding nothing.
  constexpr int kCopies = 4;
  double copies[kCopies][kBuckets] = {};
  const size_t n = w.size();
  for (size_t i = 0; i < n; ++i) copies[i % kCopies][std::min(BucketOf(w[i]), kBuckets - 1)] += w[i];
  double mass[kBuckets];
  for (int b = 0; b < kBuckets; ++b) mass[b] = (copies[0][b] + copies[1][b]) + (copies[2][b] + copies[3][b]);
  double total = 0;
  for (double m : mass) total += m;
  double need = top_p * total;
  int boundary = 0;
  for (; boundary < kBuckets - 1 && mass[boundary] < need; ++boundary) need -= mass[boundary];
  edge->clear();
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0.0f && BucketOf(w[i]) == boundary) edge->push_back({w[i], static_cast<int32_t>(i)});
  const size_t take = HeaviestHolding(*edge, edge->size(), need);
  if (take == 0) return {};  // rounding: every token of weight > 0
  return {(*edge)[take - 1].first, (*edge)[take - 1].second};
}

void Nucleus(const std::vector<float>& w, float top_p, Candidates* out) {
  std::vector<std::pair<float, int32_t>> edge;
  const Cut cut = NucleusCut(w, top_p, &edge);
  out->items.clear();
  out->total = 0;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0.0f && cut.In(w[i], static_cast<int32_t>(i))) {
      out->items.push_back({w[i], static_cast<int32_t>(i)});
      out->total += w[i];
    }
}

}  // namespace

// The lowest id among the maxima (NaN never wins): the vectorised maximum, then its first place.
int32_t Argmax(std::span<const float> logits) {
  if (logits.empty()) return 0;
  const float m = MaxOf(logits.data(), logits.size());
  const size_t i = FindOf(logits.data(), logits.size(), m);
  return i < logits.size() ? static_cast<int32_t>(i) : 0;
}

void TruncatedDistribution(std::span<const float> logits, const SamplingParams& params, Candidates* out) {
  const float inv_t = 1.0f / params.temperature;
  const float max_logit = MaxOf(logits.data(), logits.size());
  const float best = max_logit * inv_t;
  if (params.top_k <= 0 && params.top_p < 1.0f) {  // the nucleus alone: buckets, no candidate list first
    std::vector<float> w(logits.size());
    WeightsOf(logits.data(), logits.size(), inv_t, best, w.data());
    if (params.min_p > 0.0f)
      for (float& x : w) x = x >= params.min_p ? x : 0.0f;
    Nucleus(w, params.top_p, out);
    return;
  }
  auto& c = out->items;
  c.clear();
  c.reserve(logits.size());
  // Below e^-30 of the best token: dropped (see the header); below min_p of it, too.
  const float floor = params.min_p > 0.0f ? std::max(-30.0f, std::log(params.min_p)) : -30.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float z = logits[i] * inv_t - best;
    if (z >= floor) c.push_back({z, static_cast<int32_t>(i)});
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < c.size()) {
    const auto k = c.begin() + params.top_k;
    if (params.top_k <= 4096) std::partial_sort(c.begin(), k, c.end(), ByWeight);  // O(V log k): cheapest for small k
    else std::nth_element(c.begin(), k, c.end(), ByWeight);
    c.resize(params.top_k);
  }
  const size_t n_c = c.size();
  std::pair<float, int32_t>* cp = c.data();
  for (size_t i = 0; i < n_c; ++i) cp[i].first = core::ExpVec(cp[i].first);
  double total = 0;
  for (size_t i = 0; i < n_c; ++i) total += cp[i].first;
  if (params.top_p < 1.0f) {
    // The nucleus: the fewest most likely tokens (in ByWeight order) holding top_p of the mass.
    // First the tokens above a cutoff whose mass already reaches it (lowered 1000x until it
    // does: few tokens when the distribution is peaked), then halving by selection: if the
    // upper half of the range holds what is still needed, the nucleus ends inside it;
    // otherwise all of it is in and the rest is needed from the lower half. O(V) expected.
    double need = params.top_p * total;
    size_t hi = c.size();
    for (double cutoff = 1e-3; cutoff > 1e-14; cutoff *= 1e-3) {  // weights <= 1 (the best is 1)
      const auto mid = std::partition(c.begin(), c.end(), [&](const auto& x) { return x.first >= cutoff; });
      double mass = 0;
      for (auto it = c.begin(); it != mid; ++it) mass += it->first;
      if (mass >= need) {
        hi = static_cast<size_t>(mid - c.begin());
        break;
      }
    }
    c.resize(HeaviestHolding(c, hi, need));
    total = 0;
    for (const auto& x : c) total += x.first;
  }
  out->total = total;
}

void Sampler::SetPrompt(std::span<const int32_t> prompt) {
  if (!params_.HasPenalties()) return;
  for (int32_t id : prompt) generated_counts_.emplace(id, 0);
}

void Sampler::Penalize(std::span<float> logits) const {
  const float rep = params_.repetition_penalty;
  for (const auto& [id, count] : generated_counts_) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    if (rep != 1.0f) l = l > 0 ? l / rep : l * rep;
    if (count > 0) l -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t id = Draw(logits);
  if (params_.HasPenalties()) ++generated_counts_[id];
  return id;
}

int32_t Sampler::Draw(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  // A temperature so small that logits / temperature overflows float is greedy sampling (its
  // limit); the softmax would turn the overflow into NaN and pick the worst candidate.
  const float max_logit = MaxOf(logits.data(), logits.size());
  if (!std::isfinite(max_logit / params_.temperature)) return Argmax(logits);
  if (params_.top_k <= 0) {
    // Temperature alone, or with top-p: no candidate list. The weights in one vectorised pass
    // (tokens below e^-30 of the best weigh 0, as in TruncatedDistribution); top-p keeps the
    // tokens at or above the nucleus cut.
    const float inv_t = 1.0f / params_.temperature, best = max_logit * inv_t;
    const size_t n = logits.size();
    weights_.resize(n);
    float* w = weights_.data();
    WeightsOf(logits.data(), n, inv_t, best, w);
    if (params_.min_p > 0.0f)  // weights are relative to the best token's (1)
      for (size_t i = 0; i < n; ++i) w[i] = w[i] >= params_.min_p ? w[i] : 0.0f;
    const Cut cut = params_.top_p < 1.0f ? NucleusCut(weights_, params_.top_p, &edge_) : Cut{};
    // Sums per block of 256, so the draw skips whole blocks and walks one.
    constexpr size_t kBlock = 256;
    const size_t blocks = (n + kBlock - 1) / kBlock;
    block_sums_.resize(blocks);
    double total = 0;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t len = std::min(n, (b + 1) * kBlock) - b * kBlock;
      block_sums_[b] = params_.top_p < 1.0f ? MaskedSumOf(w + b * kBlock, b * kBlock, len, cut) : SumOf(w + b * kBlock, len);
      total += block_sums_[b];
    }
    double r = rng_.Uniform() * total;
    size_t b = 0;
    while (b + 1 < blocks && r > block_sums_[b]) r -= block_sums_[b++];
    int32_t last = -1;
    for (size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      if (w[i] == 0.0f || !cut.In(w[i], static_cast<int32_t>(i))) continue;
      last = static_cast<int32_t>(i);
      r -= w[i];
      if (r <= 0) return last;
    }
    if (last >= 0) return last;
    for (size_t i = n; i-- > 0;)  // rounding ran past the block's members: the last member overall
      if (w[i] > 0.0f && cut.In(w[i], static_cast<int32_t>(i))) return static_cast<int32_t>(i);
    return Argmax(logits);
  }
  TruncatedDistribution(logits, params_, &candidates_);
  double r = rng_.Uniform() * candidates_.total;
  for (const auto& c : candidates_.items) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.items.back().second;
}

}  // namespace radixlm::sampling
