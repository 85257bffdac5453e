#include "formats/tensor_store.h"

namespace radixlm::formats {

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TensorEntry::ShapeString() const { return ShapeToString(shape); }

bool ShapeBytes(const std::vector<int64_t>& shape, core::DType dtype, size_t* bytes) {
  constexpr uint64_t kLimit = uint64_t{1} << 60;
  // A quantised row is whole blocks: bytes = blocks per row * block bytes * other dims.
  const int64_t per_block = core::BlockElems(dtype);
  if (shape.empty() ? per_block != 1 : shape.back() < 0 || shape.back() % per_block != 0) return false;
  uint64_t n = core::BlockBytes(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = i + 1 == shape.size() ? shape[i] / per_block : shape[i];
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > kLimit) return false;
  }
  *bytes = static_cast<size_t>(n);
  return true;
}

core::Status TensorStore::Add(TensorEntry entry) {
  if (entries_.count(entry.name))
    return core::DataLoss(entry.file + ": tensor '" + entry.name + "' appears twice");
  entries_.emplace(entry.name, std::move(entry));
  return core::Status::Ok();
}

const TensorEntry* TensorStore::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

core::StatusOr<const TensorEntry*> TensorStore::Get(const std::string& name,
                                                    const std::vector<int64_t>& shape) const {
  const TensorEntry* e = Find(name);
  if (!e) return core::NotFound("checkpoint has no tensor '" + name + "'");
  // Leading dimensions of size 1 are not significant: ggml writes a [1, n] tensor as [n]
  // (llama-quantize's output for Mamba2's one-group norm).
  auto significant = [](const std::vector<int64_t>& s) {
    size_t i = 0;
    while (i + 1 < s.size() && s[i] == 1) ++i;
    return std::vector<int64_t>(s.begin() + static_cast<int64_t>(i), s.end());
  };
  if (significant(e->shape) != significant(shape))
    return core::DataLoss(e->file + ": tensor '" + name + "' has shape " + e->ShapeString() +
                          ", expected " + ShapeToString(shape) + " from the model config");
  return e;
}

}  // namespace radixlm::formats
