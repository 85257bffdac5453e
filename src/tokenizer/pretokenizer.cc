#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace radixlm::tokenizer {
namespace {

constexpr const char* kEcmaSpaces =
    R"(\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF})";

constexpr PreTokenizerPreset kPreTokenizers[] = {
    {"qwen2", {"deepseek-r1-qwen", nullptr}, kQwen2Pattern, true, false},
    {"qwen35", {nullptr}, kQwen35Pattern, false, false},
    // llama.cpp reads LFM2's "lfm2" as Llama 3's (llama-vocab.cpp: LLAMA_VOCAB_PRE_TYPE_LLAMA3).
    {"llama-bpe", {"llama3", "lfm2", nullptr}, kLlama3Pattern, false, true},
    {"gpt-2", {"default", "gpt2", nullptr}, kGpt2Pattern, false, false},
    // llama.cpp reads these four names as one (LLAMA_VOCAB_PRE_TYPE_GPT4O); gpt-oss writes "gpt-4o".
    {"gpt-4o", {"llama4", "kanana2", "talkie", nullptr}, kGpt4oPattern, false, false},
};

}  // namespace

const PreTokenizerPreset* FindPreTokenizer(std::string_view gguf_name) {
  for (const PreTokenizerPreset& p : kPreTokenizers) {
    if (gguf_name == p.name) return &p;
    for (const char* const* a = p.aliases; *a; ++a)
      if (gguf_name == *a) return &p;
  }
  return nullptr;
}

const PreTokenizerPreset* PreTokenizerOfPattern(std::string_view pattern) {
  for (const PreTokenizerPreset& p : kPreTokenizers)
    if (pattern == p.pattern) return &p;
  return nullptr;
}

std::string KnownPreTokenizers() {
  std::string out;
  for (const PreTokenizerPreset& p : kPreTokenizers) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::string WithEcmaScriptWhitespace(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kEcmaSpaces) : "[" + std::string(kEcmaSpaces) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kEcmaSpaces) + "]";
      } else {
        out += c;
        out += n;  // other escapes (including \S inside a class, unused by tokenizers) pass through
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

core::StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Compile(const std::string& pattern) {
  std::unique_ptr<RegexSplitter> r(new RegexSplitter);
  r->pattern_ = pattern;
  const std::string rewritten = WithEcmaScriptWhitespace(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.c_str()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return core::InvalidArgument("pre-tokenizer pattern does not compile at offset " + std::to_string(offset) +
                                 ": " + reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  r->code_ = code;
  return r;
}

RegexSplitter::~RegexSplitter() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t pos = 0, last = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos < text.size()) {
    // Callers pass valid UTF-8 (invalid input was checked once, up front).
    const int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[0] > last) out->push_back(text.substr(last, ov[0] - last));
    if (ov[1] == ov[0]) {  // empty match: step one code point
      size_t next = ov[0] + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      out->push_back(text.substr(ov[0], next - ov[0]));
      pos = last = next;
      continue;
    }
    out->push_back(text.substr(ov[0], ov[1] - ov[0]));
    pos = last = ov[1];
  }
  if (last < text.size()) out->push_back(text.substr(last));
  pcre2_match_data_free(md);
}

}  // namespace radixlm::tokenizer
