// A read-only set of named tensors backed by memory-mapped checkpoint files (GGUF or
// safetensors). The store owns the mappings; entries borrow from them. Shapes are in
// PyTorch order (outermost first) whatever the file's convention.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace radixlm::formats {

struct TensorEntry {
  std::string name;
  core::DType dtype = core::DType::kF32;
  std::vector<int64_t> shape;  // PyTorch order
  const void* data = nullptr;
  size_t nbytes = 0;
  std::string file;            // for error messages

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string ShapeString() const;
};

// Bytes of a tensor of `shape` and `dtype`; false when the product overflows or exceeds 2^60
// (file shapes are untrusted: an overflowing product must not pass as a small size).
bool ShapeBytes(const std::vector<int64_t>& shape, core::DType dtype, size_t* bytes);

class TensorStore {
 public:
  void AddFile(std::unique_ptr<core::MappedFile> file) { files_.push_back(std::move(file)); }
  // REQUIRES: data lies inside a file added to this store.
  core::Status Add(TensorEntry entry);
  const TensorEntry* Find(const std::string& name) const;
  // Finds `name` and checks its shape, with an error naming file, tensor and problem.
  core::StatusOr<const TensorEntry*> Get(const std::string& name, const std::vector<int64_t>& shape) const;
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }

 private:
  std::vector<std::unique_ptr<core::MappedFile>> files_;
  std::map<std::string, TensorEntry> entries_;
};

std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace radixlm::formats
