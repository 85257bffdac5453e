// Python's str semantics over UTF-8 that templates observe: case mapping, the is*() classes,
// line splitting and which characters repr() escapes. Character data from utf8proc (Debian's
// libutf8proc, the Unicode database the tokenizer uses too), so 'ï'.upper() is 'Ï' as in Python.
//
// Contract: inputs are UTF-8; a byte that does not start a valid sequence is its own
// "character" (uncased, not alphanumeric, not printable) and passes through unchanged.
// Differences from CPython: the Unicode version is utf8proc's (15 in Debian 12; CPython 3.11
// has 14); case mapping is the simple one plus the two special cases templates meet (ß upper →
// SS, İ lower → i̇), not the whole SpecialCasing table; the classes use general categories
// (Python's isdigit also counts some No characters, its islower the Other_Lowercase property).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace radixlm::jinja::unicode {

std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Capitalize(std::string_view s);  // the first character titlecased, the rest lower
std::string Title(std::string_view s);       // a cased character after an uncased one starts a word

// str.isalpha / isalnum / isdigit / isspace: non-empty and every character in the class.
enum class Class { kAlpha, kAlnum, kDigit, kSpace };
bool All(std::string_view s, Class c);
// str.islower / isupper: some cased character and none of the other case (titlecase is neither).
bool IsLower(std::string_view s);
bool IsUpper(std::string_view s);
// Python's \w runs (letters, digits, '_'): jinja2's wordcount.
size_t WordCount(std::string_view s);
// Python's str.isprintable() of one code point (repr escapes the others).
bool Printable(uint32_t cp);
// Decodes the code point at s[*i] and advances *i; an invalid byte decodes as 0xFFFFFFFF.
uint32_t Next(std::string_view s, size_t* i);
// str.splitlines(): \n, \r, \r\n, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029 end a line.
bool IsLineBreak(uint32_t cp);

}  // namespace radixlm::jinja::unicode
