#include "core/tensor.h"

#include <cstring>

namespace radixlm::core {

void AlignedBuffer::Resize(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  data_.reset(rounded ? static_cast<uint8_t*>(std::aligned_alloc(64, rounded)) : nullptr);
  RADIXLM_CHECK_MSG(rounded == 0 || data_ != nullptr, "out of memory");
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
