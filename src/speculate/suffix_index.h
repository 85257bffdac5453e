// A bounded index over recent sequences (prompt + output of finished requests), for the tree
// draft source (draft_source.h): where did the last tokens of a context occur before, and what
// followed. Texts are kept whole, oldest dropped first past `max_tokens`; every position is
// indexed by a hash of the kKey tokens ending there and the cache namespace, holding the most
// recent kPlacesPerKey places. A lookup verifies the tokens (hashes collide) and extends the
// match backwards. Memory: about 4 + 12 bytes per kept token.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculate/draft_source.h"

namespace radixlm::speculate {

class SuffixIndex {
 public:
  static constexpr int kKey = 3;
  static constexpr size_t kPlacesPerKey = 16;

  explicit SuffixIndex(int64_t max_tokens) : max_tokens_(max_tokens) {}
  void Add(std::span<const int32_t> tokens, int64_t ns);
  // Places (most recent first) where the context's last kKey tokens occur in texts of
  // namespace ns with at least max(min_match, kKey) tokens matched (at most max_match
  // compared); at most `want`.
  void Find(std::span<const int32_t> context, int64_t ns, int min_match, int max_match, int want,
            std::vector<Place>* out) const;
  int64_t tokens_held() const { return held_; }
  size_t texts_held() const { return texts_.size(); }

 private:
  struct Text {
    uint64_t id = 0;
    int64_t ns = 0;
    std::vector<int32_t> tokens;
  };
  struct Entry {
    uint64_t text = 0;
    int32_t next = 0;  // position after the key's tokens
  };
  static uint64_t Key(const int32_t* last_tokens_end, int64_t ns);
  void DropOldest();
  const Text* TextById(uint64_t id) const;

  int64_t max_tokens_;
  int64_t held_ = 0;
  uint64_t next_id_ = 0;
  std::deque<Text> texts_;  // ids ascending, consecutive
  std::unordered_map<uint64_t, std::vector<Entry>> index_;  // oldest first
};

}  // namespace radixlm::speculate
