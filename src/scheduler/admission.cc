#include "scheduler/admission.h"

#include <algorithm>
#include <numeric>

namespace radixlm::scheduler {

std::vector<size_t> AdmissionOrder(std::span<const WaitingRequest> waiting, const SchedulerConfig& config) {
  std::vector<size_t> order(waiting.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const WaitingRequest& x = waiting[a];
    const WaitingRequest& y = waiting[b];
    const bool xs = x.waited_steps >= config.starvation_steps, ys = y.waited_steps >= config.starvation_steps;
    if (xs != ys) return xs;                        // starved requests first
    if (xs) return x.arrival < y.arrival;           // among them, oldest first
    if (x.cached_tokens != y.cached_tokens) return x.cached_tokens > y.cached_tokens;
    return x.arrival < y.arrival;
  });
  return order;
}

}  // namespace radixlm::scheduler
