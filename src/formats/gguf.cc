#include "formats/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>

namespace radixlm::formats {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxArrayItems = 1ull << 28;
constexpr uint64_t kMaxStringBytes = 1ull << 30;

// ggml_type ids of the tensor types radixlm reads (ggml.h's enum ggml_type), and names for
// the ones it rejects.
constexpr struct { uint32_t id; core::DType dtype; } kGgmlTypes[] = {
    {0, core::DType::kF32},   {1, core::DType::kF16},   {30, core::DType::kBF16}, {2, core::DType::kQ4_0},
    {3, core::DType::kQ4_1},  {6, core::DType::kQ5_0},  {7, core::DType::kQ5_1},  {8, core::DType::kQ8_0},
    {10, core::DType::kQ2_K}, {11, core::DType::kQ3_K}, {12, core::DType::kQ4_K}, {13, core::DType::kQ5_K},
    {14, core::DType::kQ6_K}, {39, core::DType::kMXFP4}};
bool DTypeOfGgml(uint32_t id, core::DType* out) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) { *out = t.dtype; return true; }
  return false;
}
uint32_t GgmlOfDType(core::DType d) {
  for (const auto& t : kGgmlTypes)
    if (t.dtype == d) return t.id;
  RADIXLM_CHECK_MSG(false, "dtype has no ggml type");
  return 0;
}
const char* GgmlTypeName(uint32_t t) {
  static const char* names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1",
                                "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                                "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
                                "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16",
                                "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4",
                                "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", "NVFP4", "Q1_0", "Q2_0"};
  return t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

// Bounds-checked little-endian cursor over the mapped file.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& path) : d_(data), n_(size), path_(path) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return pos_ <= n_ ? n_ - pos_ : 0; }
  core::Status Error(const std::string& what) const {
    return core::DataLoss(path_ + ": " + what + " at byte " + std::to_string(pos_) +
                          " (file is " + std::to_string(n_) + " bytes; truncated or not GGUF?)");
  }
  template <typename T>
  core::Status Read(T* out) {
    if (n_ - pos_ < sizeof(T) || pos_ > n_) return Error("unexpected end of file");
    std::memcpy(out, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return core::Status::Ok();
  }
  core::Status ReadString(std::string* out) {
    uint64_t len = 0;
    RADIXLM_RETURN_IF_ERROR(Read(&len));
    if (len > kMaxStringBytes || len > n_ - pos_) return Error("string length " + std::to_string(len) + " runs past the end");
    out->assign(reinterpret_cast<const char*>(d_ + pos_), len);
    pos_ += len;
    return core::Status::Ok();
  }

 private:
  const uint8_t* d_;
  size_t n_, pos_ = 0;
  const std::string& path_;
};

// The fewest bytes one value of `type` takes in a file: strings a length, arrays a type and a count.
size_t MinEncodedBytes(GgufType type) {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kArray: return 12;
    default: return 8;  // 64-bit scalars, string lengths
  }
}

core::Status ReadValue(Reader& r, GgufType type, GgufValue* out, int depth) {
  out->type = type;
  switch (type) {
    case GgufType::kU8: { uint8_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = uint64_t{v}; break; }
    case GgufType::kI8: { int8_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = int64_t{v}; break; }
    case GgufType::kU16: { uint16_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = uint64_t{v}; break; }
    case GgufType::kI16: { int16_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = int64_t{v}; break; }
    case GgufType::kU32: { uint32_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = uint64_t{v}; break; }
    case GgufType::kI32: { int32_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = int64_t{v}; break; }
    case GgufType::kU64: { uint64_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = v; break; }
    case GgufType::kI64: { int64_t v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = v; break; }
    case GgufType::kF32: { float v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = double{v}; break; }
    case GgufType::kF64: { double v = 0; RADIXLM_RETURN_IF_ERROR(r.Read(&v)); out->scalar = v; break; }
    case GgufType::kBool: {
      uint8_t v = 0;
      RADIXLM_RETURN_IF_ERROR(r.Read(&v));
      if (v > 1) return r.Error("bool value " + std::to_string(v));
      out->scalar = v == 1;
      break;
    }
    case GgufType::kString: {
      std::string s;
      RADIXLM_RETURN_IF_ERROR(r.ReadString(&s));
      out->scalar = std::move(s);
      break;
    }
    case GgufType::kArray: {
      if (depth > 2) return r.Error("arrays nested too deeply");
      uint32_t elem = 0;
      uint64_t n = 0;
      RADIXLM_RETURN_IF_ERROR(r.Read(&elem));
      RADIXLM_RETURN_IF_ERROR(r.Read(&n));
      if (elem > static_cast<uint32_t>(GgufType::kF64)) return r.Error("unknown array element type " + std::to_string(elem));
      // Every item takes at least its encoded minimum in the file: a count the remaining bytes
      // cannot hold is refused before anything is allocated for it.
      if (n > kMaxArrayItems || n > r.remaining() / MinEncodedBytes(static_cast<GgufType>(elem)))
        return r.Error("array of " + std::to_string(n) + " items");
      out->array_type = static_cast<GgufType>(elem);
      out->array.resize(n);
      for (uint64_t i = 0; i < n; ++i) RADIXLM_RETURN_IF_ERROR(ReadValue(r, out->array_type, &out->array[i], depth + 1));
      break;
    }
    default:
      return r.Error("unknown metadata value type " + std::to_string(static_cast<uint32_t>(type)));
  }
  return core::Status::Ok();
}

