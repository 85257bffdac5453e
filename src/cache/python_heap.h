// A binary min-heap that makes exactly the moves of CPython's heapq (heapify, heappush,
// heappop), comparing with a strict less-than only. The Marconi reference evicts leaves through
// heapq, and among leaves with equal timestamps the victim is whichever heapq's sift order
// surfaces first; reproducing its numbers bit for bit needs the same order, which std::*_heap
// does not promise.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace radixlm::cache {

template <typename T, typename Less>
class PythonHeap {
 public:
  PythonHeap(std::vector<T> items, Less less) : heap_(std::move(items)), less_(less) {
    // heapify: sift up every internal position, last first.
    for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(heap_.size() / 2) - 1; i >= 0; --i) SiftUp(i);
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

  T Pop() {
    T last = std::move(heap_.back());
    heap_.pop_back();
    if (heap_.empty()) return last;
    T top = std::move(heap_[0]);
    heap_[0] = std::move(last);
    SiftUp(0);
    return top;
  }
  void Push(T item) {
    heap_.push_back(std::move(item));
    SiftDown(0, heap_.size() - 1);
  }

 private:
  // heapq._siftdown: move the item at pos up towards start while it is less than its parent.
  void SiftDown(size_t start, size_t pos) {
    T item = std::move(heap_[pos]);
    while (pos > start) {
      const size_t parent = (pos - 1) >> 1;
      if (less_(item, heap_[parent])) {
        heap_[pos] = std::move(heap_[parent]);
        pos = parent;
        continue;
      }
      break;
    }
    heap_[pos] = std::move(item);
  }
  // heapq._siftup: bubble the smaller child up to a leaf, then sift the item back down.
  void SiftUp(size_t pos) {
    const size_t end = heap_.size(), start = pos;
    T item = std::move(heap_[pos]);
    size_t child = 2 * pos + 1;
    while (child < end) {
      const size_t right = child + 1;
      if (right < end && !less_(heap_[child], heap_[right])) child = right;
      heap_[pos] = std::move(heap_[child]);
      pos = child;
      child = 2 * pos + 1;
    }
    heap_[pos] = std::move(item);
    SiftDown(start, pos);
  }

  std::vector<T> heap_;
  Less less_;
};

}  // namespace radixlm::cache
