// A bounded, thread-safe cache of compiled grammars, keyed by (kind, grammar or schema text,
// vocabulary fingerprint), so requests with the same response_format or tool set share one
// CompiledGrammar and its token mask cache (vLLM / SGLang keep a compiler cache the same way).
//
// Least recently used entries are dropped beyond `capacity` (a dropped grammar lives on in the
// matchers still holding it). Failed compiles are cached too: the same bad schema is refused
// again without recompiling. Concurrent requests for one key wait for a single compile.
// GetAsync compiles on a new thread, so a server can overlap compiling with other work.
#pragma once

#include <cstddef>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {

enum class GrammarKind { kGbnf, kJsonSchema, kJsonObject };

class GrammarCache {
 public:
  struct Config {
    size_t capacity = 64;
  };
  using Result = core::StatusOr<std::shared_ptr<const CompiledGrammar>>;

  explicit GrammarCache(Config config) : config_(config) {}

  // `text`: GBNF (root rule "root"), a JSON Schema, or ignored for kJsonObject. Blocks until done.
  Result Get(GrammarKind kind, std::string_view text, const std::shared_ptr<const Vocabulary>& vocab) {
    return GetAsync(kind, text, vocab).get();
  }
  std::shared_future<Result> GetAsync(GrammarKind kind, std::string_view text,
                                      const std::shared_ptr<const Vocabulary>& vocab);

  size_t size() const;
  static Result Compile(GrammarKind kind, std::string_view text, const std::shared_ptr<const Vocabulary>& vocab);

 private:
  struct Entry {
    std::shared_future<Result> result;
    std::list<std::string>::iterator lru;
  };
  Config config_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace radixlm::grammar
