#include "tokenizer/unicode.h"

#include "core/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

namespace radixlm::tokenizer {

uint32_t NextCodepoint(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t i = *pos, n = s.size();
  const unsigned char c = p[i];
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > n) {
    *pos = i + 1;
    return 0xDC00 + c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) {
      *pos = i + 1;
      return 0xDC00 + c;
    }
    cp = (cp << 6) | (p[i + k] & 0x3F);
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) { core::AppendUtf8(cp, out); }

const std::array<uint32_t, 256>& ByteToCodepoint() {
  // bytes_to_unicode() of GPT-2's encoder.py: printable Latin-1 bytes map to themselves, the
  // rest to 256, 257, ... in byte order.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int CodepointToByte(uint32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(324, -1);
    for (int b = 0; b < 256; ++b) inv[ByteToCodepoint()[b]] = b;
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

std::string NormalizeNfc(std::string_view text) {
  bool needs = false;
  for (unsigned char c : text)
    if (c >= 0xCC) { needs = true; break; }
  if (!needs) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return std::string(text);  // invalid UTF-8: leave it to byte-level encoding
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for the start of a sequence that is not finished yet.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return len > static_cast<int>(back) ? n - back : n;
  }
  return n;
}

}  // namespace radixlm::tokenizer
