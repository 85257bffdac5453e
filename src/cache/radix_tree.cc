#include "cache/radix_tree.h"

#include <algorithm>
#include <queue>

#include "core/status.h"

namespace radixlm::cache {

RadixTree::RadixTree(BlockPool& pool, std::shared_ptr<const KvEvictionPolicy> policy)
    : pool_(pool), policy_(policy ? std::move(policy) : *KvEvictionPolicy::Make("lru")), bs_(pool.block_tokens()) {
  nodes_.emplace_back();
  nodes_[kRootNode].alive = true;
}

NodeId RadixTree::NewNode() {
  NodeId id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[id] = Node{};
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[id].alive = true;
  return id;
}

void RadixTree::FreeNode(NodeId id) {
  if (nodes_[id].marked_until > 0) {
    marked_blocks_ -= static_cast<int64_t>(nodes_[id].blocks.size());
    mark_expiry_.erase({nodes_[id].marked_until, id});
  }
  nodes_[id] = Node{};
  free_nodes_.push_back(id);
}

int32_t RadixTree::BlockFor(const Node& n, int64_t position) const {
  return n.blocks[position / bs_ - n.start / bs_];
}

bool RadixTree::IsEvictableLeaf(NodeId id) const {
  const Node& n = nodes_[id];
  return id != kRootNode && n.alive && !n.ns_root && n.lock == 0 && n.children.empty();
}

NodeId RadixTree::RootOf(int64_t ns) const {
  if (ns == 0) return kRootNode;
  auto it = namespace_roots_.find(ns);
  return it == namespace_roots_.end() ? -1 : it->second;
}

NodeId RadixTree::EnsureRoot(int64_t ns) {
  const NodeId have = RootOf(ns);
  if (have >= 0) return have;
  const NodeId id = NewNode();
  nodes_[id].parent = kRootNode;
  nodes_[id].ns_root = true;
  namespace_roots_[ns] = id;
  return id;
}

void RadixTree::UpdateEvictable(NodeId id) {
  const std::pair<EvictKey, NodeId> key{nodes_[id].evict_key, id};
  if (IsEvictableLeaf(id)) evictable_.insert(key);
  else evictable_.erase(key);
}

void RadixTree::Touch(NodeId id, bool hit) {
  Node& n = nodes_[id];
  evictable_.erase({n.evict_key, id});
  n.last_access = ++clock_;
  n.hits += hit;
  n.evict_key = policy_->Key(n.last_access, n.hits);
  n.evict_key.marked = n.marked_until > 0;
  UpdateEvictable(id);
}

void RadixTree::Rekey(NodeId id) {
  Node& n = nodes_[id];
  evictable_.erase({n.evict_key, id});
  n.evict_key = policy_->Key(n.last_access, n.hits);
  n.evict_key.marked = n.marked_until > 0;
  UpdateEvictable(id);
  ++version_;  // the eviction order changed: plans made before are stale
}

int64_t RadixTree::Mark(const std::vector<int32_t>& tokens, int64_t n, int64_t ns, double until, int64_t max_blocks) {
  n = std::min<int64_t>(n, tokens.size());
  NodeId node = RootOf(ns);
  int64_t pos = 0;
  while (node >= 0 && pos < n) {
    const auto it = nodes_[node].children.find(tokens[pos]);
    if (it == nodes_[node].children.end()) break;
    NodeId child = it->second;
    int64_t len = static_cast<int64_t>(nodes_[child].tokens.size());
    int64_t k = 0;
    while (k < len && pos + k < n && nodes_[child].tokens[k] == tokens[pos + k]) ++k;
    if (k == 0) break;
    if (nodes_[child].marked_until == 0 && marked_blocks_ + static_cast<int64_t>(nodes_[child].blocks.size()) > max_blocks) {
      // The share is full past this node: mark the whole blocks of it that fit, split off.
      const int64_t room = max_blocks - marked_blocks_;
      const int64_t at = (nodes_[child].start / bs_ + room) * bs_;
      if (room <= 0 || at <= nodes_[child].start) break;
      if (at < nodes_[child].end()) child = Split(child, at);
      len = static_cast<int64_t>(nodes_[child].tokens.size());
      k = std::min(k, len);
    }
    Node& c = nodes_[child];
    if (c.marked_until < until) {
      const int64_t blocks = static_cast<int64_t>(c.blocks.size());
      if (c.marked_until == 0) {
        if (marked_blocks_ + blocks > max_blocks) break;
        marked_blocks_ += blocks;
      } else {
        mark_expiry_.erase({c.marked_until, child});
      }
      c.marked_until = until;
      mark_expiry_.insert({until, child});
      Rekey(child);
    }
    pos += k;
    if (k < len) break;
    node = child;
  }
  return pos;
}

void RadixTree::ExpireMarks(double now) {
  while (!mark_expiry_.empty() && mark_expiry_.begin()->first <= now) {
    const NodeId id = mark_expiry_.begin()->second;
    mark_expiry_.erase(mark_expiry_.begin());
    marked_blocks_ -= static_cast<int64_t>(nodes_[id].blocks.size());
    nodes_[id].marked_until = 0;
    Rekey(id);
  }
}

MatchResult RadixTree::Match(const std::vector<int32_t>& tokens, int64_t limit, int64_t ns) const {
  MatchResult r;
  limit = std::min<int64_t>(limit, tokens.size());
  NodeId node = RootOf(ns);
  if (node < 0) return r;  // nothing cached in this namespace yet
  r.node = node;
  int64_t pos = 0;
  while (pos < limit) {
    const auto it = nodes_[node].children.find(tokens[pos]);
    if (it == nodes_[node].children.end()) break;
    const Node& child = nodes_[it->second];
    int64_t k = 0;
    const int64_t max_k = std::min<int64_t>(child.tokens.size(), limit - pos);
    while (k < max_k && child.tokens[k] == tokens[pos + k]) ++k;
    // The child's block for each index it touches is valid for the whole path up to its end.
    for (int64_t idx = pos / bs_; idx <= (pos + k - 1) / bs_; ++idx) {
      const int32_t b = BlockFor(child, idx * bs_ < child.start ? child.start : idx * bs_);
      if (idx < static_cast<int64_t>(r.blocks.size())) r.blocks[idx] = b;
      else r.blocks.push_back(b);
    }
    pos += k;
    r.node = it->second;
    if (k < static_cast<int64_t>(child.tokens.size())) break;
    node = it->second;
  }
  r.length = pos;
  return r;
}

void RadixTree::Continuation(std::span<const int32_t> tokens, int64_t ns, int max, std::vector<int32_t>* out) const {
  NodeId node = RootOf(ns);
  if (node < 0 || max <= 0 || tokens.empty()) return;
  const int64_t n = static_cast<int64_t>(tokens.size());
  int64_t pos = 0, k = 0;  // tokens matched; of the current node's edge
  while (pos < n) {
    const auto it = nodes_[node].children.find(tokens[static_cast<size_t>(pos)]);
    if (it == nodes_[node].children.end()) return;
    node = it->second;
    const Node& child = nodes_[node];
    k = 0;
    while (k < static_cast<int64_t>(child.tokens.size()) && pos < n && child.tokens[k] == tokens[static_cast<size_t>(pos)])
      ++k, ++pos;
    if (pos < n && k < static_cast<int64_t>(child.tokens.size())) return;  // diverged inside the edge
  }
  int left = max;
  for (;;) {
    const Node& cur = nodes_[node];
    for (; k < static_cast<int64_t>(cur.tokens.size()) && left > 0; ++k, --left) out->push_back(cur.tokens[k]);
    if (left == 0 || cur.children.empty()) return;
    NodeId next = -1;
    for (const auto& [tok, child] : cur.children)
      if (next < 0 || nodes_[child].last_access > nodes_[next].last_access ||
          (nodes_[child].last_access == nodes_[next].last_access && child < next))
        next = child;
    node = next;
    k = 0;
  }
}

Reservation RadixTree::Reserve(const std::vector<int32_t>& tokens, int64_t match_limit, int64_t total_tokens,
                               int64_t ns) const {
  Reservation r;
  r.version = version_;
  r.match = Match(tokens, match_limit, ns);
  const int64_t m = r.match.length;
  const int64_t full = m / bs_;
  r.cow_tokens = static_cast<int32_t>(m % bs_);
  const int64_t needed_blocks = (std::max<int64_t>(total_tokens, m) + bs_ - 1) / bs_;
  r.new_blocks = static_cast<int32_t>(needed_blocks - full);
  int64_t available = pool_.num_free();
  if (available >= r.new_blocks) {
    r.feasible = true;
    return r;
  }
  // Simulate LRU eviction without touching the tree: nodes on the match path will be locked.
  std::vector<char> on_path(nodes_.size(), 0);
  for (NodeId n = r.match.node; n != kRootNode && n >= 0; n = nodes_[n].parent) on_path[n] = 1;
  std::unordered_map<NodeId, int32_t> children_left;
  std::unordered_map<int32_t, int32_t> refs_dropped;
  using Entry = std::pair<EvictKey, NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> exposed;  // parents that became leaves
  auto it = evictable_.begin();
  while (available < r.new_blocks) {
    NodeId victim = -1;
    const bool take_set = it != evictable_.end() && (exposed.empty() || *it < exposed.top());
    if (take_set) {
      victim = it->second;
      ++it;
    } else if (!exposed.empty()) {
      victim = exposed.top().second;
      exposed.pop();
    } else {
      break;
    }
    if (on_path[victim]) continue;
    r.evictions.push_back(victim);
    for (int32_t b : nodes_[victim].blocks)
      if (pool_.ref_count(b) - ++refs_dropped[b] == 0) ++available;
    const NodeId parent = nodes_[victim].parent;
    if (parent == kRootNode || nodes_[parent].ns_root) continue;
    auto [cl, inserted] = children_left.try_emplace(parent, static_cast<int32_t>(nodes_[parent].children.size()));
    if (--cl->second == 0 && nodes_[parent].lock == 0 && !on_path[parent])
      exposed.push({nodes_[parent].evict_key, parent});
  }
  r.feasible = available >= r.new_blocks;
  return r;
}

Admission RadixTree::Commit(const Reservation& r, int64_t prompt_tokens) {
  RADIXLM_CHECK_MSG(r.version == version_, "reservation is stale: the tree changed since Reserve");
  RADIXLM_CHECK(r.feasible);
  for (NodeId v : r.evictions) EvictLeaf(v);
  auto fresh = pool_.Allocate(r.new_blocks);
  RADIXLM_CHECK_MSG(fresh.has_value(), "reserved blocks are not available");
  Admission a;
  const int64_t m = r.match.length;
  a.cached_tokens = m;
  a.locked_node = r.match.node;
  const int64_t full = m / bs_;
  a.block_table.assign(r.match.blocks.begin(), r.match.blocks.begin() + full);
  if (r.cow_tokens > 0) {
    a.cow_src = r.match.blocks[full];
    a.cow_dst = (*fresh)[0];
    a.cow_tokens = r.cow_tokens;
    ++stats_.cow_copies;
  }
  a.block_table.insert(a.block_table.end(), fresh->begin(), fresh->end());
  a.owned_blocks = *fresh;
  if (m > 0) {
    Lock(a.locked_node);
    for (NodeId n = a.locked_node; n != kRootNode; n = nodes_[n].parent) Touch(n, /*hit=*/true);
  }
  if (prompt_tokens > 0) {  // first admissions only: a re-admission after preemption is no new prompt
    ++stats_.requests;
    stats_.prompt_tokens += prompt_tokens;
    stats_.matched_tokens += m;
    stats_.aligned_matched_tokens += full * bs_;
  }
  ++version_;
  return a;
}

NodeId RadixTree::Split(NodeId id, int64_t at) {
  // The original id keeps the deeper part, so locks taken on it still cover its new parent.
  const NodeId lower = NewNode();
  Node& n = nodes_[id];
  Node& low = nodes_[lower];
  RADIXLM_CHECK(at > n.start && at < n.end());
  const int64_t cut = at - n.start;
  low.parent = n.parent;
  low.start = n.start;
  low.tokens.assign(n.tokens.begin(), n.tokens.begin() + cut);
  const int64_t low_blocks = (at - 1) / bs_ - n.start / bs_ + 1;
  low.blocks.assign(n.blocks.begin(), n.blocks.begin() + low_blocks);
  low.lock = n.lock;
  low.last_access = n.last_access;
  low.hits = n.hits;
  low.evict_key = n.evict_key;
  low.marked_until = n.marked_until;  // both parts lie on the marked path
  const int64_t first_upper_block = at / bs_ - n.start / bs_;
  if (first_upper_block < low_blocks) pool_.Ref(n.blocks[first_upper_block]);  // boundary block shared
  if (n.marked_until > 0) {  // a shared boundary block now counts in both parts
    marked_blocks_ += low_blocks - first_upper_block;
    mark_expiry_.insert({n.marked_until, lower});
  }
  n.blocks.erase(n.blocks.begin(), n.blocks.begin() + first_upper_block);
  n.tokens.erase(n.tokens.begin(), n.tokens.begin() + cut);
  n.start = at;
  low.children[n.tokens[0]] = id;
  nodes_[low.parent].children[low.tokens[0]] = lower;
  n.parent = lower;
  ++version_;
  return lower;
}

int64_t RadixTree::Insert(const std::vector<int32_t>& tokens, int64_t n, const std::vector<int32_t>& table, int64_t ns) {
  RADIXLM_CHECK(n <= static_cast<int64_t>(tokens.size()) && (n + bs_ - 1) / bs_ <= static_cast<int64_t>(table.size()));
  NodeId node = n > 0 ? EnsureRoot(ns) : kRootNode;
  int64_t pos = 0, added = 0;
  while (pos < n) {
    const auto it = nodes_[node].children.find(tokens[pos]);
    if (it == nodes_[node].children.end()) {
      const NodeId child = NewNode();
      Node& c = nodes_[child];
      c.parent = node;
      c.start = pos;
      c.tokens.assign(tokens.begin() + pos, tokens.begin() + n);
      for (int64_t idx = pos / bs_; idx <= (n - 1) / bs_; ++idx) {
        pool_.Ref(table[idx]);
        c.blocks.push_back(table[idx]);
      }
      nodes_[node].children[tokens[pos]] = child;
      if (observer_) observer_->Stored(ns, std::span<const int32_t>(tokens.data(), n), pos);
      added = n - pos;
      cached_tokens_ += added;
      Touch(child);
      UpdateEvictable(node);
      break;
    }
    NodeId child = it->second;
    const Node& c = nodes_[child];
    int64_t k = 0;
    const int64_t max_k = std::min<int64_t>(c.tokens.size(), n - pos);
    while (k < max_k && c.tokens[k] == tokens[pos + k]) ++k;
    if (k < static_cast<int64_t>(c.tokens.size())) child = Split(child, pos + k);
    Touch(child);
    pos += k;
    node = child;
  }
  stats_.inserted_tokens += added;
  ++version_;
  return added;
}

void RadixTree::Lock(NodeId node) {
  for (NodeId n = node; n != kRootNode; n = nodes_[n].parent) {
    ++nodes_[n].lock;
    UpdateEvictable(n);
  }
}

void RadixTree::Unlock(NodeId node) {
  for (NodeId n = node; n != kRootNode; n = nodes_[n].parent) {
    RADIXLM_CHECK(nodes_[n].lock > 0);
    --nodes_[n].lock;
    UpdateEvictable(n);
  }
  ++version_;
}

int32_t RadixTree::EvictLeaf(NodeId id) {
  RADIXLM_CHECK(IsEvictableLeaf(id));
  if (observer_) {  // the leaf's path from position 0, and its namespace
    std::vector<int32_t> path(nodes_[id].end());
    NodeId top = id;
    for (NodeId x = id; x != -1 && !nodes_[x].tokens.empty(); x = nodes_[x].parent) {
      std::copy(nodes_[x].tokens.begin(), nodes_[x].tokens.end(), path.begin() + nodes_[x].start);
      top = nodes_[x].parent;
    }
    int64_t ns = 0;
    for (const auto& [k, root] : namespace_roots_)
      if (root == top) ns = k;
    observer_->Removed(ns, path, nodes_[id].start);
  }
  Node& n = nodes_[id];
  int32_t freed = 0;
  for (int32_t b : n.blocks) {
    freed += pool_.ref_count(b) == 1;
    pool_.Release(b);
  }
  evictable_.erase({n.evict_key, id});
  const NodeId parent = n.parent;
  nodes_[parent].children.erase(n.tokens[0]);
  cached_tokens_ -= static_cast<int64_t>(n.tokens.size());
  stats_.evicted_tokens += static_cast<int64_t>(n.tokens.size());
  ++stats_.evicted_nodes;
  FreeNode(id);
  if (nodes_[parent].ns_root && nodes_[parent].children.empty() && nodes_[parent].lock == 0) {
    // An emptied namespace holds nothing: its root goes (salts must not grow the tree forever).
    for (auto it = namespace_roots_.begin(); it != namespace_roots_.end(); ++it)
      if (it->second == parent) {
        namespace_roots_.erase(it);
        break;
      }
    FreeNode(parent);
    ++version_;
    return freed;
  }
  UpdateEvictable(parent);
  ++version_;
  return freed;
}

int32_t RadixTree::EvictUntilFree(int32_t blocks) {
  int32_t freed = 0;
  while (pool_.num_free() < blocks && !evictable_.empty()) freed += EvictLeaf(evictable_.begin()->second);
  return freed;
}

std::string RadixTree::CheckInvariants() const {
  int64_t tokens = 0;
  std::unordered_map<int32_t, int32_t> tree_refs;
  size_t expected_evictable = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive || id == kRootNode) continue;
    const std::string where = "node " + std::to_string(id) + ": ";
    if (n.ns_root) {
      if (!n.tokens.empty() || n.parent != kRootNode || IsEvictableLeaf(id)) return where + "a namespace root holds tokens";
      bool registered = false;
      for (const auto& [ns, root] : namespace_roots_) registered |= root == id;
      if (!registered) return where + "an unregistered namespace root";
      continue;
    }
    if (n.tokens.empty()) return where + "empty edge";
    if (n.parent < 0 || !nodes_[n.parent].alive) return where + "dead parent";
    const Node& p = nodes_[n.parent];
    auto it = p.children.find(n.tokens[0]);
    if (it == p.children.end() || it->second != id) return where + "parent does not list it under its first token";
    if (n.start != (n.parent == kRootNode ? 0 : p.end())) return where + "start is not the parent's end";
    if (static_cast<int64_t>(n.blocks.size()) != (n.end() - 1) / bs_ - n.start / bs_ + 1) return where + "wrong block count";
    if (n.lock < 0 || (n.parent != kRootNode && p.lock < n.lock)) return where + "lock count not monotone up the tree";
    for (const auto& [tok, c] : n.children)
      if (!nodes_[c].alive || nodes_[c].parent != id) return where + "child link broken";
    for (int32_t b : n.blocks) ++tree_refs[b];
    tokens += static_cast<int64_t>(n.tokens.size());
    const bool in_set = evictable_.count({n.evict_key, id}) > 0;
    if (in_set != IsEvictableLeaf(id)) return where + "evictable set out of date";
    expected_evictable += in_set;
  }
  if (expected_evictable != evictable_.size()) return "evictable set holds dead nodes";
  int64_t marked = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes_.size()); ++id)
    if (nodes_[id].alive && nodes_[id].marked_until > 0) {
      marked += static_cast<int64_t>(nodes_[id].blocks.size());
      if (!mark_expiry_.count({nodes_[id].marked_until, id})) return "a mark without its expiry";
      if (nodes_[id].evict_key.marked != 1) return "a marked node keyed as unmarked";
    }
  if (marked != marked_blocks_) return "marked block count is off";
  if (tokens != cached_tokens_) return "cached token count is off";
  for (const auto& [b, refs] : tree_refs)
    if (pool_.ref_count(b) < refs) return "block " + std::to_string(b) + " has fewer pool references than tree references";
  return pool_.CheckInvariants();
}

}  // namespace radixlm::cache

namespace radixlm::cache {

void RadixTree::VisitPaths(const std::function<void(int64_t, std::span<const int32_t>, int64_t)>& fn) const {
  std::vector<int32_t> path;
  std::function<void(int64_t, NodeId)> visit = [&](int64_t ns, NodeId id) {
    const Node& n = nodes_[id];
    path.resize(n.start);
    path.insert(path.end(), n.tokens.begin(), n.tokens.end());
    if (!n.tokens.empty()) fn(ns, path, n.start);
    for (const auto& [first, child] : n.children) visit(ns, child);
  };
  visit(0, kRootNode);
  for (const auto& [ns, root] : namespace_roots_)
    if (root != kRootNode) visit(ns, root);
}

}  // namespace radixlm::cache
