#include "serve/turn_memory.h"

namespace radixlm::serve {
namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ULL, kFnvPrime = 1099511628211ULL;

uint64_t Mix(uint64_t h, unsigned char c) { return (h ^ c) * kFnvPrime; }

uint64_t ScopeHash(const std::string& scope) {
  uint64_t h = kFnvBasis;
  for (unsigned char c : scope) h = Mix(h, c);
  return Mix(h, 0xFF);  // (a byte UTF-8 text never holds: scope and text cannot run together)
}

// The key of a remembered turn; Prefixes computes the same hash incrementally over a prompt.
uint64_t KeyHash(const std::string& scope, const std::string& text) {
  uint64_t h = ScopeHash(scope);
  for (unsigned char c : text) h = Mix(h, c);
  return h;
}

}  // namespace

void TurnMemory::Remember(std::shared_ptr<RememberedTurn> turn) {
  turn->bytes = sizeof(RememberedTurn) + turn->scope.size() + turn->base_text.size() +
                4 * (turn->prompt_tokens.size() + turn->generated.size()) + turn->reply.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size();
  const uint64_t h = KeyHash(turn->scope, turn->base_text);
  std::lock_guard<std::mutex> lock(mu_);
  if (turn->bytes > config_.max_bytes || config_.max_entries == 0) return;
  auto drop = [&](std::list<Keyed>::iterator it) {
    bytes_ -= it->second->bytes;
    if (--lengths_[it->second->base_text.size()] == 0) lengths_.erase(it->second->base_text.size());
    by_hash_.erase(it->first);
    lru_.erase(it);
  };
  if (auto it = by_hash_.find(h); it != by_hash_.end()) drop(it->second);
  bytes_ += turn->bytes;
  ++lengths_[turn->base_text.size()];
  lru_.emplace_front(h, std::move(turn));
  by_hash_[h] = lru_.begin();
  while (!lru_.empty() && (lru_.size() > config_.max_entries || bytes_ > config_.max_bytes)) drop(std::prev(lru_.end()));
}

std::vector<std::shared_ptr<const RememberedTurn>> TurnMemory::Prefixes(const std::string& text, const std::string& scope,
                                                                       size_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  // One pass of the hash over the text, read at every length some remembered prompt has.
  std::vector<std::pair<size_t, uint64_t>> at;  // (length, hash of scope + text[0, length))
  uint64_t h = ScopeHash(scope);
  size_t pos = 0;
  for (const auto& [length, count] : lengths_) {
    if (length > text.size()) break;
    for (; pos < length; ++pos) h = Mix(h, static_cast<unsigned char>(text[pos]));
    at.push_back({length, h});
  }
  std::vector<Entry> out;
  for (auto it = at.rbegin(); it != at.rend() && out.size() < limit; ++it) {
    auto found = by_hash_.find(it->second);
    if (found == by_hash_.end()) continue;
    const Entry& e = found->second->second;
    if (e->scope != scope || text.compare(0, it->first, e->base_text) != 0) continue;  // a collision
    lru_.splice(lru_.begin(), lru_, found->second);
    out.push_back(e);
  }
  return out;
}

size_t TurnMemory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

std::optional<std::vector<int32_t>> SpliceRemembered(const TurnMemory& memory, const std::string& scope,
                                                     const std::string& rendered, const nlohmann::ordered_json& messages,
                                                     const RenderMessages& render,
                                                     const std::function<std::vector<int32_t>(const std::string&)>& encode,
                                                     const std::vector<std::string>& end_texts) {
  static const std::string kSentinel = "\xEE\x80\x80radixlm\xEE\x80\x80";  // U+E000 (private use) around a word
  for (const auto& turn : memory.Prefixes(rendered, scope, 4)) {
    const size_t k = turn->messages;
    if (k + 1 >= messages.size() || messages[k].value("role", "") != "assistant") continue;
    // The turn as the client sent it and as it was given, each followed by a probe of the next
    // message's role: the client sent back what it was given when the two render alike.
    nlohmann::ordered_json probe = messages[k + 1];
    probe["content"] = kSentinel;
    probe.erase("tool_calls");
    nlohmann::ordered_json client = nlohmann::ordered_json::array(), ours;
    for (size_t i = 0; i < k; ++i) client.push_back(messages[i]);
    ours = client;
    client.push_back(messages[k]);
    ours.push_back(turn->reply);
    client.push_back(probe);
    ours.push_back(probe);
    const auto a = render(client), b = render(ours);
    if (!a.ok() || !b.ok() || *a != *b || a->compare(0, turn->base_text.size(), turn->base_text) != 0) continue;
    const size_t sentinel = a->find(kSentinel, turn->base_text.size());
    if (sentinel == std::string::npos) continue;
    // The turn's end-of-turn marker: the last end-of-turn text before the probe's content.
    size_t marker = std::string::npos;
    for (const std::string& e : end_texts) {
      if (e.empty() || sentinel < turn->base_text.size() + e.size()) continue;
      const size_t at = a->rfind(e, sentinel - e.size());
      if (at != std::string::npos && at >= turn->base_text.size() && (marker == std::string::npos || at > marker)) marker = at;
    }
    if (marker == std::string::npos || rendered.compare(0, marker, *a, 0, marker) != 0) continue;
    // The generated tokens before their own end token take the place of the template's
    // rendering of the turn up to its marker (so the turn ends with the marker the template writes).
    std::vector<int32_t> tokens = turn->prompt_tokens;
    tokens.insert(tokens.end(), turn->generated.begin(), turn->generated.end());
    const std::vector<int32_t> rest = encode(rendered.substr(marker));
    tokens.insert(tokens.end(), rest.begin(), rest.end());
    return tokens;
  }
  return std::nullopt;
}

}  // namespace radixlm::serve
