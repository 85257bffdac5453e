#include "cache/memory.h"

#include <algorithm>
#include <limits>
#include <span>
#include <string>

#include "core/status.h"

namespace radixlm::cache {

// The layout: working slots [0, r), branch-capture slots [r, 2r), prompt-end slots, checkpoint
// slots with 1 + captures for admission, then (draft_states) one draft slot per working slot.
static int32_t SlotsBeforeDrafts(const MemoryConfig& c, bool hybrid_cache) {
  if (!hybrid_cache) return c.max_running;
  const int32_t captures = c.prompt_end_checkpoints ? 2 : 1;
  return (1 + captures) * c.max_running + c.checkpoint_slots + 1 + captures;
}

int32_t Memory::StateSlots(const MemoryConfig& c, bool hybrid_cache) {
  if (!c.recurrent) return 0;
  return SlotsBeforeDrafts(c, hybrid_cache) + (c.draft_states ? c.max_running : 0);
}

int64_t Memory::Mark(const std::vector<int32_t>& tokens, int64_t n, const MemorySeq& seq, double until) {
  if (!tree_ || n <= 0) return 0;
  const auto share = static_cast<int64_t>(config_.mark_share * config_.num_blocks);
  return tree_->Mark(tokens, n, seq.ns, until, share);
}

Memory::Memory(MemoryConfig config, PrefixCaches caches)
    : config_(config),
      pool_({config.mode == MemoryMode::kByteBudget ? 0 : config.num_blocks, config.block_tokens}),
      checkpoints_(caches.checkpoints),
      tier_(caches.tier) {
  if (config_.mode == MemoryMode::kByteBudget) {
    // Nothing is stored: no blocks, no tree, no state slots; the policy decides hits.
    budget_ = config_.prefix_cache ? caches.budget : nullptr;
    config_.prefix_cache = budget_ != nullptr;
    config_.recurrent = false;
    checkpoints_ = nullptr;
    return;
  }
  // A recurrent state cannot be rolled back to a KV-cache hit: a model with recurrent layers
  // reuses a prefix only where the hybrid cache holds a checkpoint, and the KV tree serves the
  // attention layers up to that point. Without a hybrid cache it reuses nothing.
  if (!config_.recurrent) checkpoints_ = nullptr;

  if (config_.recurrent && (!checkpoints_ || !config_.prefix_cache)) {
    config_.prefix_cache = false;
    checkpoints_ = nullptr;
  }
  if (!config_.prefix_cache) tier_ = nullptr;
  if (config_.prefix_cache) {
    auto policy = KvEvictionPolicy::Make(config_.eviction);
    RADIXLM_CHECK_MSG(policy.ok(), policy.status().message());
    tree_ = std::make_unique<RadixTree>(pool_, *policy);
  }
  if (!config_.recurrent) return;
  draft_slot_base_ = SlotsBeforeDrafts(config_, checkpoints_ != nullptr);
  const int32_t r = config_.max_running;
  for (int32_t s = r - 1; s >= 0; --s) free_slots_.push_back(s);
  if (checkpoints_) {
    for (int32_t s = 2 * r - 1; s >= r; --s) capture_free_.push_back(s);
    int32_t next = 2 * r;
    if (config_.prompt_end_checkpoints) {
      for (int32_t s = 3 * r - 1; s >= 2 * r; --s) prompt_end_free_.push_back(s);
      next = 3 * r;
    }
    const int32_t end = SlotsBeforeDrafts(config_, true);
    for (int32_t s = end - 1; s >= next; --s) checkpoint_free_.push_back(s);
  }
}

int64_t Memory::CachedPrefix(const std::vector<int32_t>& tokens, const MemorySeq& seq) const {
  // kByteBudget: the policy has no side-effect-free lookup; admission order is arrival order.
  return tree_ ? tree_->Match(tokens, static_cast<int64_t>(tokens.size()) - 1, seq.ns).length : 0;
}

int64_t Memory::Namespace(const std::string& salt) {
  if (salt.empty()) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a, then splitmix64's finaliser
  for (unsigned char c : salt) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  const int64_t ns = static_cast<int64_t>(h & ((uint64_t{1} << 60) - 1));
  return ns == 0 ? 1 : ns;
}

void Memory::Bind(MemorySeq* seq, const std::string& cache_salt) {
  RADIXLM_CHECK(!seq->holds_memory());
  seq->ns = Namespace(cache_salt);
}

Memory::CheckpointKey::CheckpointKey(const std::vector<int32_t>& tokens, int64_t n, int64_t ns) {
  if (ns == 0) {
    span = std::span<const int32_t>(tokens.data(), n);
    return;
  }
  // Tokens no vocabulary has: namespaces never share a path in the checkpoint tree.
  storage.reserve(n + 2);
  storage.push_back(-1 - static_cast<int32_t>(ns & 0x3fffffff));
  storage.push_back(-1 - static_cast<int32_t>((ns >> 30) & 0x3fffffff));
  storage.insert(storage.end(), tokens.begin(), tokens.begin() + n);
  span = storage;
  offset = 2;
}

int64_t Memory::PromptEnd(int64_t prompt_len, int64_t covered) const {
  if (!config_.prompt_end_checkpoints) return -1;
  const int64_t at = prompt_len - 1;
  return at > 0 && at - covered >= std::max<int64_t>(config_.prompt_end_min_gap, 1) ? at : -1;
}

int64_t Memory::max_sequence_tokens() const {
  if (config_.mode == MemoryMode::kByteBudget) return std::numeric_limits<int64_t>::max() / 4;
  return int64_t{config_.num_blocks} * config_.block_tokens;
}

bool Memory::Admit(const std::vector<int32_t>& tokens, int64_t count_prompt, bool alone, MemorySeq* seq, Admitted* out) {
  RADIXLM_CHECK(!seq->holds_memory());
  const int64_t n = static_cast<int64_t>(tokens.size());
  *out = {};
  if (config_.mode == MemoryMode::kByteBudget) {
    if (budget_ && count_prompt > 0) LookupBudget(tokens, count_prompt, seq, out);
    return true;
  }
  if (config_.recurrent && free_slots_.empty()) return false;  // wait for a state slot
  if (!tree_) {
    auto blocks = pool_.Allocate(static_cast<int32_t>((n + config_.block_tokens - 1) / config_.block_tokens));
    if (!blocks) return false;
    seq->block_table = *blocks;
    seq->owned = *blocks;
  } else if (!AdmitToTree(tokens, count_prompt, alone, seq, out)) {
    return false;
  }
  out->hit_tokens = out->cached_tokens;
  if (config_.recurrent) {
    seq->state_slot = free_slots_.back();
    free_slots_.pop_back();
    if (tier_) PlanStateLoad(tokens, seq, out);
  }
  return true;
}

void Memory::LookupBudget(const std::vector<int32_t>& tokens, int64_t count_prompt, MemorySeq* seq, Admitted* out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const CheckpointKey key(tokens, count_prompt, seq->ns);
  const HybridLookup look = budget_->Lookup(key.span);
  const int64_t hit = std::max<int64_t>(0, look.hit_tokens - key.offset);
  const int64_t matched = std::max<int64_t>(0, look.matched_tokens - key.offset);
  seq->prompt_end_at = PromptEnd(count_prompt, std::max(hit, look.branch_checkpoint ? matched : 0));
  out->hit_tokens = hit;
  out->cached_tokens = std::min(hit, n - 1);  // at least one token is computed
}

bool Memory::AdmitToTree(const std::vector<int32_t>& tokens, int64_t count_prompt, bool alone, MemorySeq* seq,
                         Admitted* out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  // Hybrid models: reuse only up to the deepest checkpoint whose KV is still in the tree.
  int64_t limit = n - 1;
  int32_t ckpt_node = -1, ckpt_slot = -1;
  if (checkpoints_) {
    const int64_t kv = tree_->Match(tokens, n - 1, seq->ns).length;
    const CheckpointKey key(tokens, kv, seq->ns);
    limit = std::max<int64_t>(0, checkpoints_->CheckpointAtOrBelow(key.span, kv + key.offset, &ckpt_node, &ckpt_slot) - key.offset);
  }
  Reservation res = tree_->Reserve(tokens, limit, n, seq->ns);
  // A match locks its deepest node whole, the tail this sequence does not use too, so a
  // sequence that fits the pool could stay infeasible for good. Alone, no other lock exists:
  // without a match everything is evictable and it must fit.
  if (!res.feasible && alone) {
    limit = 0;
    ckpt_node = ckpt_slot = -1;
    res = tree_->Reserve(tokens, 0, n, seq->ns);
  }
  if (!res.feasible) return false;
  if (checkpoints_) PlanCheckpoints(tokens, count_prompt, limit, ckpt_node, ckpt_slot, seq);
  Admission a = tree_->Commit(res, count_prompt);
  RADIXLM_CHECK(!checkpoints_ || a.cached_tokens == limit);
  if (a.cow_src >= 0) out->copies.push_back({a.cow_src, a.cow_dst, a.cow_tokens});
  seq->block_table = std::move(a.block_table);
  seq->owned = std::move(a.owned_blocks);
  seq->locked = a.locked_node;
  seq->has_lock = a.cached_tokens > 0;
  out->cached_tokens = a.cached_tokens;
  if (tier_ && !checkpoints_) PlanBlockLoads(tokens, limit, seq, out);
  return true;
}

void Memory::PlanCheckpoints(const std::vector<int32_t>& tokens, int64_t count_prompt, int64_t limit,
                             int32_t ckpt_node, int32_t ckpt_slot, MemorySeq* seq) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  // Speculative insertion: if this input splits a cached edge, prefill checkpoints there.
  const CheckpointKey key(tokens, n - 1, seq->ns);
  const HybridLookup look = count_prompt > 0 ? checkpoints_->Lookup(key.span) : checkpoints_->Peek(key.span);
  const int64_t matched = look.matched_tokens - key.offset;
  seq->branch_at = look.branch_checkpoint && matched > limit ? matched : -1;
  seq->branch_captured = false;
  seq->restore_slot = limit > 0 ? ckpt_slot : -1;
  seq->needs_restore = limit > 0;
  seq->checkpoint_lock = {};
  seq->checkpoint_lock.node = limit > 0 ? ckpt_node : -1;
  checkpoints_->Lock(seq->checkpoint_lock);
  seq->capture_slot = capture_free_.back();
  capture_free_.pop_back();
  // The prompt-end state, unless a hit or the branch point covers it already.
  if (count_prompt > 0) seq->prompt_end_at = PromptEnd(count_prompt, std::max(limit, seq->branch_at));
  seq->prompt_end_captured = false;
  if (seq->prompt_end_at > limit && seq->prompt_end_at != seq->branch_at) {
    seq->prompt_end_slot = prompt_end_free_.back();
    prompt_end_free_.pop_back();
  }
}

