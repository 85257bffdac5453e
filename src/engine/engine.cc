#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace radixlm::engine {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Engine::Engine(EngineConfig config, Executor& executor, cache::HybridPrefixCache* checkpoints)
    : config_(config), executor_(executor), pool_({config.num_blocks, config.block_tokens}), checkpoints_(checkpoints) {
  // A recurrent state cannot be rolled back to a KV-cache hit: a model with Mamba2 layers
  // reuses a prefix only where the hybrid cache holds a checkpoint, and the KV tree serves the
  // attention layers up to that point. Without a hybrid cache it reuses nothing.
  const int32_t slots = executor_.state_slots(), running = config_.scheduler.max_running;
  if (slots > 0 && (!checkpoints_ || !config_.prefix_cache)) {
    config_.prefix_cache = false;
    checkpoints_ = nullptr;
  }
  if (config_.prefix_cache) tree_ = std::make_unique<cache::RadixTree>(pool_);
  if (checkpoints_) {
    RADIXLM_CHECK_MSG(slots >= 2 * running + config_.checkpoint_slots + 2,
                      "a hybrid cache needs 2 x max_running + checkpoint_slots + 2 state slots");
    for (int32_t s = 2 * running + config_.checkpoint_slots + 1; s >= 2 * running; --s) checkpoint_free_.push_back(s);
    for (int32_t s = 2 * running - 1; s >= running; --s) pending_free_.push_back(s);
    for (int32_t s = running - 1; s >= 0; --s) free_slots_.push_back(s);
  } else {
    for (int32_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
  }
  metrics_.blocks_total = config.num_blocks;
}

Engine::~Engine() { Stop(); }

core::StatusOr<RequestId> Engine::Submit(RequestParams params, TokenCallback callback) {
  const auto reject = [&](core::Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests_rejected;
    return st;
  };
  if (params.prompt.empty()) return reject(core::InvalidArgument("the prompt is empty"));
  if (params.max_tokens < 1) return reject(core::InvalidArgument("max_tokens must be at least 1"));
  for (int32_t id : params.prompt)
    if (id < 0 || id >= executor_.vocab_size())
      return reject(core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary"));
  const int64_t total = static_cast<int64_t>(params.prompt.size()) + params.max_tokens;
  if (total > executor_.max_context())
    return reject(core::OutOfRange("prompt of " + std::to_string(params.prompt.size()) + " tokens plus max_tokens " +
                                   std::to_string(params.max_tokens) + " exceeds the model's context of " +
                                   std::to_string(executor_.max_context()) + " tokens"));
  const int64_t blocks_needed = (total + config_.block_tokens - 1) / config_.block_tokens;
  if (blocks_needed > config_.num_blocks)
    return reject(core::ResourceExhausted("request needs " + std::to_string(blocks_needed) + " KV blocks; the pool has " +
                                          std::to_string(config_.num_blocks)));
  auto r = std::make_unique<Req>(params.sampling);
  r->tokens = params.prompt;
  r->prompt_len = static_cast<int64_t>(params.prompt.size());
  r->params = std::move(params);
  r->callback = std::move(callback);
  r->submit_time = NowSeconds();
  r->usage.prompt_tokens = r->prompt_len;
  RequestId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = r->id = next_id_++;
    r->arrival = arrivals_++;
    ++metrics_.requests_submitted;
    metrics_.prompt_tokens += r->prompt_len;
    inbox_.push_back(std::move(r));
  }
  cv_.notify_all();
  return id;
}

void Engine::Cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

void Engine::DrainInbox() {
  std::vector<std::unique_ptr<Req>> incoming;
  std::vector<RequestId> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& r : incoming) waiting_.push_back(std::move(r));
  for (RequestId id : cancels) {
    for (auto* list : {&waiting_, &running_})
      for (auto& r : *list)
        if (r && r->id == id) r->cancelled = true;
  }
}

int64_t Engine::CachedPrefix(const Req& r) const {
  return tree_ ? tree_->Match(r.tokens, static_cast<int64_t>(r.tokens.size()) - 1).length : 0;
}

