// Flat-pool helpers internal to cache/. FlatMap: an open-addressing hash map from 64-bit keys
// to 32-bit values (linear probing, backward-shift deletion), for the child indexes of the
// prefix trees: one probe touches one cache line, where std::unordered_map chases a bucket and
// a node and allocates per entry. Hand-written because no Debian-packaged library offers one
// (abseil's flat_hash_map is not packaged for Debian 12's toolchain as a stable dependency here).
// REQUIRES: no key equals kEmpty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace radixlm::cache::internal {

class FlatMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  // The value of `key`, or -1.
  int32_t Find(uint64_t key) const {
    if (slots_.empty()) return -1;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return slots_[i].second;
      if (slots_[i].first == kEmpty) return -1;
    }
  }
  // Inserts key -> value unless present; returns the value now stored and whether it is new.
  std::pair<int32_t*, bool> TryEmplace(uint64_t key, int32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return {&slots_[i].second, false};
      if (slots_[i].first == kEmpty) {
        slots_[i] = {key, value};
        ++size_;
        return {&slots_[i].second, true};
      }
    }
  }
  int32_t* FindMut(uint64_t key) {
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return &slots_[i].second;
      if (slots_[i].first == kEmpty) return nullptr;
    }
  }
  void Erase(uint64_t key) {
    if (slots_.empty()) return;
    size_t i = Home(key);
    while (slots_[i].first != key) {
      if (slots_[i].first == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the probe run into the hole if their home allows.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].first == kEmpty) break;
      const size_t home = Home(slots_[j].first);
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].first = kEmpty;
    --size_;
  }
  size_t size() const { return size_; }
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [k, v] : slots_)
      if (k != kEmpty) f(k, v);
  }

 private:
  size_t Home(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;  // murmur3's finaliser
    key ^= key >> 33;
    return static_cast<size_t>(key) & mask_;
  }
  void Grow() {
    std::vector<std::pair<uint64_t, int32_t>> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, {kEmpty, -1});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const auto& [k, v] : old)
      if (k != kEmpty) TryEmplace(k, v);
  }

  std::vector<std::pair<uint64_t, int32_t>> slots_;
  size_t mask_ = 0, size_ = 0;
};

// A node id from a flat pool's free list (the last freed, after reset(id)), else append()'s
// new one. Every flat-pool tree of cache/ takes its nodes this way.
template <typename Reset, typename Append>
int32_t ReuseOrAppend(std::vector<int32_t>& free, Reset reset, Append append) {
  if (free.empty()) return append();
  const int32_t id = free.back();
  free.pop_back();
  reset(id);
  return id;
}

// A node of a flat pool (STYLE.md: trees in vectors indexed by int32 ids): the last freed slot,
// reset to a fresh Node, else a new one at the end. The radix caches (production and reference)
// share it.
template <typename Node>
int32_t NewPoolNode(std::vector<Node>& nodes, std::vector<int32_t>& free) {
  return ReuseOrAppend(free, [&nodes](int32_t id) { nodes[id] = Node(); }, [&nodes] {
    nodes.emplace_back();
    return static_cast<int32_t>(nodes.size() - 1);
  });
}

// Visits a flat-pool tree depth first from `root`: visit(id, stack) pushes onto stack the
// children to visit next (the last pushed is visited first).
template <typename Visit>
void DepthFirst(int32_t root, Visit visit) {
  std::vector<int32_t> stack = {root};
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    visit(id, stack);
  }
}

// How many leading tokens an edge and a key share.
inline size_t CommonPrefix(std::span<const int32_t> edge, std::span<const int32_t> key) {
  size_t n = 0;
  while (n < edge.size() && n < key.size() && edge[n] == key[n]) ++n;
  return n;
}

}  // namespace radixlm::cache::internal