int64_t Memory::HeldRun(const std::vector<int32_t>& tokens, int64_t from, int64_t end, MemorySeq* seq) {
  std::vector<TierKey> keys;
  for (int64_t idx = from; idx < end; ++idx) keys.push_back(TierKeyOf(tokens, idx, seq));
  const std::vector<char> held = tier_->ContainsMany(keys);  // one round of probes
  return from + (std::find(held.begin(), held.end(), 0) - held.begin());
}

void Memory::PlanBlockLoads(const std::vector<int32_t>& tokens, int64_t limit, MemorySeq* seq, Admitted* out) {
  // The match goes on through the full blocks the tier holds, up to the limit.
  const int64_t bs = config_.block_tokens;
  out->load_from = out->cached_tokens / bs;
  const int64_t held = HeldRun(tokens, out->load_from, limit / bs, seq);
  for (int64_t idx = out->load_from; idx < held; ++idx) out->loads.push_back({seq->block_table[idx], TierKeyOf(tokens, idx, seq)});
}

void Memory::PlanStateLoad(const std::vector<int32_t>& tokens, MemorySeq* seq, Admitted* out) {
  const int64_t bs = config_.block_tokens, n = static_cast<int64_t>(tokens.size());
  const int64_t m = out->cached_tokens, first = m / bs;
  const int64_t have = HeldRun(tokens, first, std::max(first, (n - 1) / bs), seq);  // full blocks held past the hit
  const BlockHasher& h = tier_->hasher();
  for (int64_t b = std::min(have, (n - 1) / bs); b >= first; --b) {
    const TierKey parent = b > 0 ? TierKeyOf(tokens, b - 1, seq) : h.none_hash();
    int32_t best = -1;
    TierKey best_key{};
    for (const TierState& s : tier_->StatesAfter(parent)) {
      const int64_t p = b * bs + s.tail;
      if (s.tail < 0 || s.tail >= bs || s.tail <= best || p <= m || p > n - 1) continue;
      const TierKey key = h.StateAfter(b > 0 ? &parent : nullptr, std::span<const int32_t>(tokens.data() + b * bs, s.tail), seq->ns);
      if (key != s.key) continue;  // another path's state after the same block
      best = s.tail;
      best_key = key;
    }
    if (best < 0) continue;
    out->load_from = first;
    for (int64_t idx = first; idx < b; ++idx) out->loads.push_back({seq->block_table[idx], TierKeyOf(tokens, idx, seq)});
    out->state_load = StateTransfer{seq->state_slot, best > 0 ? seq->block_table[b] : -1, best, parent, best_key};
    out->state_at = b * bs + best;
    return;
  }
}