bool Engine::Admit(Req& r, std::vector<BlockCopy>* copies) {
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  if (executor_.state_slots() > 0 && free_slots_.empty()) return false;  // wait for a state slot
  if (!tree_) {
    auto blocks = pool_.Allocate(static_cast<int32_t>((n + config_.block_tokens - 1) / config_.block_tokens));
    if (!blocks) return false;
    r.block_table = *blocks;
    r.owned = *blocks;
    r.computed = 0;
  } else {
    // Hybrid models: reuse only up to the deepest checkpoint whose KV is still in the tree.
    int64_t limit = n - 1;
    int32_t ckpt_node = -1, ckpt_slot = -1;
    if (checkpoints_) {
      const int64_t kv = tree_->Match(r.tokens, n - 1).length;
      limit = checkpoints_->CheckpointAtOrBelow(r.tokens, kv, &ckpt_node, &ckpt_slot);
    }
    cache::Reservation res = tree_->Reserve(r.tokens, limit, n);
    // A match locks its deepest node whole, the tail this request does not use too, so a request
    // that fits the pool (Submit checked) could stay infeasible for good. With nothing running no
    // other lock exists: without a match everything is evictable and it must fit.
    if (!res.feasible && running_.empty()) {
      limit = 0;
      ckpt_node = ckpt_slot = -1;
      res = tree_->Reserve(r.tokens, 0, n);
    }
    if (!res.feasible) return false;
    if (checkpoints_) {
      // Speculative insertion: if this input splits a cached edge, prefill checkpoints there.
      const cache::HybridLookup look = checkpoints_->Lookup(std::span<const int32_t>(r.tokens.data(), n - 1));
      r.branch_at = look.branch_checkpoint && look.matched_tokens > limit ? look.matched_tokens : -1;
      r.branch_captured = false;
      r.restore_slot = limit > 0 ? ckpt_slot : -1;
      r.needs_restore = limit > 0;
      r.checkpoint_lock = {};
      r.checkpoint_lock.node = limit > 0 ? ckpt_node : -1;
      checkpoints_->Lock(r.checkpoint_lock);
      r.pending_slot = pending_free_.back();
      pending_free_.pop_back();
    }
    cache::Admission a = tree_->Commit(res, r.first_admission ? r.prompt_len : 0);
    RADIXLM_CHECK(!checkpoints_ || a.cached_tokens == limit);
    if (a.cow_src >= 0) copies->push_back({a.cow_src, a.cow_dst, a.cow_tokens});
    r.block_table = std::move(a.block_table);
    r.owned = std::move(a.owned_blocks);
    r.locked = a.locked_node;
    r.has_lock = a.cached_tokens > 0;
    r.computed = a.cached_tokens;
    if (r.first_admission) {
      r.usage.cached_tokens = a.cached_tokens;
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.cached_prompt_tokens += a.cached_tokens;
    }
  }
  r.prompt_inserted = r.computed >= r.prompt_len;
  r.first_admission = false;
  if (executor_.state_slots() > 0) {
    r.state_slot = free_slots_.back();
    free_slots_.pop_back();
  }
  return true;
}

bool Engine::EnsureBlocks(Req& r, int64_t upto) {
  const int64_t need = (upto + config_.block_tokens - 1) / config_.block_tokens - static_cast<int64_t>(r.block_table.size());
  if (need <= 0) return true;
  if (pool_.num_free() < need && tree_) tree_->EvictUntilFree(static_cast<int32_t>(need));
  auto got = pool_.Allocate(static_cast<int32_t>(need));
  if (!got) return false;
  r.block_table.insert(r.block_table.end(), got->begin(), got->end());
  r.owned.insert(r.owned.end(), got->begin(), got->end());
  return true;
}