template <typename T>
void Put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
void PutString(std::string& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out += s;
}

void WriteValue(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: Put<uint8_t>(out, static_cast<uint8_t>(v.AsInt())); break;
    case GgufType::kI8: Put<int8_t>(out, static_cast<int8_t>(v.AsInt())); break;
    case GgufType::kU16: Put<uint16_t>(out, static_cast<uint16_t>(v.AsInt())); break;
    case GgufType::kI16: Put<int16_t>(out, static_cast<int16_t>(v.AsInt())); break;
    case GgufType::kU32: Put<uint32_t>(out, static_cast<uint32_t>(v.AsInt())); break;
    case GgufType::kI32: Put<int32_t>(out, static_cast<int32_t>(v.AsInt())); break;
    case GgufType::kU64: Put<uint64_t>(out, static_cast<uint64_t>(v.AsInt())); break;
    case GgufType::kI64: Put<int64_t>(out, v.AsInt()); break;
    case GgufType::kF32: Put<float>(out, static_cast<float>(v.AsDouble())); break;
    case GgufType::kF64: Put<double>(out, v.AsDouble()); break;
    case GgufType::kBool: Put<uint8_t>(out, std::get<bool>(v.scalar) ? 1 : 0); break;
    case GgufType::kString: PutString(out, v.AsString()); break;
    case GgufType::kArray:
      Put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
      Put<uint64_t>(out, v.array.size());
      for (const GgufValue& item : v.array) WriteValue(out, item);
      break;
  }
}

}  // namespace

GgufValue GgufValue::Array(GgufType elem, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = elem;
  v.array = std::move(items);
  return v;
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(scalar) || std::holds_alternative<int64_t>(scalar) ||
         std::holds_alternative<bool>(scalar);
}

int64_t GgufValue::AsInt() const {
  if (auto* u = std::get_if<uint64_t>(&scalar)) return static_cast<int64_t>(*u);
  if (auto* i = std::get_if<int64_t>(&scalar)) return *i;
  if (auto* b = std::get_if<bool>(&scalar)) return *b;
  if (auto* d = std::get_if<double>(&scalar)) return static_cast<int64_t>(*d);
  return 0;
}

double GgufValue::AsDouble() const {
  if (auto* d = std::get_if<double>(&scalar)) return *d;
  return static_cast<double>(AsInt());
}

namespace {

// A tensor's description in the header.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  uint32_t type;
  uint64_t offset;
};

core::Status ReadTensorInfos(Reader& r, std::vector<TensorInfo>* infos) {
  for (TensorInfo& info : *infos) {
    RADIXLM_RETURN_IF_ERROR(r.ReadString(&info.name));
    uint32_t n_dims = 0;
    RADIXLM_RETURN_IF_ERROR(r.Read(&n_dims));
    if (n_dims == 0 || n_dims > 4) return r.Error("tensor '" + info.name + "' has " + std::to_string(n_dims) + " dims");
    info.shape.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {  // GGUF lists dims innermost first
      uint64_t ne = 0;
      RADIXLM_RETURN_IF_ERROR(r.Read(&ne));
      if (ne == 0 || ne > (1ull << 40)) return r.Error("tensor '" + info.name + "' has dimension " + std::to_string(ne));
      info.shape[n_dims - 1 - d] = static_cast<int64_t>(ne);
    }
    RADIXLM_RETURN_IF_ERROR(r.Read(&info.type));
    RADIXLM_RETURN_IF_ERROR(r.Read(&info.offset));
  }
  return core::Status::Ok();
}

