// safetensors reader (formats/safetensors.h): the input is a model.safetensors file, read as a
// model folder of one file (ReadSafetensorsFolder, which calls ReadSafetensorsFile). A file that
// reads must have every tensor's bytes readable and write back with WriteSafetensorsFile to a
// file that reads to the same tensors.
#include <cstring>
#include <filesystem>
#include <string>

#include "formats/safetensors.h"
#include "fuzz_common.h"

namespace {

using radixlm::formats::TensorStore;

void RoundTrip(const TensorStore& store) {
  std::vector<radixlm::formats::SafetensorsTensor> tensors;
  for (const auto& [name, e] : store.entries()) tensors.push_back({name, e.dtype, e.shape, e.data});
  const std::string path = radixlm::fuzz::ScratchDir() + "/rewritten.safetensors";
  if (auto st = radixlm::formats::WriteSafetensorsFile(path, tensors); !st.ok())
    radixlm::fuzz::Fail("WriteSafetensorsFile: " + st.ToString());
  TensorStore again;
  if (auto st = radixlm::formats::ReadSafetensorsFile(path, &again); !st.ok())
    radixlm::fuzz::Fail("a rewritten safetensors file does not read: " + st.ToString());
  if (again.entries().size() != store.entries().size()) radixlm::fuzz::Fail("tensor count changed");
  for (const auto& [name, e] : store.entries()) {
    const auto* f = again.Find(name);
    if (!f || f->dtype != e.dtype || f->shape != e.shape || f->nbytes != e.nbytes ||
        (e.nbytes && std::memcmp(f->data, e.data, e.nbytes) != 0))
      radixlm::fuzz::Fail("tensor '" + name + "' changed in a write and read");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::filesystem::create_directories(radixlm::fuzz::ScratchDir() + "/model");
    return radixlm::fuzz::ScratchDir() + "/model";
  }();
  radixlm::fuzz::WriteScratch("model/model.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  auto store = radixlm::formats::ReadSafetensorsFolder(dir);
  if (!store.ok()) return 0;
  uint64_t sum = 0;
  for (const auto& [name, e] : (*store)->entries()) {
    if (e.nbytes > size) radixlm::fuzz::Fail("tensor '" + name + "' is larger than the file");
    const auto* p = static_cast<const uint8_t*>(e.data);
    for (size_t i = 0; i < e.nbytes; ++i) sum = sum * 31 + p[i];
  }
  static volatile uint64_t sink;
  sink = sink + sum;  // keeps the reads
  RoundTrip(**store);
  return 0;
}