void Engine::AdmitCheckpoints(Req& r) {
  if (!checkpoints_ || r.computed <= 0 || r.state_slot < 0) return;
  // The working state holds the state after every computed token: the leaf checkpoint. The
  // cache holds at most checkpoint_slots checkpoints, so the two spare slots are always free.
  RADIXLM_CHECK_MSG(checkpoint_free_.size() >= 2, "hybrid cache capacity exceeds its checkpoint slots");
  const int32_t leaf = checkpoint_free_.back();
  checkpoint_free_.pop_back();
  executor_.CopyState(r.state_slot, leaf);
  int32_t branch = -1;
  if (r.branch_captured) {
    branch = checkpoint_free_.back();
    checkpoint_free_.pop_back();
    executor_.CopyState(r.pending_slot, branch);
  }
  cache::HybridAdmitOptions o;
  o.branch_state_at = r.branch_captured ? r.branch_at : std::numeric_limits<int64_t>::max();
  o.branch_payload = branch;
  o.leaf_payload = leaf;
  const cache::HybridAdmitResult res =
      checkpoints_->AdmitStates(std::span<const int32_t>(r.tokens.data(), r.computed), o);
  if (!res.leaf_used) checkpoint_free_.push_back(leaf);
  if (branch >= 0 && !res.branch_used) checkpoint_free_.push_back(branch);
  for (int32_t p : res.freed_payloads) checkpoint_free_.push_back(p);
}

void Engine::ReleaseResources(Req& r, bool insert) {
  if (checkpoints_ && r.pending_slot >= 0) {
    checkpoints_->Unlock(r.checkpoint_lock);
    r.checkpoint_lock = {};
    pending_free_.push_back(r.pending_slot);
    r.pending_slot = -1;
    r.restore_slot = -1;
    r.needs_restore = false;
    r.branch_at = -1;
    r.branch_captured = false;
  }
  if (tree_ && insert && r.computed > 0) tree_->Insert(r.tokens, r.computed, r.block_table);
  if (tree_ && r.has_lock) tree_->Unlock(r.locked);
  r.has_lock = false;
  for (int32_t b : r.owned) pool_.Release(b);
  r.owned.clear();
  if (r.state_slot >= 0) free_slots_.push_back(r.state_slot);
  r.state_slot = -1;
  r.block_table.clear();
  r.computed = 0;
}

int64_t Engine::AlignedChunk(int64_t computed, int64_t n, int64_t remaining) const {
  const int64_t align = executor_.prefill_alignment();
  if (align <= 0 || n >= remaining) return n;
  const int64_t end = (computed + n) / align * align;
  return end > computed ? end - computed : n;  // too small a budget to reach the grid: split anyway
}

void Engine::Preempt(Req& r) {
  // Keep what was computed in the cache: the recompute usually finds it there.
  ReleaseResources(r, /*insert=*/true);
  ++r.usage.preemptions;
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.preemptions;
}

void Engine::Finish(std::unique_ptr<Req>& r, FinishReason reason, int32_t last_token) {
  if (reason != FinishReason::kCancelled) AdmitCheckpoints(*r);
  ReleaseResources(*r, /*insert=*/reason != FinishReason::kCancelled);
  r->usage.completion_tokens = static_cast<int64_t>(r->tokens.size()) - r->prompt_len;
  r->usage.total_seconds = NowSeconds() - r->submit_time;
  TokenEvent ev;
  ev.id = r->id;
  ev.token = last_token;
  ev.finish = reason;
  ev.usage = r->usage;
  if (r->callback) r->callback(ev);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests_finished;
  }
  r.reset();
}

