// GGUF v2/v3 reader and writer (the llama.cpp/ggml checkpoint format).
// Layout: magic "GGUF", version, tensor count, metadata count; metadata key/value pairs;
// tensor infos (name, dims innermost-first, ggml type, offset); padding to general.alignment
// (default 32); tensor data. Spec: ggml/docs/gguf.md.
// Supported tensor types: F32, F16, BF16. A file with quantised tensors is rejected with the
// tensor's name and type, never misread.
// Every read is bounds-checked against the file size: a truncated or corrupted file gives a
// Status naming the file and what was wrong.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "formats/tensor_store.h"

namespace radixlm::formats {

enum class GgufType : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString,
                                 kArray, kU64, kI64, kF64 };

struct GgufValue {
  GgufType type = GgufType::kU32;
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;
  GgufType array_type = GgufType::kU32;
  std::vector<GgufValue> array;

  static GgufValue Of(GgufType t, decltype(scalar) v) {
    GgufValue g;
    g.type = t;
    g.scalar = std::move(v);
    return g;
  }
  static GgufValue U32(uint32_t v) { return Of(GgufType::kU32, uint64_t{v}); }
  static GgufValue I32(int32_t v) { return Of(GgufType::kI32, int64_t{v}); }
  static GgufValue F32(float v) { return Of(GgufType::kF32, double{v}); }
  static GgufValue Bool(bool v) { return Of(GgufType::kBool, v); }
  static GgufValue Str(std::string v) { return Of(GgufType::kString, std::move(v)); }
  static GgufValue Array(GgufType elem, std::vector<GgufValue> items);

  bool is_integer() const;
  bool is_number() const { return is_integer() || type == GgufType::kF32 || type == GgufType::kF64; }
  int64_t AsInt() const;
  double AsDouble() const;
  const std::string& AsString() const { return std::get<std::string>(scalar); }
};

class GgufFile {
 public:
  static core::StatusOr<GgufFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* Find(const std::string& key) const;
  // Typed getters with a clear error when absent or of the wrong type.
  core::StatusOr<int64_t> GetInt(const std::string& key) const;
  core::StatusOr<double> GetFloat(const std::string& key) const;
  core::StatusOr<std::string> GetString(const std::string& key) const;
  // The fallback when the key is absent. A key present with another type (an epsilon stored as
  // a bool or a uint16) is not read as the fallback: it is recorded, and TypeError() reports it
  // (llama.cpp refuses such a file too). Floats are F32 / F64 values only.
  int64_t GetIntOr(const std::string& key, int64_t fallback) const;
  double GetFloatOr(const std::string& key, double fallback) const;
  // A bool (or an integer, 0 = false).
  bool GetBoolOr(const std::string& key, bool fallback) const;
  // The first key an *Or getter found with the wrong type (Ok when none).
  core::Status TypeError() const;

  TensorStore& tensors() { return *tensors_; }
  const TensorStore& tensors() const { return *tensors_; }

 private:
  std::string path_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::unique_ptr<TensorStore> tensors_;
  mutable std::string type_error_;  // the first wrong-typed key an *Or getter met
};

// Builds a GGUF v3 file in memory order: metadata and tensors as added.
class GgufWriter {
 public:
  void Set(const std::string& key, GgufValue value) { metadata_.emplace_back(key, std::move(value)); }
  // shape in PyTorch order; data must stay valid until Write. dtype: F32, F16 or BF16.
  void AddTensor(const std::string& name, core::DType dtype, std::vector<int64_t> shape, const void* data);
  core::Status Write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    core::DType dtype;
    std::vector<int64_t> shape;
    const void* data;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace radixlm::formats
