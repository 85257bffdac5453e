#include "tier/tier_stack.h"

#include <algorithm>

namespace radixlm::tier {

TierStack::TierStack(std::vector<std::unique_ptr<Tier>> tiers) : tiers_(std::move(tiers)) {}

std::vector<std::string> TierStack::media() const {
  std::vector<std::string> out;
  for (const auto& t : tiers_) out.push_back(t->medium());
  return out;
}

bool TierStack::Contains(const cache::TierKey& key) const {
  return std::any_of(tiers_.begin(), tiers_.end(), [&](const auto& t) { return t->Contains(key); });
}

// Each tier is asked (its own way, at once) only about the keys the tiers before it lack.
std::vector<char> TierStack::ContainsMany(std::span<const cache::TierKey> keys) const {
  std::vector<char> held(keys.size(), 0);
  for (const auto& t : tiers_) {
    std::vector<size_t> at;
    std::vector<cache::TierKey> ask;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!held[i]) {
        at.push_back(i);
        ask.push_back(keys[i]);
      }
    if (ask.empty()) break;
    const std::vector<char> got = t->ContainsMany(ask);
    for (size_t j = 0; j < at.size(); ++j) held[at[j]] = got[j];
  }
  return held;
}

// A block some tier lacks is offered again: the stack stores it to every tier, and a tier that
// holds it already skips or rewrites the same bytes.
std::vector<char> TierStack::HeldByAll(std::span<const cache::TierKey> keys) const {
  std::vector<char> all(keys.size(), 1);
  for (const auto& t : tiers_) {
    const std::vector<char> got = t->ContainsMany(keys);
    for (size_t i = 0; i < keys.size(); ++i) all[i] = all[i] && got[i];
  }
  return all;
}

std::vector<cache::TierState> TierStack::StatesAfter(const cache::TierKey& parent) const {
  std::vector<cache::TierState> out;
  for (const auto& t : tiers_)
    for (const cache::TierState& s : t->StatesAfter(parent))
      if (std::none_of(out.begin(), out.end(), [&](const cache::TierState& o) { return o.key == s.key; })) out.push_back(s);
  return out;
}

std::vector<cache::TierReport> TierStack::Reports() const {
  std::vector<cache::TierReport> out;
  for (const auto& t : tiers_)
    for (cache::TierReport& r : t->Reports()) out.push_back(std::move(r));
  return out;
}

bool TierStack::SharesMarks() const {
  return std::ranges::any_of(tiers_, [](const auto& t) { return t->SharesMarks(); });
}

void TierStack::MarkComputing(std::span<const cache::TierKey> keys, double ttl_seconds, double tokens_per_second) {
  for (const auto& t : tiers_) t->MarkComputing(keys, ttl_seconds, tokens_per_second);
}

void TierStack::ClearComputing(std::span<const cache::TierKey> keys) {
  for (const auto& t : tiers_) t->ClearComputing(keys);
}

std::optional<double> TierStack::ComputingElsewhere(const cache::TierKey& key) const {
  for (const auto& t : tiers_)
    if (std::optional<double> rate = t->ComputingElsewhere(key)) return rate;
  return std::nullopt;
}

void TierStack::ReportDrops() {
  for (const auto& t : tiers_) t->ReportDrops();
}

std::vector<cache::TierDrops> TierStack::TakeDropped() {
  std::vector<cache::TierDrops> out;
  for (const auto& t : tiers_)
    for (cache::TierDrops& d : t->TakeDropped()) out.push_back(std::move(d));
  return out;
}

// A tier that fails a load (lost the block, a corrupt value) falls through to the next.
bool TierStack::Load(const cache::TierKey& key, std::span<const iovec> dst) {
  for (const auto& t : tiers_)
    if (t->Contains(key) && t->Load(key, dst)) return true;
  return false;
}

void TierStack::LoadMany(std::span<const cache::TierKey> keys, std::span<const std::vector<iovec>> dst, std::span<char> ok) {
  std::fill(ok.begin(), ok.end(), 0);
  for (const auto& t : tiers_) {
    std::vector<size_t> at;
    std::vector<cache::TierKey> k;
    std::vector<std::vector<iovec>> d;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!ok[i] && t->Contains(keys[i])) {
        at.push_back(i);
        k.push_back(keys[i]);
        d.push_back(dst[i]);
      }
    if (at.empty()) continue;
    std::vector<char> got(at.size(), 0);
    t->LoadMany(k, d, got);
    for (size_t j = 0; j < at.size(); ++j) ok[at[j]] = got[j];
  }
}

void TierStack::Store(const cache::TierKey& key, std::span<const iovec> segments) {
  for (const auto& t : tiers_) t->Store(key, segments);
}

void TierStack::StoreState(const cache::TierKey& key, const cache::TierKey& parent, int32_t tail,
                           std::span<const iovec> segments) {
  for (const auto& t : tiers_) t->StoreState(key, parent, tail, segments);
}

bool TierStack::LoadState(const cache::TierKey& key, std::span<const iovec> dst) {
  for (const auto& t : tiers_)
    if (t->LoadState(key, dst)) return true;
  return false;
}

void TierStack::Flush() {
  for (const auto& t : tiers_) t->Flush();
}

}  // namespace radixlm::tier
