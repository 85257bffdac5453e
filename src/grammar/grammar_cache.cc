#include "grammar/grammar_cache.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "grammar/json_schema.h"

namespace radixlm::grammar {

GrammarCache::GrammarCache(Config config) : config_(config) {
  for (int i = 0; i < std::max(1, config_.threads); ++i) threads_.emplace_back([this] { Work(); });
}

GrammarCache::~GrammarCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

GrammarCache::Result GrammarCache::Compile(std::string_view gbnf, const std::shared_ptr<const Vocabulary>& vocab, int64_t fuel) {
  auto g = CompiledGrammar::FromGbnf(gbnf, vocab);
  if (!g.ok()) return g.status();
  RADIXLM_RETURN_IF_ERROR((*g)->CheckCost(fuel));
  return g;
}

void GrammarCache::Work() {
  // Linux schedules threads as tasks: this lowers only the compile thread. A client's grammar
  // then runs on what the engine's threads leave over.
  if (config_.low_priority) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    core::StatusOr<std::string> gbnf = job.build();
    job.done.set_value(gbnf.ok() ? Compile(*gbnf, job.vocab, config_.fuel) : Result(gbnf.status()));
  }
}

std::shared_future<GrammarCache::Result> GrammarCache::GetAsync(std::string key, Builder build,
                                                                const std::shared_ptr<const Vocabulary>& vocab) {
  key = std::to_string(vocab->hash()) + ":" + key;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.result;
  }
  Job job{std::move(build), vocab, {}};
  std::shared_future<Result> f = job.done.get_future().share();
  queue_.push_back(std::move(job));
  cv_.notify_one();
  lru_.push_front(key);
  map_.emplace(key, Entry{f, lru_.begin()});
  while (map_.size() > config_.capacity) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return f;
}

std::shared_future<GrammarCache::Result> GrammarCache::GetAsync(GrammarKind kind, std::string_view text,
                                                                const std::shared_ptr<const Vocabulary>& vocab) {
  std::string t(kind == GrammarKind::kJsonObject ? "" : text);
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + t;
  Builder build = [kind, t = std::move(t)]() -> core::StatusOr<std::string> {
    switch (kind) {
      case GrammarKind::kGbnf: return t;
      case GrammarKind::kJsonSchema: return JsonSchemaToGbnf(t);
      case GrammarKind::kJsonObject: return JsonObjectGbnf();
    }
    return core::InvalidArgument("grammar: unknown kind");
  };
  return GetAsync(std::move(key), std::move(build), vocab);
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace radixlm::grammar
