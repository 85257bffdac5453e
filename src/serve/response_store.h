// The Responses API's stored responses (store: true): what GET /v1/responses/{id} answers and
// what previous_response_id continues. Each entry keeps the Response object and the
// conversation it ended (in the chat form, the response's own output included, the
// instructions not: they do not carry over). A request that continues one renders that
// conversation with its new items; the server's turn memory (serve/turn_memory.h) then builds
// its prompt from the exact tokens of the stored turns, so the prefix cache hits the whole
// history.
//
// Bounded: at most max_responses entries and max_bytes of them (their JSON), least
// recently used dropped first. Scoped: an entry is visible only to requests with the same API
// key and cache_salt (the scope string the server makes of them).
// Thread-safety: internally locked; entries are immutable once stored (shared_ptr).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixlm::serve {

struct StoredResponse {
  std::string id, scope;
  nlohmann::ordered_json response;  // the Response object, as answered
  nlohmann::ordered_json messages;  // the conversation it ended, chat form (no instructions)
  size_t bytes = 0;  // what it holds, set by Measure() before it is stored
  void Measure();
};

class ResponseStore {
 public:
  struct Config {
    size_t max_responses = 1000;
    size_t max_bytes = size_t{256} << 20;
  };
  explicit ResponseStore(Config config) : config_(config) {}

  void Put(std::shared_ptr<const StoredResponse> r);
  // nullptr when absent, dropped, or stored under another scope.
  std::shared_ptr<const StoredResponse> Get(const std::string& id, const std::string& scope);
  size_t size() const;
  size_t bytes() const;

 private:
  Config config_;
  mutable std::mutex mu_;
  std::list<std::shared_ptr<const StoredResponse>> lru_;  // most recent first
  std::unordered_map<std::string, std::list<std::shared_ptr<const StoredResponse>>::iterator> by_id_;
  size_t bytes_ = 0;
};

}  // namespace radixlm::serve
