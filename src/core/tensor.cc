#include "core/tensor.h"

#include <sys/mman.h>

#include <cstring>

namespace radixlm::core {

void AlignedBuffer::Resize(size_t bytes) {
  // Buffers of 2 MiB or more (weights, KV pools) get transparent huge pages where the kernel
  // offers them on request: decode streams them whole every token, and with 4 KiB pages the
  // page walks and faults show up (Linux's default THP mode is madvise).
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  data_.reset(rounded ? static_cast<uint8_t*>(std::aligned_alloc(align, rounded)) : nullptr);
  RADIXLM_CHECK_MSG(rounded == 0 || data_ != nullptr, "out of memory");
  if (align == kHuge) madvise(data_.get(), rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
  if (rounded) std::memset(data_.get(), 0, rounded);
  size_ = bytes;
}

TensorView TensorView::Contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  RADIXLM_CHECK(v.rank <= 4);
  int i = 0;
  for (int64_t d : shape) v.shape[i++] = d;
  int64_t stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, std::initializer_list<int64_t> shape) {
  view_ = TensorView::Contiguous(nullptr, dtype, shape);
  buf_.Resize(view_.nbytes());
  view_.data = buf_.data();
}

}  // namespace radixlm::core
