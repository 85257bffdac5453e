// Simulator traces (sim/trace.h): the input is a JSONL trace file, read to the end or the first
// error by TraceReader, with the format detected from the first line and then forced to each
// schema (Marconi's token ids; Mooncake's block hashes, at 512 and at a small block size).
// Requests read must come in arrival order with finite timestamps (the reader's promise).
#include <cmath>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "sim/trace.h"

namespace {

using radixlm::sim::TraceFormat;

void ReadAll(const std::string& path, TraceFormat format, int block_tokens) {
  auto reader = radixlm::sim::TraceReader::Open(path, format, block_tokens);
  if (!reader.ok()) return;
  radixlm::sim::TraceRequest r;
  double last = -INFINITY;
  for (int n = 0; n < 100000; ++n) {
    auto more = reader->Next(&r);
    if (!more.ok() || !*more) return;
    if (!std::isfinite(r.ts) || r.ts < last) radixlm::fuzz::Fail("a request out of arrival order or at a non-finite time");
    last = r.ts;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      radixlm::fuzz::WriteScratch("trace.jsonl", std::string_view(reinterpret_cast<const char*>(data), size));
  ReadAll(path, TraceFormat::kAuto, 512);
  ReadAll(path, TraceFormat::kMarconi, 512);
  ReadAll(path, TraceFormat::kMooncake, 512);
  ReadAll(path, TraceFormat::kMooncake, 3);
  return 0;
}