void Memory::OfferState(const std::vector<int32_t>& tokens, int64_t p, int32_t slot, MemorySeq* seq) {
  const int64_t bs = config_.block_tokens, b = p / bs;
  const int32_t tail = static_cast<int32_t>(p % bs);
  const TierKey parent = b > 0 ? TierKeyOf(tokens, b - 1, seq) : tier_->hasher().none_hash();
  const TierKey key =
      tier_->hasher().StateAfter(b > 0 ? &parent : nullptr, std::span<const int32_t>(tokens.data() + b * bs, tail), seq->ns);
  state_stores_.push_back({slot, tail > 0 ? seq->block_table[b] : -1, tail, parent, key});
  ++tier_stats_.offered_states;
}

void Memory::Loaded(MemorySeq* seq, int32_t loaded, Admitted* out, bool state_loaded) {
  RADIXLM_CHECK(loaded >= 0 && loaded <= static_cast<int32_t>(out->loads.size()));
  if (out->state_load) {
    // A hybrid's hit needs the state and every block before it; else it stays the pool's.
    const bool ok = loaded == static_cast<int32_t>(out->loads.size()) && state_loaded;
    tier_stats_.loaded_blocks += loaded;
    tier_stats_.failed_loads += !ok;
    if (!ok) return;
    ++tier_stats_.state_hits;
    tier_stats_.hit_tokens += out->state_at - out->cached_tokens;
    out->hit_tokens += out->state_at - out->cached_tokens;
    out->cached_tokens = out->state_at;
    std::erase_if(out->copies, [&](const BlockCopyPlan& c) { return c.dst == seq->block_table[out->load_from]; });
    seq->needs_restore = false;  // the working slot holds the loaded state
    seq->restore_slot = -1;
    if (seq->branch_at <= out->state_at) seq->branch_at = -1;
    return;
  }
  tier_stats_.loaded_blocks += loaded;
  tier_stats_.failed_loads += loaded < static_cast<int32_t>(out->loads.size());
  if (loaded == 0) return;
  const int64_t end = (out->load_from + loaded) * config_.block_tokens;
  tier_stats_.hit_tokens += end - out->cached_tokens;
  out->hit_tokens += end - out->cached_tokens;
  out->cached_tokens = end;
  // A block loaded whole supersedes the copy of its matched part.
  std::erase_if(out->copies, [&](const BlockCopyPlan& c) { return c.dst == seq->block_table[out->load_from]; });
}

