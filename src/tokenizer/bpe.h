// The BPE merge loop shared by byte-level BPE (GPT-2, Llama 3, Qwen) and SentencePiece-style
// BPE (Llama 2): given a word as a sequence of symbol ids, repeatedly merge the adjacent pair
// of lowest rank (ties: leftmost), as Hugging Face tokenizers' Word::merge_all and llama.cpp's
// llm_tokenizer_spm do. Ranks come from a merges list (byte-level) or from the scores of the
// merged pieces (SentencePiece).
// Complexity: O(n log n) per word with a binary heap; words are short, except SentencePiece
// segments, which are whole texts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace radixlm::tokenizer {

class BpeMerges {
 public:
  // Registers left + right -> merged with priority `rank` (lower merges first). A pair
  // registered twice keeps the lower rank.
  void Add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  size_t size() const { return map_.size(); }
  // Merges `symbols` in place.
  void Apply(std::vector<int32_t>* symbols) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t l, int32_t r) { return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r); }
  const Merge* Find(int32_t l, int32_t r) const {
    auto it = map_.find(Key(l, r));
    return it == map_.end() ? nullptr : &it->second;
  }
  std::unordered_map<uint64_t, Merge> map_;
};

}  // namespace radixlm::tokenizer
