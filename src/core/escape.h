// The backslash escapes of the whitespace controls that C, Python, JSON and GBNF all spell
// alike, shared by the Jinja engine (repr of a string) and the grammar module (GBNF text).
#pragma once

#include <cstdint>

namespace radixlm::core {

// "\\n", "\\r" or "\\t" for a newline, carriage return or tab; nullptr for any other code point.
inline const char* ShortEscape(uint32_t cp) {
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

}  // namespace radixlm::core