const TierKey& Memory::TierKeyOf(const std::vector<int32_t>& tokens, int64_t index, MemorySeq* seq) const {
  const int64_t bs = config_.block_tokens;
  auto& keys = seq->tier_keys;
  while (static_cast<int64_t>(keys.size()) <= index) {
    const int64_t b = static_cast<int64_t>(keys.size());
    keys.push_back(tier_->hasher().Next(keys.empty() ? nullptr : &keys.back(),
                                        std::span<const int32_t>(tokens.data() + b * bs, bs), seq->ns));
  }
  return keys[index];
}

void Memory::MarkComputing(const std::vector<int32_t>& tokens, int64_t from, int64_t to, MemorySeq* seq,
                           double ttl_seconds, double tokens_per_second) {
  if (!tier_ || !tree_ || !tier_->SharesMarks()) return;
  const int64_t first = from / config_.block_tokens, last = to / config_.block_tokens;
  if (first >= last) return;
  std::vector<TierKey> keys;
  for (int64_t idx = first; idx < last; ++idx) keys.push_back(TierKeyOf(tokens, idx, seq));
  tier_->MarkComputing(keys, ttl_seconds, tokens_per_second);
  seq->marked_from = seq->marked_to > seq->marked_from ? std::min(seq->marked_from, first) : first;
  seq->marked_to = std::max(seq->marked_to, last);
}

