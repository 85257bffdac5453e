#include "cache/kv_events.h"

#include <cstring>

#include <openssl/sha.h>

#include <algorithm>

namespace radixlm::cache {
namespace {

// Canonical CBOR (RFC 8949 4.2.1: shortest heads, definite lengths) of the few shapes block
// hashing needs. Written here rather than through libcbor: five head encodings, and the exact
// bytes are the contract with vLLM's cbor2.dumps(canonical=True).
void Head(std::vector<uint8_t>& out, uint8_t major, uint64_t v) {
  const uint8_t m = static_cast<uint8_t>(major << 5);
  if (v < 24) {
    out.push_back(m | static_cast<uint8_t>(v));
    return;
  }
  int bytes = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
  out.push_back(m | static_cast<uint8_t>(bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27));
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

BlockDigest Sha256(const std::vector<uint8_t>& bytes) {
  BlockDigest d;
  SHA256(bytes.data(), bytes.size(), d.data());
  return d;
}

}  // namespace

BlockHasher::BlockHasher(int32_t block_tokens, const std::string& seed) : bs_(block_tokens) {
  std::vector<uint8_t> text;
  Head(text, 3, seed.size());
  text.insert(text.end(), seed.begin(), seed.end());
  none_ = Sha256(text);
}

BlockDigest BlockHasher::Next(const BlockDigest* previous, std::span<const int32_t> block, int64_t ns) const {
  std::vector<uint8_t> buf;
  buf.reserve(48 + 5 * block.size());
  Head(buf, 4, 3);                               // [parent, tokens, extra]
  Head(buf, 2, 32);                              // bytes(32)
  const BlockDigest& parent = previous ? *previous : none_;
  buf.insert(buf.end(), parent.begin(), parent.end());
  Head(buf, 4, block.size());
  for (int32_t t : block) Head(buf, 0, static_cast<uint32_t>(t));
  if (!previous && ns != 0) {
    Head(buf, 4, 1);
    Head(buf, 0, static_cast<uint64_t>(ns));
  } else {
    buf.push_back(0xf6);  // null
  }
  return Sha256(buf);
}

std::vector<BlockDigest> BlockHasher::Chain(std::span<const int32_t> path, int64_t ns) const {
  std::vector<BlockDigest> chain;
  const size_t full = path.size() / bs_;
  chain.reserve(full);
  for (size_t b = 0; b < full; ++b) chain.push_back(Next(b ? &chain[b - 1] : nullptr, path.subspan(b * bs_, bs_), ns));
  return chain;
}

BlockDigest BlockHasher::State(std::span<const int32_t> path, int64_t ns) const {
  const std::vector<BlockDigest> chain = Chain(path, ns);
  return StateAfter(chain.empty() ? nullptr : &chain.back(), path.subspan(chain.size() * bs_), 0);
}

BlockDigest BlockHasher::StateAfter(const BlockDigest* parent, std::span<const int32_t> tail, int64_t ns) const {
  std::vector<uint8_t> buf;
  const bool with_ns = !parent && ns != 0;
  Head(buf, 4, with_ns ? 4 : 3);
  Head(buf, 2, 32);
  const BlockDigest& p = parent ? *parent : none_;
  buf.insert(buf.end(), p.begin(), p.end());
  Head(buf, 4, tail.size());
  for (int32_t t : tail) Head(buf, 0, static_cast<uint32_t>(t));
  Head(buf, 3, 3);
  buf.insert(buf.end(), {'s', 's', 'm'});
  if (with_ns) {
    Head(buf, 4, 1);
    Head(buf, 0, static_cast<uint64_t>(ns));
  }
  return Sha256(buf);
}

uint64_t BlockHasher::Key(const BlockDigest& d) {
  uint64_t k = 0;
  for (int i = 24; i < 32; ++i) k = (k << 8) | d[i];
  return k;
}

void KvEventLog::Stored(int64_t ns, std::span<const int32_t> path, int64_t begin) {
  const int64_t bs = hasher_.block_tokens();
  const int64_t first = begin / bs, end = static_cast<int64_t>(path.size()) / bs;  // new full blocks [first, end)
  if (first >= end) return;
  const std::vector<BlockDigest> chain = hasher_.Chain(path.first(end * bs), ns);
  KvEvent e;
  e.kind = KvEvent::Kind::kStored;
  for (int64_t b = first; b < end; ++b) e.block_keys.push_back(BlockHasher::Key(chain[b]));
  if (first > 0) e.parent_key = BlockHasher::Key(chain[first - 1]);
  e.token_ids.assign(path.begin() + first * bs, path.begin() + end * bs);
  e.medium = pool_medium_;
  pending_.push_back(std::move(e));
}

size_t KvEventLog::TierKeyHash::operator()(const std::array<uint8_t, 32>& k) const {
  size_t h;
  std::memcpy(&h, k.data(), sizeof h);
  return h;
}

void KvEventLog::TierStored(std::string_view medium, int64_t ns, std::span<const int32_t> path, std::span<const int64_t> blocks,
                            std::span<const std::array<uint8_t, 32>> tier_keys) {
  const int64_t bs = hasher_.block_tokens();
  const std::vector<BlockDigest> chain = hasher_.Chain(path, ns);
  // One event per run of consecutive blocks (each names its parent).
  for (size_t i = 0; i < blocks.size();) {
    KvEvent e;
    e.kind = KvEvent::Kind::kStored;
    e.medium = std::string(medium);
    if (blocks[i] > 0) e.parent_key = BlockHasher::Key(chain[blocks[i] - 1]);
    size_t j = i;
    for (; j < blocks.size() && blocks[j] == blocks[i] + static_cast<int64_t>(j - i); ++j) {
      const uint64_t key = BlockHasher::Key(chain[blocks[j]]);
      e.block_keys.push_back(key);
      e.token_ids.insert(e.token_ids.end(), path.begin() + blocks[j] * bs, path.begin() + (blocks[j] + 1) * bs);
      tier_blocks_[tier_keys[j]] = key;
    }
    pending_.push_back(std::move(e));
    i = j;
  }
}

void KvEventLog::TierRemoved(std::string_view medium, std::span<const std::array<uint8_t, 32>> tier_keys) {
  KvEvent e;
  e.kind = KvEvent::Kind::kRemoved;
  e.medium = std::string(medium);
  for (const auto& k : tier_keys) {
    auto it = tier_blocks_.find(k);
    if (it == tier_blocks_.end()) continue;  // not announced by this process (another's, an earlier run's)
    e.block_keys.push_back(it->second);
    tier_blocks_.erase(it);
  }
  if (!e.block_keys.empty()) pending_.push_back(std::move(e));
}

void KvEventLog::Removed(int64_t ns, std::span<const int32_t> path, int64_t begin) {
  const int64_t bs = hasher_.block_tokens();
  const int64_t first = begin / bs, end = static_cast<int64_t>(path.size()) / bs;
  if (first >= end) return;
  const std::vector<BlockDigest> chain = hasher_.Chain(path.first(end * bs), ns);
  KvEvent e;
  e.kind = KvEvent::Kind::kRemoved;
  for (int64_t b = first; b < end; ++b) e.block_keys.push_back(BlockHasher::Key(chain[b]));
  e.medium = pool_medium_;
  pending_.push_back(std::move(e));
}

void KvEventLog::State(std::span<const int32_t> path, KvEvent::Kind kind) {
  KvEvent e;
  e.kind = kind;
  e.block_keys = {BlockHasher::Key(hasher_.State(path, 0))};
  e.position = static_cast<int64_t>(path.size());
  const int64_t full = e.position / hasher_.block_tokens();
  if (kind == KvEvent::Kind::kStateStored && full > 0)
    e.parent_key = BlockHasher::Key(hasher_.Chain(path.first(full * hasher_.block_tokens()), 0).back());
  pending_.push_back(std::move(e));
}

std::vector<KvEvent> KvEventLog::Take() {
  std::vector<KvEvent> out;
  out.swap(pending_);
  return out;
}

std::vector<uint64_t> CachedBlockKeys(const RadixTree& tree, const BlockHasher& hasher) {
  const int64_t bs = hasher.block_tokens();
  std::vector<uint64_t> keys;
  // Pre-order: when a node is visited, chain[b] for the blocks before its first is its
  // ancestors' (each node on the path rewrote the entries from its own first block on).
  std::vector<BlockDigest> chain;
  tree.VisitPaths([&](int64_t ns, std::span<const int32_t> path, int64_t start) {
    const int64_t first = start / bs, end = static_cast<int64_t>(path.size()) / bs;
    if (static_cast<int64_t>(chain.size()) < end) chain.resize(end);
    for (int64_t b = first; b < end; ++b) {
      chain[b] = hasher.Next(b ? &chain[b - 1] : nullptr, path.subspan(b * bs, bs), ns);
      keys.push_back(BlockHasher::Key(chain[b]));
    }
  });
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace radixlm::cache

namespace radixlm::cache {

std::vector<uint64_t> CachedStateKeys(const CheckpointCache& cache, const BlockHasher& hasher) {
  std::vector<uint64_t> keys;
  cache.VisitCheckpoints([&](std::span<const int32_t> path) { keys.push_back(BlockHasher::Key(hasher.State(path, 0))); });
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace radixlm::cache