// A tensor's entry over the mapped data, its type, shape and bounds checked.
core::StatusOr<TensorEntry> EntryOf(const std::string& path, const TensorInfo& info, const core::MappedFile& file,
                                    uint64_t data_start, int64_t alignment) {
  TensorEntry e;
  e.name = info.name;
  e.shape = info.shape;
  e.file = path;
  if (!DTypeOfGgml(info.type, &e.dtype))
    return core::Unimplemented(path + ": tensor '" + info.name + "' has type " + GgmlTypeName(info.type) +
                               "; radixlm reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                               "Q5_K, Q6_K and MXFP4 GGUF tensors");
  if (e.shape.back() % core::BlockElems(e.dtype) != 0)
    return core::DataLoss(path + ": tensor '" + info.name + "' " + e.ShapeString() + " of type " + GgmlTypeName(info.type) +
                          " has rows that are not whole blocks of " + std::to_string(core::BlockElems(e.dtype)));
  if (!ShapeBytes(e.shape, e.dtype, &e.nbytes))
    return core::DataLoss(path + ": tensor '" + info.name + "' " + e.ShapeString() + " is implausibly large");
  if (info.offset % alignment != 0) return core::DataLoss(path + ": tensor '" + info.name + "' offset is not aligned");
  // Compared by subtraction: offset is untrusted and data_start + offset could wrap.
  if (data_start > file.size() || info.offset > file.size() - data_start || e.nbytes > file.size() - data_start - info.offset)
    return core::DataLoss(path + ": tensor '" + info.name + "' " + e.ShapeString() + " runs past the end of the file (truncated?)");
  e.data = file.data() + data_start + info.offset;
  return e;
}

using Span = std::tuple<uint64_t, uint64_t, std::string>;  // [begin, end) in the data, name

// Tensors may not share bytes: a type or offset changed to overlap a neighbour would read the
// neighbour's data as weights (llama.cpp's converter never writes that) ... nor leave bytes
// between them: every GGUF writer (llama.cpp's, gguf-py) lays the tensors out back to back,
// each padded to the alignment, and llama.cpp refuses an offset that is not the running sum. A
// gap, data before the first tensor or after the last, means a type, a shape or the tensor
// count was changed (the weights would be read from the wrong bytes).
core::Status CheckLayout(const std::string& path, std::vector<Span> spans, int64_t alignment, uint64_t data_bytes) {
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (std::get<0>(spans[i]) < std::get<1>(spans[i - 1]))
      return core::DataLoss(path + ": tensors '" + std::get<2>(spans[i - 1]) + "' and '" + std::get<2>(spans[i]) +
                            "' overlap in the file");
  auto padded = [&](uint64_t end) { return (end + alignment - 1) / alignment * alignment; };
  for (size_t i = 0; i < spans.size(); ++i) {
    const uint64_t expect = i == 0 ? 0 : padded(std::get<1>(spans[i - 1]));
    if (std::get<0>(spans[i]) != expect)
      return core::DataLoss(path + ": tensor '" + std::get<2>(spans[i]) + "' starts at " + std::to_string(std::get<0>(spans[i])) +
                            " in the data, not at " + std::to_string(expect) +
                            " (a tensor's type, shape or the tensor count does not match the file's bytes)");
  }
  if (!spans.empty() && data_bytes > padded(std::get<1>(spans.back())))
    return core::DataLoss(path + ": " + std::to_string(data_bytes - padded(std::get<1>(spans.back()))) +
                          " bytes after the last tensor's data (the tensor count or a tensor's type does not match the file)");
  return core::Status::Ok();
}

}  // namespace

core::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  auto mapped = core::MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  auto file = std::make_unique<core::MappedFile>(std::move(mapped).value());
  GgufFile g;
  g.path_ = path;
  g.tensors_ = std::make_unique<TensorStore>();
  Reader r(file->data(), file->size(), g.path_);
  uint32_t magic = 0;
  RADIXLM_RETURN_IF_ERROR(r.Read(&magic));
  if (magic != kMagic) return core::DataLoss(path + ": not a GGUF file (bad magic)");
  RADIXLM_RETURN_IF_ERROR(r.Read(&g.version_));
  if (g.version_ < 2 || g.version_ > 3)
    return core::Unimplemented(path + ": GGUF version " + std::to_string(g.version_) + " (radixlm reads 2 and 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  RADIXLM_RETURN_IF_ERROR(r.Read(&n_tensors));
  RADIXLM_RETURN_IF_ERROR(r.Read(&n_kv));
  // A metadata entry takes at least 13 bytes and a tensor description 32; counts the file
  // cannot hold are refused before anything is allocated for them.
  if (n_tensors > (1u << 20) || n_kv > (1u << 20) || n_kv > r.remaining() / 13 || n_tensors > r.remaining() / 32)
    return core::DataLoss(path + ": implausible header (" + std::to_string(n_tensors) + " tensors, " +
                          std::to_string(n_kv) + " metadata keys)");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    uint32_t type;
    RADIXLM_RETURN_IF_ERROR(r.ReadString(&key));
    RADIXLM_RETURN_IF_ERROR(r.Read(&type));
    GgufValue value;
    RADIXLM_RETURN_IF_ERROR(ReadValue(r, static_cast<GgufType>(type), &value, 0));
    g.metadata_[key] = std::move(value);
  }
  std::vector<TensorInfo> infos(n_tensors);
  RADIXLM_RETURN_IF_ERROR(ReadTensorInfos(r, &infos));
  const int64_t alignment = g.GetIntOr("general.alignment", 32);
  if (alignment <= 0 || (alignment & (alignment - 1)))
    return core::DataLoss(path + ": general.alignment " + std::to_string(alignment) + " is not a power of two");
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  std::vector<Span> spans;
  for (const TensorInfo& info : infos) {
    RADIXLM_ASSIGN_OR_RETURN(TensorEntry e, EntryOf(path, info, *file, data_start, alignment));
    spans.push_back({info.offset, info.offset + e.nbytes, info.name});
    RADIXLM_RETURN_IF_ERROR(g.tensors_->Add(std::move(e)));
  }
  RADIXLM_RETURN_IF_ERROR(CheckLayout(path, std::move(spans), alignment, file->size() - data_start));
  g.tensors_->AddFile(std::move(file));
  return g;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

