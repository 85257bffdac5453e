// Text <-> token ids, exactly as the model was trained: byte-level BPE (GPT-2, Llama 3,
// Qwen2/2.5/3/3.5, GPT-4o's o200k for gpt-oss) and SentencePiece-style BPE with byte fallback
// (Llama 2, Gemma 3, Gemma 4's GGUF model "gemma4"), loaded from a
// Hugging Face tokenizer.json (+ tokenizer_config.json), from GGUF metadata (tokenizer.ggml.*),
// or from GPT-2's encoder.json + vocab.bpe.
//
// Encode: the text is first cut at added tokens (leftmost-longest; they are never split),
// then each other section is normalised (NFC for Qwen; "▁" prefix and spaces for Llama 2,
// spaces only for Gemma), pre-tokenized by the model's regex (byte-level models; Gemma 4's
// GGUF cuts newline runs off, as llama.cpp does) and merged by BPE. The definitions followed
// are Hugging Face tokenizers' (and transformers.js, the reference in the tests); where
// llama.cpp differs on a GGUF (o200k's combining marks), the model's own tokenizer wins.
// Decode: token bytes concatenated; StreamDecoder emits only complete UTF-8 characters.
// Thread-safety: Encode/Decode are const and may run concurrently (the word cache is sharded
// behind mutexes).
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace radixlm::formats {
class GgufFile;
struct GgufValue;
}

namespace radixlm::tokenizer {

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

enum class TokenizerKind { kByteLevelBpe, kSentencePieceBpe };

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;  // skipped by Decode(skip_special = true)
};

class Tokenizer {
 public:
  // tokenizer.json, with tokenizer_config.json read from the same folder if present.
  static core::StatusOr<std::unique_ptr<Tokenizer>> FromHfJson(const std::string& tokenizer_json);
  static core::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const formats::GgufFile& gguf);
  static core::StatusOr<std::unique_ptr<Tokenizer>> FromGpt2Files(const std::string& encoder_json,
                                                                  const std::string& vocab_bpe);
  // A bundled tokenizer (qwen3, llama3, llama2, gpt4o, gemma3, gpt2) from the set-up's data folder.
  static core::StatusOr<std::unique_ptr<Tokenizer>> Named(const std::string& name, const std::string& data_dir);
  static std::vector<std::string> NamedFamilies();

  // add_special: the model's BOS/EOS rules (e.g. Llama 2 prepends <s>).
  std::vector<int32_t> Encode(std::string_view text, bool add_special = false) const;
  // The same, except that no added token is matched in the `literal` byte ranges (users' chat
  // content: "<|im_start|>" typed there is text, so a user cannot forge a turn boundary).
  // Outside them, and for text without added-token strings, the ids are Encode(text)'s.
  // REQUIRES: ranges sorted, disjoint, within text.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, std::span<const TextRange> literal) const;
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // What Decode(Encode(text)) returns: the text after the tokenizer's lossy normalisation
  // (NFC for Qwen; for SentencePiece, the "▁" prefixed to every section between added tokens
  // is decoded as a space, except at the very start), invalid UTF-8 replaced by U+FFFD.
  std::string RoundTripForm(std::string_view text) const;

  TokenizerKind kind() const { return kind_; }
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  // -1 when absent.
  int32_t TokenId(std::string_view piece) const;
  bool IsSpecial(int32_t id) const;
  const std::string& TokenBytes(int32_t id) const { return token_bytes_.at(id); }
  const std::string& chat_template() const { return chat_template_; }
  const std::string& name() const { return name_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // The tokenizer as GGUF metadata (tokenizer.ggml.*, llama.cpp's keys) for a model whose
  // embedding has `vocab_size` rows: ids the tokenizer does not use become unused "[PADn]"
  // tokens. Byte-level BPE only (model "gpt2", with its pre-tokenizer name); a SentencePiece
  // tokenizer loaded without scores cannot be written back.
  core::StatusOr<std::vector<std::pair<std::string, formats::GgufValue>>> GgufMetadata(int64_t vocab_size) const;

 private:
  friend class TokenizerBuilder;
  friend class StreamDecoder;
  Tokenizer() = default;
  // Calls on_added(token) for each added token found (leftmost-longest, none overlapping a
  // `literal` range) and on_text(section) for the text between them, in order.
  template <typename OnAdded, typename OnText>
  void ForEachSection(std::string_view text, std::span<const TextRange> literal, OnAdded on_added, OnText on_text) const;
  void EncodeSection(std::string_view section, std::vector<int32_t>* out) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;
  void BuildAddedIndex();

  std::string name_;
  TokenizerKind kind_ = TokenizerKind::kByteLevelBpe;
  std::vector<std::string> token_bytes_;                // id -> raw bytes it stands for
  std::unordered_map<std::string, int32_t> piece_to_id_;  // vocabulary as written in the file
  std::array<int32_t, 256> byte_token_{};               // byte -> its single-byte token
  BpeMerges merges_;
  std::unique_ptr<RegexSplitter> splitter_;             // byte-level only
  bool nfc_ = false;                                    // NFC normaliser (Qwen)
  bool ignore_merges_ = false;                          // whole word in vocab -> one token (Llama 3)
  bool spm_prefix_space_ = true;                        // SentencePiece: prepend "▁" to sections
  bool newline_runs_ = false;                           // SentencePiece: newline runs are words of their own (Gemma 4)
  bool force_bos_ = false;                              // BOS added whatever the file says (Gemma 4, as llama.cpp)
  std::vector<AddedToken> added_;
  std::vector<char> is_special_;                        // [vocab]
  std::array<std::vector<int32_t>, 256> added_by_first_byte_;  // indices into added_, longest first
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::string chat_template_;
  std::vector<std::string> merge_list_;  // byte-level merges "a b" in rank order (for export)
  std::string pre_name_;                 // llama.cpp's pre-tokenizer name: qwen2, llama-bpe, gpt-2

  // Word -> ids cache for byte-level BPE (words repeat heavily in real text).
  static constexpr int kCacheShards = 16;
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<CacheShard, kCacheShards> cache_;
};

// Incremental detokenizer for streaming: Push returns only text that ends on a complete
// UTF-8 character; the rest is held until the next token completes it (or Finish).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& t, bool skip_special = true) : t_(t), skip_special_(skip_special) {}
  std::string Push(int32_t id);
  std::string Finish();

 private:
  const Tokenizer& t_;
  bool skip_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace radixlm::tokenizer
