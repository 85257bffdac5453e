// UTF-8 helpers for the tokenizers: code point iteration, the GPT-2 byte <-> unicode table,
// NFC normalisation (utf8proc), and the complete-character prefix for streaming decode.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace radixlm::tokenizer {

// Decodes the code point at text[*pos] and advances *pos; invalid bytes decode as themselves
// (one byte, code point 0xDC00 + byte) so iteration always advances.
uint32_t NextCodepoint(std::string_view text, size_t* pos);
void AppendUtf8(uint32_t cp, std::string* out);

// GPT-2's reversible map from the 256 byte values to printable code points.
const std::array<uint32_t, 256>& ByteToCodepoint();
// Inverse of ByteToCodepoint; -1 for code points that are not in the table.
int CodepointToByte(uint32_t cp);

// Unicode NFC (utf8proc). ASCII-and-Latin-1-only text (no byte >= 0xCC) is returned as is:
// every code point below U+0300 is NFC-stable and nothing below it composes.
std::string NormalizeNfc(std::string_view text);

// Length of the longest prefix of `bytes` that does not end inside an incomplete UTF-8
// sequence (invalid bytes count as complete, so they are not held back forever).
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace radixlm::tokenizer
