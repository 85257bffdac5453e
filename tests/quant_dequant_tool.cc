// Test helper for tests/reference/quant_test.py: dequantises raw GGML blocks with radixlm's
// core::DequantizeRow. Usage: quant_dequant_tool TYPE IN_BLOCKS OUT_F32 N_ELEMENTS
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"

int main(int argc, char** argv) {
  using namespace radixlm;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TYPE IN OUT N\n", argv[0]);
    return 2;
  }
  core::DType t;
  if (!core::ParseDType(argv[1], &t) || !core::IsQuantized(t)) {
    std::fprintf(stderr, "not a quantised type: %s\n", argv[1]);
    return 2;
  }
  const int64_t n = std::stoll(argv[4]);
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (n % core::BlockElems(t) != 0 || raw.size() != core::RowBytes(t, n)) {
    std::fprintf(stderr, "%zu bytes do not hold %lld elements of %s\n", raw.size(), static_cast<long long>(n), argv[1]);
    return 2;
  }
  std::vector<float> y(n);
  core::ConvertToF32(t, raw.data(), y.data(), n);
  std::ofstream out(argv[3], std::ios::binary);
  out.write(reinterpret_cast<const char*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
  return out ? 0 : 1;
}
