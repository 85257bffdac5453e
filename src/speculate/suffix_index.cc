#include "speculate/suffix_index.h"

#include <algorithm>

namespace radixlm::speculate {

uint64_t SuffixIndex::Key(const int32_t* end, int64_t ns) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(ns);
  for (int i = kKey; i > 0; --i) h = (h ^ static_cast<uint32_t>(end[-i])) * 1099511628211ull;
  return h ^ (h >> 29);
}

void SuffixIndex::Add(std::span<const int32_t> tokens, int64_t ns) {
  if (static_cast<int64_t>(tokens.size()) <= kKey || static_cast<int64_t>(tokens.size()) > max_tokens_) return;
  const uint64_t id = next_id_++;
  texts_.push_back({id, ns, std::vector<int32_t>(tokens.begin(), tokens.end())});
  held_ += static_cast<int64_t>(tokens.size());
  const std::vector<int32_t>& t = texts_.back().tokens;
  // Positions with a continuation: the key ends at next - 1, text[next] follows.
  for (int32_t next = kKey; next < static_cast<int32_t>(t.size()); ++next) {
    std::vector<Entry>& places = index_[Key(t.data() + next, ns)];
    if (places.size() >= kPlacesPerKey) places.erase(places.begin());
    places.push_back({id, next});
  }
  while (held_ > max_tokens_) DropOldest();
}

void SuffixIndex::DropOldest() {
  const Text& old = texts_.front();
  for (int32_t next = kKey; next < static_cast<int32_t>(old.tokens.size()); ++next) {
    auto it = index_.find(Key(old.tokens.data() + next, old.ns));
    if (it == index_.end()) continue;
    std::erase_if(it->second, [&](const Entry& e) { return e.text == old.id; });
    if (it->second.empty()) index_.erase(it);
  }
  held_ -= static_cast<int64_t>(old.tokens.size());
  texts_.pop_front();
}

const SuffixIndex::Text* SuffixIndex::TextById(uint64_t id) const {
  if (texts_.empty() || id < texts_.front().id) return nullptr;
  const uint64_t i = id - texts_.front().id;
  return i < texts_.size() ? &texts_[i] : nullptr;
}

void SuffixIndex::Find(std::span<const int32_t> context, int64_t ns, int min_match, int max_match, int want,
                       std::vector<Place>* out) const {
  const int64_t n = static_cast<int64_t>(context.size());
  if (n < kKey || want <= 0) return;
  const auto it = index_.find(Key(context.data() + n, ns));
  if (it == index_.end()) return;
  const int need = std::max(min_match, kKey);
  int found = 0;
  for (auto e = it->second.rbegin(); e != it->second.rend() && found < want; ++e) {
    const Text* text = TextById(e->text);
    if (!text || text->ns != ns) continue;
    const std::vector<int32_t>& t = text->tokens;
    int m = 0;
    while (m < max_match && m < n && m < e->next && t[e->next - 1 - m] == context[n - 1 - m]) ++m;
    if (m < need) continue;
    out->push_back({std::span<const int32_t>(t), e->next, m});
    ++found;
  }
}

}  // namespace radixlm::speculate
