// Owning aligned buffers and non-owning tensor views (dtype + shape + strides in elements).
// Views borrow: whoever owns the buffer (a model's weights, a KV store, a step's scratch)
// must outlive them. Rank is at most 4, which covers every tensor radixlm uses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace radixlm::core {

// 64-byte aligned, zero-initialised heap memory (one cache line, one zmm register).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { Resize(bytes); }
  void Resize(size_t bytes);
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  template <typename T> T* as() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* as() const { return reinterpret_cast<const T*>(data_.get()); }

 private:
  struct Free { void operator()(uint8_t* p) const { std::free(p); } };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, 4> shape{};
  std::array<int64_t, 4> strides{};  // in elements

  static TensorView Contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape);
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  bool is_contiguous() const;
  std::string ShapeString() const;
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

// A tensor that owns its storage; always contiguous.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::initializer_list<int64_t> shape);
  TensorView view() const { return view_; }
  template <typename T> T* as() const { return static_cast<T*>(view_.data); }
  int64_t numel() const { return view_.numel(); }
  int64_t dim(int i) const { return view_.shape[i]; }
  DType dtype() const { return view_.dtype; }
  size_t nbytes() const { return view_.nbytes(); }

 private:
  AlignedBuffer buf_;
  TensorView view_;
};

}  // namespace radixlm::core
