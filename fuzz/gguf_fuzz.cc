// GGUF reader (formats/gguf.h): the input is a .gguf file. A file that opens must (1) have every
// tensor's bytes readable, (2) write back with GgufWriter and reopen to the same metadata and
// tensors, and (3) give its tokenizer metadata to Tokenizer::FromGguf without crashing (GGUF
// files carry the tokenizer; a model's loader reads both).
#include <cmath>
#include <cstring>
#include <string>

#include "formats/gguf.h"
#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

namespace {

using radixlm::formats::GgufFile;
using radixlm::formats::GgufType;
using radixlm::formats::GgufValue;

bool SameValue(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (a.type == GgufType::kArray) {
    if (a.array_type != b.array_type || a.array.size() != b.array.size()) return false;
    for (size_t i = 0; i < a.array.size(); ++i)
      if (!SameValue(a.array[i], b.array[i])) return false;
    return true;
  }
  if (a.type == GgufType::kF32 || a.type == GgufType::kF64) {
    const double x = std::get<double>(a.scalar), y = std::get<double>(b.scalar);
    return x == y || (std::isnan(x) && std::isnan(y));
  }
  return a.scalar == b.scalar;
}

uint64_t Checksum(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void RoundTrip(const GgufFile& g) {
  radixlm::formats::GgufWriter w;
  // The writer always aligns to 32 bytes: a file's own general.alignment is not carried over.
  for (const auto& [key, value] : g.metadata())
    if (key != "general.alignment") w.Set(key, value);
  // GgufWriter writes F32, F16 and BF16 tensors (its REQUIRES); the quantised ones stay out.
  auto writable = [](radixlm::core::DType d) {
    return d == radixlm::core::DType::kF32 || d == radixlm::core::DType::kF16 || d == radixlm::core::DType::kBF16;
  };
  size_t written = 0;
  for (const auto& [name, e] : g.tensors().entries())
    if (writable(e.dtype)) w.AddTensor(name, e.dtype, e.shape, e.data), ++written;
  const std::string path = radixlm::fuzz::ScratchDir() + "/rewritten.gguf";
  if (auto st = w.Write(path); !st.ok()) radixlm::fuzz::Fail("GgufWriter::Write: " + st.ToString());
  auto again = GgufFile::Open(path);
  if (!again.ok()) radixlm::fuzz::Fail("a rewritten GGUF does not reopen: " + again.status().ToString());
  for (const auto& [key, value] : g.metadata()) {
    if (key == "general.alignment") continue;
    const GgufValue* v = again->Find(key);
    if (!v || !SameValue(value, *v)) radixlm::fuzz::Fail("metadata '" + key + "' changed in a write and reopen");
  }
  if (again->tensors().entries().size() != written) radixlm::fuzz::Fail("tensor count changed");
  for (const auto& [name, e] : g.tensors().entries()) {
    if (!writable(e.dtype)) continue;
    const auto* f = again->tensors().Find(name);
    if (!f || f->dtype != e.dtype || f->shape != e.shape || f->nbytes != e.nbytes ||
        std::memcmp(f->data, e.data, e.nbytes) != 0)
      radixlm::fuzz::Fail("tensor '" + name + "' changed in a write and reopen");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      radixlm::fuzz::WriteScratch("input.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  auto g = GgufFile::Open(path);
  if (!g.ok()) return 0;
  // Every tensor's bytes lie in the mapping (the mapping is not ASan-poisoned past the file's
  // end, so reading them all is what catches an offset that escapes it: a fault past the page).
  uint64_t sum = 0;
  for (const auto& [name, e] : g->tensors().entries()) {
    if (e.nbytes > size) radixlm::fuzz::Fail("tensor '" + name + "' is larger than the file");
    sum += Checksum(e.data, e.nbytes);
  }
  (void)g->GetIntOr("general.alignment", 32);
  (void)g->GetString("general.architecture");
  (void)g->GetFloatOr("general.rope_freq_base", 0);
  (void)g->GetBoolOr("tokenizer.ggml.add_bos_token", false);
  RoundTrip(*g);
  auto tok = radixlm::tokenizer::Tokenizer::FromGguf(*g);
  if (tok.ok()) {
    const std::vector<int32_t> ids = (*tok)->Encode("Hello, world! <|im_start|> caf\xc3\xa9 \xff 123", true);
    (void)(*tok)->Decode(ids, /*skip_special=*/true);
  }
  static volatile uint64_t sink;
  sink = sink + sum;  // keeps the reads
  return 0;
}