void Memory::ClearComputing(MemorySeq* seq) {
  if (!tier_ || seq->marked_to <= seq->marked_from) return;
  tier_->ClearComputing(std::span<const TierKey>(seq->tier_keys).subspan(
      static_cast<size_t>(seq->marked_from), static_cast<size_t>(seq->marked_to - seq->marked_from)));
  seq->marked_from = seq->marked_to = 0;
}

std::optional<Memory::Elsewhere> Memory::ComputingElsewhere(const std::vector<int32_t>& tokens, int64_t prompt,
                                                            MemorySeq* seq) const {
  if (!tier_ || !tree_ || !tier_->SharesMarks()) return std::nullopt;  // no other replica marks here
  const int64_t bs = config_.block_tokens;
  const int64_t full = (prompt - 1) / bs;  // blocks a hit may serve (the last prompt token is always computed)
  const int64_t cached = CachedPrefix(tokens, *seq) / bs;
  if (cached >= full) return std::nullopt;
  std::vector<TierKey> keys;
  for (int64_t idx = cached; idx < full; ++idx) keys.push_back(TierKeyOf(tokens, idx, seq));
  const std::vector<char> held = tier_->ContainsMany(keys);
  const auto lacking = std::find(held.begin(), held.end(), 0);
  if (lacking == held.end()) return std::nullopt;
  const int64_t first = cached + (lacking - held.begin());
  const std::optional<double> rate = tier_->ComputingElsewhere(keys[static_cast<size_t>(first - cached)]);
  if (!rate) return std::nullopt;
  return Elsewhere{prompt - first * bs, *rate};
}

void Memory::OfferToTier(const std::vector<int32_t>& tokens, int64_t n, MemorySeq* seq) {
  if (!tier_) return;
  const int64_t full = n / config_.block_tokens;
  std::vector<int64_t> offered;
  std::vector<TierKey> keys;
  std::vector<TierKey> fresh;
  for (int64_t idx = seq->tier_offered; idx < full; ++idx) fresh.push_back(TierKeyOf(tokens, idx, seq));
  const std::vector<char> held = tier_->HeldByAll(fresh);  // one round of probes; a stack: each tier lacking one gets it
  for (int64_t idx = seq->tier_offered; idx < full; ++idx) {
    const TierKey& key = fresh[idx - seq->tier_offered];
    if (held[idx - seq->tier_offered]) continue;
    stores_.push_back({seq->block_table[idx], key});
    ++tier_stats_.offered_blocks;
    if (observer_) {
      offered.push_back(idx);
      keys.push_back(key);
    }
  }
  if (!offered.empty())
    for (const std::string& medium : tier_->media())
      observer_->TierStored(medium, seq->ns, std::span<const int32_t>(tokens.data(), full * config_.block_tokens), offered, keys);
  seq->tier_offered = std::max(seq->tier_offered, full);
}

