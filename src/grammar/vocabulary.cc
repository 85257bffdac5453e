#include "grammar/vocabulary.h"

#include <algorithm>

namespace radixlm::grammar {

namespace {

// The byte trie of the tokens in `order` (sorted by bytes), node 0 the root. Depth-first from
// the sorted tokens: keep the current path, pop to the common prefix with the next token
// (closing those subtrees), push its remaining bytes.
void BuildTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& order,
               std::vector<Vocabulary::TrieNode>* trie, std::vector<int32_t>* trie_tokens) {
  using TrieNode = Vocabulary::TrieNode;
  trie->push_back({0, 0, 0, 0, 0});
  std::vector<int32_t> path = {0};  // node ids along the current path; path[d] has depth d
  std::string prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      (*trie)[path.back()].subtree_end = static_cast<int32_t>(trie->size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& s = bytes[id];
    size_t lcp = 0;
    while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
    lcp = std::min(lcp, path.size() - 1);
    close_to(lcp);
    for (size_t d = lcp; d < s.size(); ++d) {
      const auto t = static_cast<int32_t>(trie_tokens->size());
      path.push_back(static_cast<int32_t>(trie->size()));
      trie->push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), t, t, 0});
    }
    TrieNode& end = (*trie)[path.back()];
    if (end.tokens_end != static_cast<int32_t>(trie_tokens->size())) {  // first token ending here
      end.tokens_begin = end.tokens_end = static_cast<int32_t>(trie_tokens->size());
    }
    trie_tokens->push_back(id);
    end.tokens_end = static_cast<int32_t>(trie_tokens->size());
    prev = s;
  }
  close_to(0);
  (*trie)[0].subtree_end = static_cast<int32_t>(trie->size());
}

// FNV-1a over the tokens' lengths, bytes and kinds.
uint64_t Fingerprint(const std::vector<std::string>& bytes, const std::vector<uint8_t>& kind) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (size_t i = 0; i < bytes.size(); ++i) {
    mix(bytes[i].size());
    for (unsigned char c : bytes[i]) mix(c);
    mix(kind[i]);
  }
  return h;
}

}  // namespace

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::span<const int32_t> special,
                       std::span<const int32_t> stop)
    : bytes_(std::move(token_bytes)), kind_(bytes_.size(), kText) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].empty()) kind_[i] = kEmpty;
  }
  for (int32_t id : special) {
    if (id >= 0 && id < size()) kind_[id] = kSpecial;
  }
  for (int32_t id : stop) {
    if (id >= 0 && id < size() && kind_[id] != kStop) {
      kind_[id] = kStop;
      stop_.push_back(id);
    }
  }
  std::vector<int32_t> order;
  for (int32_t i = 0; i < size(); ++i) {
    if (kind_[i] == kText) order.push_back(i);
    if (kind_[i] == kSpecial) {
      special_by_text_[bytes_[i]].push_back(i);
      max_special_length_ = std::max(max_special_length_, bytes_[i].size());
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });

  BuildTrie(bytes_, order, &trie_, &trie_tokens_);
  hash_ = Fingerprint(bytes_, kind_);
}

}  // namespace radixlm::grammar