bool Engine::Step() {
  DrainInbox();
  // Cancellations first: they free resources for everyone else.
  for (auto* list : {&waiting_, &running_})
    for (auto& r : *list)
      if (r && r->cancelled) Finish(r, FinishReason::kCancelled);
  auto compact = [](std::vector<std::unique_ptr<Req>>& v) { v.erase(std::remove(v.begin(), v.end(), nullptr), v.end()); };
  compact(waiting_);
  compact(running_);
  if (waiting_.empty() && running_.empty()) {
    PublishMetrics(0, 0, 0);
    return false;
  }
  const double t0 = NowSeconds();

  // 1. Running sequences: decodes take one token each, prefills a chunk of the budget.
  int64_t budget = config_.scheduler.step_token_budget;
  struct Planned { Req* r; int64_t n; };
  std::vector<Planned> plan;
  std::vector<BlockCopy> copies;
  // Rows of a chunk from `start` that a sequence already planned in this step computes (equal
  // context tokens[0, start), equal tokens after it). An executor that shares them computes
  // them once, so they are not charged: a burst of prompts with one system prompt prefills
  // together instead of one after another.
  const bool shares = executor_.shares_step_prefixes();
  auto shared_with_plan = [&](const std::vector<int32_t>& tokens, int64_t start) -> int64_t {
    if (!shares || start >= static_cast<int64_t>(tokens.size())) return 0;
    int64_t best = 0;
    for (const Planned& p : plan) {
      const std::vector<int32_t>& other = p.r->tokens;
      if (p.r->computed != start || other[start] != tokens[start]) continue;  // cheap test first
      const int64_t end = std::min<int64_t>(start + p.n, static_cast<int64_t>(tokens.size()));
      const int64_t common = std::mismatch(tokens.begin(), tokens.begin() + end, other.begin()).first - tokens.begin();
      if (common > start) best = std::max(best, common - start);
    }
    return best;
  };
  for (size_t i = 0; i < running_.size(); ++i) {
    Req& r = *running_[i];
    const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.computed;
    const bool decode = remaining == 1;
    const int64_t shared = decode ? 0 : shared_with_plan(r.tokens, r.computed);
    int64_t n = decode ? 1
                       : AlignedChunk(r.computed, std::min(remaining, shared + std::max<int64_t>(budget, 0)), remaining);
    if (n <= 0) continue;
    while (!EnsureBlocks(r, r.computed + n)) {
      // Out of blocks: preempt the newest running request (not this one if others exist).
      size_t victim = running_.size() - 1;
      while (victim > i && !running_[victim]) --victim;
      if (victim == i) break;
      Preempt(*running_[victim]);
      waiting_.insert(waiting_.begin(), std::move(running_[victim]));
      running_.erase(running_.begin() + victim);  // victim > i: not planned yet
    }
    if (static_cast<int64_t>(r.block_table.size()) * config_.block_tokens < r.computed + n) {
      // Even alone it cannot grow: give back its blocks and retry later.
      Preempt(r);
      waiting_.insert(waiting_.begin(), std::move(running_[i]));
      running_.erase(running_.begin() + i);
      --i;
      continue;
    }
    plan.push_back({&r, n});
    budget -= std::max<int64_t>(n - shared, 0);
  }

  // 2. Admit waiting requests, cache-aware, while budget (or rows shared with the plan) and
  // batch slots remain.
  if ((budget > 0 || shares) && static_cast<int>(running_.size()) < config_.scheduler.max_running &&
      !waiting_.empty()) {
    std::vector<scheduler::WaitingRequest> views;
    for (const auto& w : waiting_) views.push_back({w->arrival, CachedPrefix(*w), w->waited_steps});
    std::vector<char> admitted(waiting_.size(), 0);
    for (size_t idx : scheduler::AdmissionOrder(views, config_.scheduler)) {
      if (static_cast<int>(running_.size()) >= config_.scheduler.max_running) break;
      Req& r = *waiting_[idx];
      // Out of budget, a request is still admitted when its first rows are shared with the plan
      // (it starts where its cached prefix ends); otherwise keep the order and wait.
      if (budget <= 0 && shared_with_plan(r.tokens, views[idx].cached_tokens) == 0) break;
      if (!Admit(r, &copies)) break;  // no room: keep the order (no overtaking), wait
      admitted[idx] = 1;
      const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.computed;
      const int64_t shared = shared_with_plan(r.tokens, r.computed);
      const int64_t n = AlignedChunk(r.computed, std::min(remaining, shared + std::max<int64_t>(budget, 0)), remaining);
      running_.push_back(std::move(waiting_[idx]));
      if (n <= 0) continue;  // admitted with no rows this step: it starts in the next
      plan.push_back({&r, n});
      budget -= std::max<int64_t>(n - shared, 0);
    }
    for (size_t i = 0; i < waiting_.size(); ++i)
      if (!admitted[i]) ++waiting_[i]->waited_steps;
    compact(waiting_);
  }
  if (plan.empty()) {
    PublishMetrics(0, 0, 0);
    return false;
  }

  // 3. Execute.
  std::vector<StepSequence> seqs;
  int64_t computed_now = 0;
  for (const Planned& p : plan) {
    Req& r = *p.r;
    StepSequence s;
    s.tokens = std::span<const int32_t>(r.tokens.data() + r.computed, p.n);
    s.start_position = static_cast<int32_t>(r.computed);
    s.context = std::span<const int32_t>(r.tokens.data(), r.computed);
    s.block_table = r.block_table;
    s.want_logits = r.computed + p.n == static_cast<int64_t>(r.tokens.size());
    s.state_slot = r.state_slot;
    s.reset_state = r.computed == 0;
    if (r.needs_restore) {
      s.restore_from = r.restore_slot;
      r.needs_restore = false;
    }
    if (r.branch_at > r.computed && r.branch_at <= r.computed + p.n) {
      s.checkpoints.push_back({static_cast<int32_t>(r.branch_at - r.computed), r.pending_slot});
      r.branch_captured = true;
    }
    seqs.push_back(s);
    computed_now += p.n;
  }
  executor_.Execute(copies, seqs, &logits_);

  // 4. Advance, sample, stream, finish.
  const int64_t vocab = executor_.vocab_size();
  size_t row = 0;
  int64_t generated_now = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    Req& r = *plan[k].r;
    r.computed += plan[k].n;
    if (tree_ && !r.prompt_inserted && r.computed >= r.prompt_len) {
      tree_->Insert(r.tokens, r.prompt_len, r.block_table);  // share the prompt with concurrent requests
      r.prompt_inserted = true;
    }
    if (!seqs[k].want_logits) continue;
    const int32_t next = r.sampler.Sample(std::span<const float>(logits_.data() + row * vocab, vocab));
    ++row;
    r.tokens.push_back(next);
    ++generated_now;
    const int64_t generated = static_cast<int64_t>(r.tokens.size()) - r.prompt_len;
    if (generated == 1) r.usage.ttft_seconds = NowSeconds() - r.submit_time;
    TokenEvent ev;
    ev.id = r.id;
    ev.token = next;
    const bool stop = std::find(r.params.stop_ids.begin(), r.params.stop_ids.end(), next) != r.params.stop_ids.end();
    if (stop) ev.finish = FinishReason::kStop;
    else if (generated >= r.params.max_tokens) ev.finish = FinishReason::kLength;
    if (ev.finish == FinishReason::kNone) {
      if (r.callback) r.callback(ev);
      continue;
    }
    // Final token: the finish event carries it with the usage.
    for (auto& ptr : running_)
      if (ptr.get() == &r) {
        Finish(ptr, ev.finish, next);
        break;
      }
  }
  compact(running_);
  PublishMetrics(computed_now, generated_now, NowSeconds() - t0);
  return true;
}