bool Memory::Grow(MemorySeq* seq, int64_t upto) {
  if (config_.mode == MemoryMode::kByteBudget) return true;
  const int64_t need =
      (upto + config_.block_tokens - 1) / config_.block_tokens - static_cast<int64_t>(seq->block_table.size());
  if (need <= 0) return true;
  if (pool_.num_free() < need && tree_) tree_->EvictUntilFree(static_cast<int32_t>(need));
  auto got = pool_.Allocate(static_cast<int32_t>(need));
  if (!got) return false;
  seq->block_table.insert(seq->block_table.end(), got->begin(), got->end());
  seq->owned.insert(seq->owned.end(), got->begin(), got->end());
  return true;
}

void Memory::Trim(MemorySeq* seq, int64_t tokens) {
  if (config_.mode == MemoryMode::kByteBudget) return;
  const size_t keep = static_cast<size_t>((tokens + config_.block_tokens - 1) / config_.block_tokens);
  while (seq->block_table.size() > keep && !seq->owned.empty() && seq->owned.back() == seq->block_table.back()) {
    pool_.Release(seq->owned.back());
    seq->owned.pop_back();
    seq->block_table.pop_back();
  }
}

StepState Memory::StateFor(MemorySeq* seq, int64_t from, int64_t n) {
  StepState s;
  s.slot = seq->state_slot;
  s.reset = from == 0;
  if (seq->needs_restore) {
    s.restore_from = seq->restore_slot;
    seq->needs_restore = false;
  }
  if (seq->branch_at > from && seq->branch_at <= from + n) {
    s.captures.push_back({static_cast<int32_t>(seq->branch_at - from), seq->capture_slot});
    seq->branch_captured = true;
  }
  if (seq->prompt_end_slot >= 0 && seq->prompt_end_at > from && seq->prompt_end_at <= from + n) {
    s.captures.push_back({static_cast<int32_t>(seq->prompt_end_at - from), seq->prompt_end_slot});
    seq->prompt_end_captured = true;
  }
  std::sort(s.captures.begin(), s.captures.end(),
            [](const StepState::Capture& a, const StepState::Capture& b) { return a.after_tokens < b.after_tokens; });
  return s;
}

void Memory::Publish(const std::vector<int32_t>& tokens, int64_t n, MemorySeq* seq) {
  // kByteBudget: a sequence enters the policy's tree only when it finishes (Marconi's model).
  if (!tree_) return;
  tree_->Insert(tokens, n, seq->block_table, seq->ns);
  OfferToTier(tokens, n, seq);
}

void Memory::PublishComputed(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq) {
  if (!tree_ || config_.recurrent) return;
  const int64_t n = computed / config_.block_tokens * config_.block_tokens;
  if (n <= seq->published) return;
  tree_->Insert(tokens, n, seq->block_table, seq->ns);
  OfferToTier(tokens, n, seq);
  seq->published = n;
}

bool Memory::ShareAhead(MemorySeq* seq, int64_t computed, int64_t at) {
  if (!tree_ || computed >= at || at <= 0) return false;
  if (seq->share_at == at) return true;
  if (seq->share_at >= 0) return false;
  if (checkpoints_) {
    // The capture slot holds one state: a branch point still to be captured keeps it (a
    // captured one was admitted after its step, PublishAhead).
    if (seq->capture_slot < 0 || (seq->branch_at >= 0 && seq->branch_at != at)) return false;
    seq->branch_at = at;
    seq->branch_captured = false;
  }
  seq->share_at = at;
  return true;
}

