// Regex pre-tokenizer: splits text into the pieces BPE runs on, with the split pattern from
// tokenizer.json (or a named preset for GGUF: the PreTokenizerPreset table below). Matches and the text
// between matches both become pieces (Hugging Face's Split with behavior "Isolated").
//
// Engine: PCRE2 with JIT, UTF and Unicode properties; \s and \S are rewritten to
// ECMAScript's whitespace set before compiling, because the reference tokenizers are the
// JavaScript ones (JS \s includes U+FEFF and excludes U+0085; PCRE2's is the other way).
// Thread-safety: Split may be called concurrently (match data is per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace radixlm::tokenizer {

inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Qwen3.5 / 3.6: letter runs take combining marks (\p{M}), which the punctuation run excludes.
inline constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o's o200k (gpt-oss, Llama 4): case-aware letter runs that take combining marks and an
// English contraction, numbers in threes, punctuation runs that take trailing newlines or '/'.
inline constexpr const char* kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The pre-tokenizers GGUF names (tokenizer.ggml.pre): one row each, the table that both the GGUF
// reader (by name or alias) and the tokenizer.json reader (by pattern) consult, and the GGUF
// writer names. `nfc`: NFC-normalise before splitting when read from a GGUF; llama.cpp normalises
// nothing, except that radixlm keeps Qwen2's NFC (its tokenizer.json's normaliser) for the GGUFs
// it has always read so. A new pre-tokenizer is one row here.
struct PreTokenizerPreset {
  const char* name;        // what radixlm writes to tokenizer.ggml.pre
  const char* aliases[4];  // other names GGUF files use for it (nullptr-terminated)
  const char* pattern;     // the split regex (Hugging Face's form)
  bool nfc;
  bool ignore_merges;      // a word that is itself a token is not merged (Llama 3)
};
// By tokenizer.ggml.pre name or alias; nullptr if unknown.
const PreTokenizerPreset* FindPreTokenizer(std::string_view gguf_name);
// By split pattern (a tokenizer.json's); nullptr if no row has it.
const PreTokenizerPreset* PreTokenizerOfPattern(std::string_view pattern);
// "qwen2, qwen35, llama-bpe, gpt-2": for error messages.
std::string KnownPreTokenizers();

class RegexSplitter {
 public:
  static core::StatusOr<std::unique_ptr<RegexSplitter>> Compile(const std::string& pattern);
  ~RegexSplitter();
  // Appends the pieces of `text` (views into it) to `out`.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  RegexSplitter() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Rewrites \s and \S (inside and outside character classes) to ECMAScript's definition.
std::string WithEcmaScriptWhitespace(const std::string& pattern);

}  // namespace radixlm::tokenizer