core::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return core::NotFound(path_ + ": missing metadata key '" + key + "'");
  if (!v->is_integer()) return core::DataLoss(path_ + ": metadata '" + key + "' is not an integer");
  return v->AsInt();
}

core::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return core::NotFound(path_ + ": missing metadata key '" + key + "'");
  if (v->type != GgufType::kF32 && v->type != GgufType::kF64)
    return core::DataLoss(path_ + ": metadata '" + key + "' is not a float (F32 or F64)");
  return v->AsDouble();
}

core::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return core::NotFound(path_ + ": missing metadata key '" + key + "'");
  if (v->type != GgufType::kString) return core::DataLoss(path_ + ": metadata '" + key + "' is not a string");
  return v->AsString();
}

int64_t GgufFile::GetIntOr(const std::string& key, int64_t fallback) const {
  const GgufValue* v = Find(key);
  if (!v) return fallback;
  if (v->is_integer()) return v->AsInt();
  if (type_error_.empty()) type_error_ = path_ + ": metadata '" + key + "' is not an integer";
  return fallback;
}

bool GgufFile::GetBoolOr(const std::string& key, bool fallback) const {
  const GgufValue* v = Find(key);
  if (!v) return fallback;
  if (v->type == GgufType::kBool) return std::get<bool>(v->scalar);
  if (v->is_integer()) return v->AsInt() != 0;
  if (type_error_.empty()) type_error_ = path_ + ": metadata '" + key + "' is not a bool";
  return fallback;
}

double GgufFile::GetFloatOr(const std::string& key, double fallback) const {
  const GgufValue* v = Find(key);
  if (!v) return fallback;
  if (v->type == GgufType::kF32 || v->type == GgufType::kF64) return v->AsDouble();
  if (type_error_.empty()) type_error_ = path_ + ": metadata '" + key + "' is not a float (F32 or F64)";
  return fallback;
}

core::Status GgufFile::TypeError() const {
  return type_error_.empty() ? core::Status::Ok() : core::DataLoss(type_error_);
}

void GgufWriter::AddTensor(const std::string& name, core::DType dtype, std::vector<int64_t> shape,
                           const void* data) {
  tensors_.push_back({name, dtype, std::move(shape), data});
}

core::Status GgufWriter::Write(const std::string& path) const {
  constexpr uint64_t kAlign = 32;
  std::string head;
  Put<uint32_t>(head, kMagic);
  Put<uint32_t>(head, 3);
  Put<uint64_t>(head, tensors_.size());
  Put<uint64_t>(head, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    PutString(head, key);
    Put<uint32_t>(head, static_cast<uint32_t>(value.type));
    WriteValue(head, value);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Pending& t : tensors_) {
    PutString(head, t.name);
    Put<uint32_t>(head, t.shape.size());
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) Put<uint64_t>(head, *it);
    Put<uint32_t>(head, GgmlOfDType(t.dtype));
    Put<uint64_t>(head, offset);
    offsets.push_back(offset);
    size_t bytes = 0;
    RADIXLM_CHECK(ShapeBytes(t.shape, t.dtype, &bytes));
    offset += (bytes + kAlign - 1) / kAlign * kAlign;
  }
  head.resize((head.size() + kAlign - 1) / kAlign * kAlign, '\0');
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return core::IoError(path + ": cannot write");
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const char zeros[kAlign] = {};
  for (const Pending& t : tensors_) {
    size_t bytes = 0;
    RADIXLM_CHECK(ShapeBytes(t.shape, t.dtype, &bytes));
    ok = ok && std::fwrite(t.data, 1, bytes, f) == bytes;
    const size_t pad = (kAlign - bytes % kAlign) % kAlign;
    ok = ok && std::fwrite(zeros, 1, pad, f) == pad;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) return core::IoError(path + ": write failed");
  return core::Status::Ok();
}

}  // namespace radixlm::formats