std::vector<StateCopy> Memory::PublishAhead(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq) {
  std::vector<StateCopy> copies;
  if (seq->share_at >= 0 && computed >= seq->share_at) {
    tree_->Insert(tokens, seq->share_at, seq->block_table, seq->ns);
    OfferToTier(tokens, seq->share_at, seq);
    seq->share_at = -1;
  }
  // A captured branch state goes into the cache now rather than at finish: requests arriving
  // meanwhile can use it, and the capture slot is free for a ShareAhead point.
  if (!checkpoints_ || !seq->branch_captured || seq->share_at >= 0) return copies;
  const int64_t at = seq->branch_at;
  tree_->Insert(tokens, at, seq->block_table, seq->ns);  // usually cached already: a split point
  // The state, as the leaf of the path tokens[0, at): the same admission as a finished
  // sequence's, so the policy prices and evicts it like any other checkpoint.
  RADIXLM_CHECK_MSG(!checkpoint_free_.empty(), "hybrid cache capacity exceeds its checkpoint slots");
  const int32_t slot = checkpoint_free_.back();
  checkpoint_free_.pop_back();
  copies.push_back({seq->capture_slot, slot});
  HybridAdmitOptions o;
  const CheckpointKey key(tokens, at, seq->ns);
  o.branch_state_at = std::numeric_limits<int64_t>::max();
  o.leaf_payload = slot;
  const HybridAdmitResult res = checkpoints_->AdmitStates(key.span, o);
  if (tier_ && res.leaf_used) OfferState(tokens, at, seq->capture_slot, seq);
  if (!res.leaf_used) checkpoint_free_.push_back(slot);
  for (int32_t p : res.freed_payloads) checkpoint_free_.push_back(p);
  seq->branch_at = -1;
  seq->branch_captured = false;
  return copies;
}

std::vector<StateCopy> Memory::AdmitStates(const std::vector<int32_t>& tokens, int64_t computed, MemorySeq* seq) {
  std::vector<StateCopy> copies;
  if (!checkpoints_ || computed <= 0 || seq->state_slot < 0) return copies;
  // The working state holds the state after every computed token: the leaf checkpoint. The
  // cache holds at most checkpoint_slots checkpoints, so the spare slots are always free.
  RADIXLM_CHECK_MSG(checkpoint_free_.size() >= (config_.prompt_end_checkpoints ? 3u : 2u),
                    "hybrid cache capacity exceeds its checkpoint slots");
  const int32_t leaf = checkpoint_free_.back();
  checkpoint_free_.pop_back();
  copies.push_back({seq->state_slot, leaf});
  int32_t branch = -1;
  if (seq->branch_captured) {
    branch = checkpoint_free_.back();
    checkpoint_free_.pop_back();
    copies.push_back({seq->capture_slot, branch});
  }
  int32_t prompt_end = -1;
  if (seq->prompt_end_captured && seq->prompt_end_at < computed) {
    prompt_end = checkpoint_free_.back();
    checkpoint_free_.pop_back();
    copies.push_back({seq->prompt_end_slot, prompt_end});
  }
  HybridAdmitOptions o;
  const CheckpointKey key(tokens, computed, seq->ns);
  o.branch_state_at = seq->branch_captured ? seq->branch_at + key.offset : std::numeric_limits<int64_t>::max();
  o.branch_payload = branch;
  o.leaf_payload = leaf;
  o.prompt_end_at = prompt_end >= 0 ? seq->prompt_end_at + key.offset : -1;
  o.prompt_end_payload = prompt_end;
  const HybridAdmitResult res = checkpoints_->AdmitStates(key.span, o);
  // The states the policy keeps go to the tier too (its FLOP-aware choice of what is worth it).
  if (tier_ && res.leaf_used) OfferState(tokens, computed, seq->state_slot, seq);
  if (tier_ && prompt_end >= 0 && res.prompt_end_used) OfferState(tokens, seq->prompt_end_at, seq->prompt_end_slot, seq);
  if (tier_ && branch >= 0 && res.branch_used) OfferState(tokens, seq->branch_at, seq->capture_slot, seq);
  if (!res.leaf_used) checkpoint_free_.push_back(leaf);
  if (branch >= 0 && !res.branch_used) checkpoint_free_.push_back(branch);
  if (prompt_end >= 0 && !res.prompt_end_used) checkpoint_free_.push_back(prompt_end);
  for (int32_t p : res.freed_payloads) checkpoint_free_.push_back(p);
  // A copy into a slot the cache did not keep is harmless (the slot is free and unread), and
  // keeping it in the list keeps the copy order simple: working and capture slots are read
  // before they are handed back below.
  return copies;
}

