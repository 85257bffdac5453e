// A tokenizer's vocabulary prepared for grammar masks: the token byte strings in a trie laid out
// in depth-first order (llguidance's token trie: a subtree is a contiguous node range, so a
// rejected prefix skips its whole subtree in O(1)), the special and stop ids apart.
//
// Built once per tokenizer and shared (immutable, thread-safe) by every grammar compiled for it.
// Tokens in the trie: every id that is not special, not a stop id and not empty. Special tokens
// are never matched as text; one is allowed only where the grammar has a quoted literal
// containing its exact text (matcher.h). Stop ids are allowed only where the grammar is complete.
// Cost: O(total token bytes log V) to build; ~16 bytes per trie node.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace radixlm::grammar {

class Vocabulary {
 public:
  struct TrieNode {
    uint8_t byte;
    uint16_t depth;         // bytes from the root (the root has depth 0)
    int32_t tokens_begin;   // tokens ending here: trie_tokens()[tokens_begin, tokens_end)
    int32_t tokens_end;
    int32_t subtree_end;    // one past the last node of this subtree
  };

  // token_bytes[i]: the bytes token i decodes to (Tokenizer::TokenBytes). `special`: ids never
  // produced as text (control tokens); `stop`: end-of-sequence / end-of-turn ids.
  Vocabulary(std::vector<std::string> token_bytes, std::span<const int32_t> special, std::span<const int32_t> stop);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<TrieNode>& trie() const { return trie_; }  // node 0 is the root
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  const std::vector<int32_t>& stop_ids() const { return stop_; }
  bool IsStop(int32_t id) const { return kind_[id] == kStop; }
  bool IsSpecial(int32_t id) const { return kind_[id] == kSpecial; }
  // Special (non-stop) tokens by text, for literals that contain them.
  const std::unordered_map<std::string, std::vector<int32_t>>& special_by_text() const { return special_by_text_; }
  size_t max_special_length() const { return max_special_length_; }
  // A fingerprint of the vocabulary (bytes, special and stop ids), for cache keys.
  uint64_t hash() const { return hash_; }

 private:
  enum Kind : uint8_t { kText, kSpecial, kStop, kEmpty };
  std::vector<std::string> bytes_;
  std::vector<uint8_t> kind_;
  std::vector<int32_t> stop_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  std::unordered_map<std::string, std::vector<int32_t>> special_by_text_;
  size_t max_special_length_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace radixlm::grammar
