// Regex pre-tokenizer: splits text into the pieces BPE runs on, with the split pattern from
// tokenizer.json (or a named preset for GGUF: qwen2, llama3, gpt2). Matches and the text
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
