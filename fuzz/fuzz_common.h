// What the fuzz targets share: a scratch folder for the entry points that take a path (GGUF,
// safetensors, tokenizer.json and traces are read from files, memory-mapped or streamed), and a
// small real tokenizer, loaded through Tokenizer::FromHfJson, for the targets whose parsers need
// one (chat prompts and scoring requests are tokenized while they are checked).
// One process runs one input at a time (libFuzzer), so the scratch files are reused per input.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace radixlm::fuzz {

// A folder of this process's own (every input is written to a file), removed at exit: inside
// $RADIXLM_FUZZ_SCRATCH when set (scripts/fuzz.sh makes one per run and removes it, since a
// crashed or fork-mode process never gets to exit), else on tmpfs when there is one, else in
// $TMPDIR.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors.
  static const std::string* dir = [] {
    const char* env = std::getenv("RADIXLM_FUZZ_SCRATCH");
    std::string base = env && *env ? env : "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    auto* path = new std::string(base + "/radixlm-fuzz-XXXXXX");
    if (!::mkdtemp(path->data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    return path;
  }();
  static const bool cleanup = std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(*dir, ec);
  }) == 0;
  (void)cleanup;
  return *dir;
}

// Writes bytes to ScratchDir()/name (replacing it) and returns the path.
inline std::string WriteScratch(const std::string& name, std::string_view bytes) {
  const std::string path = ScratchDir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

inline void RemoveScratch(const std::string& name) { std::remove((ScratchDir() + "/" + name).c_str()); }

// A byte-level BPE tokenizer.json with the 256 byte tokens, a few merges (so "yes", "no" and
// "hello" are single tokens, as the reranker format needs) and ChatML's special tokens.
// fuzz/make_seeds.py writes the same file as a seed of the tokenizer_json target.
inline std::string MinimalTokenizerJson() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string piece;
    tokenizer::AppendUtf8(tokenizer::ByteToCodepoint()[b], &piece);
    vocab[piece] = b;
  }
  const char* merged[] = {"ye", "yes", "no", "he", "ll", "hell", "hello"};
  for (int i = 0; i < 7; ++i) vocab[merged[i]] = 256 + i;
  json merges = {"y e", "ye s", "n o", "h e", "l l", "he ll", "hell o"};
  json added = json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", 263 + i}, {"content", specials[i]}, {"special", true}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
  json j = {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
            {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}}}};
  return j.dump(1);
}

// MinimalTokenizerJson() loaded by the real loader, once per process.
inline const tokenizer::Tokenizer& MinimalTokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tok = [] {
    std::filesystem::create_directories(ScratchDir() + "/minimal");
    auto t = tokenizer::Tokenizer::FromHfJson(WriteScratch("minimal/tokenizer.json", MinimalTokenizerJson()));
    if (!t.ok()) {
      std::fprintf(stderr, "minimal tokenizer: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tok;
}

// A failed invariant of the code under test: reported as a crash, with what was wrong.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what.c_str());
  std::abort();
}

}  // namespace radixlm::fuzz
