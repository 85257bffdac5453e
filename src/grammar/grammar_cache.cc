#include "grammar/grammar_cache.h"

namespace radixlm::grammar {

GrammarCache::Result GrammarCache::Compile(GrammarKind kind, std::string_view text,
                                           const std::shared_ptr<const Vocabulary>& vocab) {
  switch (kind) {
    case GrammarKind::kGbnf: return CompiledGrammar::FromGbnf(text, vocab);
    case GrammarKind::kJsonSchema: return CompiledGrammar::FromJsonSchema(text, vocab);
    case GrammarKind::kJsonObject: return CompiledGrammar::JsonObject(vocab);
  }
  return core::InvalidArgument("grammar: unknown kind");
}

std::shared_future<GrammarCache::Result> GrammarCache::GetAsync(GrammarKind kind, std::string_view text,
                                                                const std::shared_ptr<const Vocabulary>& vocab) {
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::to_string(vocab->hash()) + ":";
  if (kind != GrammarKind::kJsonObject) key += text;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.result;
  }
  std::shared_future<Result> f =
      std::async(std::launch::async, [kind, t = std::string(text), vocab] { return Compile(kind, t, vocab); }).share();
  lru_.push_front(key);
  map_.emplace(key, Entry{f, lru_.begin()});
  while (map_.size() > config_.capacity) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return f;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace radixlm::grammar
