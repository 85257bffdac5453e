// The sublayers' helpers for rows of a step: ForRows, fn(begin, end) over rows [0, n) on the
// calling thread for a decode step's few rows (a parallel region costs more than their work),
// else spread over the pool; Grow, a scratch buffer grown (never shrunk) to n elements.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace radixlm::models {

template <typename Fn>
void ForRows(core::ThreadPool& pool, int64_t n, Fn&& fn) {
  if (n <= 16) {
    fn(int64_t{0}, n);
    return;
  }
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace radixlm::models