std::vector<StateCopy> Memory::Release(const std::vector<int32_t>& tokens, int64_t computed, ReleaseMode mode,
                                       MemorySeq* seq) {
  std::vector<StateCopy> copies;
  if (config_.mode == MemoryMode::kByteBudget) {
    // The executor stores nothing, so the last output token is as good as computed: admit the
    // whole sequence (input + output), as Marconi's simulator does.
    if (budget_ && mode == ReleaseMode::kFinish) {
      const CheckpointKey key(tokens, static_cast<int64_t>(tokens.size()), seq->ns);
      budget_->Admit(key.span, seq->prompt_end_at >= 0 ? seq->prompt_end_at + key.offset : -1);
    }
    return copies;
  }
  if (mode == ReleaseMode::kFinish) copies = AdmitStates(tokens, computed, seq);
  if (checkpoints_ && seq->capture_slot >= 0) {
    checkpoints_->Unlock(seq->checkpoint_lock);
    seq->checkpoint_lock = {};
    capture_free_.push_back(seq->capture_slot);
    seq->capture_slot = -1;
    if (seq->prompt_end_slot >= 0) prompt_end_free_.push_back(seq->prompt_end_slot);
    seq->prompt_end_slot = -1;
    seq->prompt_end_captured = false;
    seq->restore_slot = -1;
    seq->needs_restore = false;
    seq->branch_at = -1;
    seq->branch_captured = false;
  }
  seq->share_at = -1;
  if (tree_ && mode != ReleaseMode::kCancel && computed > 0) {
    tree_->Insert(tokens, computed, seq->block_table, seq->ns);
    OfferToTier(tokens, computed, seq);
  }
  seq->tier_offered = 0;  // a re-admission gets a fresh block table
  seq->published = 0;
  if (tree_ && seq->has_lock) tree_->Unlock(seq->locked);
  seq->has_lock = false;
  seq->locked = kRootNode;
  for (int32_t b : seq->owned) pool_.Release(b);
  seq->owned.clear();
  if (seq->state_slot >= 0) free_slots_.push_back(seq->state_slot);
  seq->state_slot = -1;
  seq->block_table.clear();
  return copies;
}

std::string Memory::CheckInvariants() const {
  if (tree_) {
    const std::string t = tree_->CheckInvariants();
    if (!t.empty()) return t;
  }
  const std::string p = pool_.CheckInvariants();
  if (!p.empty()) return p;
  auto distinct = [](std::vector<int32_t> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (!distinct(free_slots_) || !distinct(capture_free_) || !distinct(prompt_end_free_) || !distinct(checkpoint_free_))
    return "a state slot is free twice";
  if (static_cast<int32_t>(free_slots_.size()) > (config_.recurrent ? config_.max_running : 0))
    return "more free working slots than running sequences";
  if (checkpoints_ && config_.recurrent) {
    // Every checkpoint slot is either free or held by exactly one cached checkpoint.
    const int64_t region = SlotsBeforeDrafts(config_, true) - (config_.prompt_end_checkpoints ? 3 : 2) * config_.max_running;
    if (static_cast<int64_t>(checkpoint_free_.size()) + checkpoints_->NodeCount() != region)
      return "checkpoint slots leaked or double-held: " + std::to_string(checkpoint_free_.size()) + " free + " +
             std::to_string(checkpoints_->NodeCount()) + " cached != " + std::to_string(region);
  }
  return "";
}

}  // namespace radixlm::cache
