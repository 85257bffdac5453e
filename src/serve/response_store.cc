#include "serve/response_store.h"

namespace radixlm::serve {

void StoredResponse::Measure() {
  bytes = sizeof(*this) + id.size() + scope.size() + response.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size() +
          messages.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size();
}

void ResponseStore::Put(std::shared_ptr<const StoredResponse> r) {
  const size_t b = r->bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (b > config_.max_bytes || config_.max_responses == 0) return;  // could never fit
  if (auto it = by_id_.find(r->id); it != by_id_.end()) {
    bytes_ -= (*it->second)->bytes;
    lru_.erase(it->second);
    by_id_.erase(it);
  }
  lru_.push_front(std::move(r));
  by_id_[lru_.front()->id] = lru_.begin();
  bytes_ += b;
  while (!lru_.empty() && (lru_.size() > config_.max_responses || bytes_ > config_.max_bytes)) {
    bytes_ -= lru_.back()->bytes;
    by_id_.erase(lru_.back()->id);
    lru_.pop_back();
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::Get(const std::string& id, const std::string& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || (*it->second)->scope != scope) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return *it->second;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace radixlm::serve
