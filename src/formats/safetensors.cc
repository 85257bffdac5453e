#include "formats/safetensors.h"

#include "core/json_text.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace radixlm::formats {
namespace {

using nlohmann::json;

bool DTypeFromName(const std::string& s, core::DType* out) {
  if (s == "F32") { *out = core::DType::kF32; return true; }
  if (s == "F16") { *out = core::DType::kF16; return true; }
  if (s == "BF16") { *out = core::DType::kBF16; return true; }
  return false;
}

const char* DTypeToName(core::DType t) {
  switch (t) {
    case core::DType::kF32: return "F32";
    case core::DType::kF16: return "F16";
    case core::DType::kBF16: return "BF16";
    case core::DType::kI32: return "I32";
    default: break;  // the GGML block types have no safetensors name
  }
  return "?";
}

}  // namespace

core::Status ReadSafetensorsFile(const std::string& path, TensorStore* store) {
  auto mapped = core::MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  auto file = std::make_unique<core::MappedFile>(std::move(mapped).value());
  if (file->size() < 8) return core::DataLoss(path + ": too short for a safetensors header");
  uint64_t header_len;
  std::memcpy(&header_len, file->data(), 8);
  if (header_len > file->size() - 8 || header_len > (100u << 20))
    return core::DataLoss(path + ": header length " + std::to_string(header_len) + " exceeds the file");
  json header = json::parse(file->data() + 8, file->data() + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return core::DataLoss(path + ": header is not valid JSON");
  const uint8_t* data = file->data() + 8 + header_len;
  const size_t data_size = file->size() - 8 - header_len;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const auto bad = [&](const std::string& what) {
      return core::DataLoss(path + ": tensor '" + name + "': " + what);
    };
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      return bad("entry lacks dtype, shape or data_offsets");
    TensorEntry e;
    e.name = name;
    e.file = path;
    if (!info["dtype"].is_string() || !DTypeFromName(info["dtype"].get<std::string>(), &e.dtype))
      return bad("unsupported dtype " + (info["dtype"].is_string() ? core::JsonText(info["dtype"]) : std::string("of type ") + info["dtype"].type_name()) +
                 " (radixlm reads F32, F16, BF16)");
    if (!info["shape"].is_array()) return bad("shape is not a list");
    for (const auto& d : info["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return bad(std::string("bad dimension (") + (d.is_number() ? core::JsonText(d) : d.type_name()) + ")");
      e.shape.push_back(d.get<int64_t>());
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad("data_offsets is not [begin, end]");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (!ShapeBytes(e.shape, e.dtype, &e.nbytes)) return bad("shape " + e.ShapeString() + " is implausibly large");
    if (en < b || en - b != e.nbytes)
      return bad("data_offsets span " + std::to_string(en - b) + " bytes, shape " + e.ShapeString() +
                 " needs " + std::to_string(e.nbytes));
    if (en > data_size) return bad("data runs past the end of the file (truncated?)");
    e.data = data + b;
    RADIXLM_RETURN_IF_ERROR(store->Add(std::move(e)));
  }
  store->AddFile(std::move(file));
  return core::Status::Ok();
}

core::StatusOr<std::unique_ptr<TensorStore>> ReadSafetensorsFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  auto store = std::make_unique<TensorStore>();
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return core::DataLoss(index.string() + ": not a safetensors index (no weight_map)");
    std::set<std::string> shards;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) return core::DataLoss(index.string() + ": weight_map['" + name + "'] is not a file name");
      shards.insert(file.get<std::string>());
    }
    for (const std::string& shard : shards) {
      if (shard.find('/') != std::string::npos)
        return core::DataLoss(index.string() + ": shard '" + shard + "' is outside the folder");
      RADIXLM_RETURN_IF_ERROR(ReadSafetensorsFile((fs::path(dir) / shard).string(), store.get()));
    }
    for (auto& [name, file] : j["weight_map"].items())
      if (!store->Find(name))
        return core::DataLoss(index.string() + ": tensor '" + name + "' is missing from " + file.get<std::string>());
    return store;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(single)) return core::NotFound(dir + ": no model.safetensors or model.safetensors.index.json");
  RADIXLM_RETURN_IF_ERROR(ReadSafetensorsFile(single.string(), store.get()));
  return store;
}

core::Status WriteSafetensorsFile(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const uint64_t bytes = n * core::DTypeSize(t.dtype);
    header[t.name] = {{"dtype", DTypeToName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = core::JsonText(header);
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return core::IoError(path + ": cannot write");
  const uint64_t len = h.size();
  bool ok = std::fwrite(&len, 8, 1, f) == 1 && std::fwrite(h.data(), 1, h.size(), f) == h.size();
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const size_t bytes = n * core::DTypeSize(t.dtype);
    ok = ok && std::fwrite(t.data, 1, bytes, f) == bytes;
  }
  ok = (std::fclose(f) == 0) && ok;
  return ok ? core::Status::Ok() : core::IoError(path + ": write failed");
}

}  // namespace radixlm::formats