void Engine::PublishMetrics(int64_t computed, int64_t generated, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (computed > 0) ++metrics_.steps;
  metrics_.computed_tokens += computed;
  metrics_.deduplicated_tokens = executor_.deduplicated_rows();
  metrics_.generated_tokens += generated;
  metrics_.step_seconds_total += seconds;
  metrics_.waiting = static_cast<int64_t>(waiting_.size());
  metrics_.running = static_cast<int64_t>(running_.size());
  metrics_.blocks_in_use = pool_.blocks_in_use();
  if (tree_) {
    metrics_.tree_cached_tokens = tree_->cached_tokens();
    metrics_.evicted_tokens = tree_->stats().evicted_tokens;
  }
}

void Engine::RunUntilIdle() {
  while (Step()) {
  }
  DrainInbox();
  RADIXLM_CHECK_MSG(waiting_.empty() && running_.empty(),
                    "engine made no progress with requests pending");
}

void Engine::Start() {
  stop_ = false;
  loop_ = std::thread([this] {
    while (!stop_) {
      if (Step()) continue;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); });
    }
  });
}

void Engine::Stop() {
  stop_ = true;
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

EngineMetrics Engine::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineMetrics m = metrics_;  // loop-side figures as of the last step
  m.waiting += static_cast<int64_t>(inbox_.size());
  return m;
}

}  // namespace radixlm::engine
