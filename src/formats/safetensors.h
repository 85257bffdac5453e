// Hugging Face safetensors reader: a single `model.safetensors` or shards listed by
// `model.safetensors.index.json` (weight_map: tensor name -> shard file).
// File layout: u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
// Offsets are checked against the file and the dtype/shape; errors name file and tensor.
#pragma once

#include <string>

#include "core/status.h"
#include "formats/tensor_store.h"

namespace radixlm::formats {

// Adds every tensor of one safetensors file to `store`.
core::Status ReadSafetensorsFile(const std::string& path, TensorStore* store);
// Reads a model folder's weights (single file or sharded with the index).
core::StatusOr<std::unique_ptr<TensorStore>> ReadSafetensorsFolder(const std::string& dir);

// Writes tensors (PyTorch-order shapes) to one safetensors file.
struct SafetensorsTensor {
  std::string name;
  core::DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};
core::Status WriteSafetensorsFile(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace radixlm::formats
