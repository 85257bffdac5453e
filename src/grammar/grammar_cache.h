// A bounded, thread-safe cache of compiled grammars, keyed by the caller's description of the
// grammar and the vocabulary fingerprint, so requests with the same response_format or tool set
// share one CompiledGrammar and its token mask cache (vLLM / SGLang keep a compiler cache the
// same way).
//
// Compiling runs on the cache's own threads (Config::threads, at the lowest CPU priority: a
// grammar a client sends competes with nobody's decode steps), never on the caller's: the GBNF
// text is built there too (a JSON Schema's conversion, a tool set's call grammar), then parsed
// and lowered within grammar.h's GrammarLimits, and the first token mask is computed within
// matcher.h's work budget (CompiledGrammar::CheckCost). So a result is either a grammar whose
// start costs a bounded amount, or the error a client should get as a 400.
//
// Least recently used entries are dropped beyond `capacity` (a dropped grammar lives on in the
// matchers still holding it). Failed compiles are cached too: the same bad schema is refused
// again without recompiling. Concurrent requests for one key wait for a single compile. Work
// waits in a queue for a free compile thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/matcher.h"

namespace radixlm::grammar {

enum class GrammarKind { kGbnf, kJsonSchema, kJsonObject };

class GrammarCache {
 public:
  struct Config {
    size_t capacity = 64;
    int threads = 1;              // compile threads
    bool low_priority = true;     // compile threads at nice 19 (Linux: per thread)
    int64_t fuel = kStepFuel;     // the first mask's work budget (CheckCost)
  };
  using Result = core::StatusOr<std::shared_ptr<const CompiledGrammar>>;
  // Builds the GBNF text (root rule "root"); an error is the compile's result.
  using Builder = std::function<core::StatusOr<std::string>()>;

  explicit GrammarCache(Config config);
  ~GrammarCache();
  GrammarCache(const GrammarCache&) = delete;
  GrammarCache& operator=(const GrammarCache&) = delete;

  // `key` names what `build` makes (equal keys: equal grammars). Returns at once.
  std::shared_future<Result> GetAsync(std::string key, Builder build, const std::shared_ptr<const Vocabulary>& vocab);
  // `text`: GBNF (root rule "root"), a JSON Schema, or ignored for kJsonObject.
  std::shared_future<Result> GetAsync(GrammarKind kind, std::string_view text, const std::shared_ptr<const Vocabulary>& vocab);
  // The same, waiting for the result.
  Result Get(GrammarKind kind, std::string_view text, const std::shared_ptr<const Vocabulary>& vocab) {
    return GetAsync(kind, text, vocab).get();
  }

  size_t size() const;
  // Parses, lowers and checks the first mask's cost (no cache, on the calling thread).
  static Result Compile(std::string_view gbnf, const std::shared_ptr<const Vocabulary>& vocab, int64_t fuel = kStepFuel);

 private:
  struct Entry {
    std::shared_future<Result> result;
    std::list<std::string>::iterator lru;
  };
  struct Job {
    Builder build;
    std::shared_ptr<const Vocabulary> vocab;
    std::promise<Result> done;
  };
  void Work();

  Config config_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Entry> map_;
  std::condition_variable cv_;
  std::list<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace radixlm::grammar
