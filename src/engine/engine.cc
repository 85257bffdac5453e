#include "engine/engine.h"

#include <algorithm>
#include <chrono>

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

Engine::Engine(EngineConfig config, Executor& executor)
    : config_(config), executor_(executor), pool_({config.num_blocks, config.block_tokens}) {
  // A recurrent state cannot be rolled back to a KV-cache hit, so models with Mamba2 layers
  // run without the KV-only prefix tree (the hybrid cache, cache/hybrid_radix_cache.h, is what
  // serves their prefixes).
  if (executor_.state_slots() > 0) config_.prefix_cache = false;
  if (config_.prefix_cache) tree_ = std::make_unique<cache::RadixTree>(pool_);
  for (int32_t s = executor_.state_slots() - 1; s >= 0; --s) free_slots_.push_back(s);
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
    const cache::Reservation res = tree_->Reserve(r.tokens, n - 1, n);
    if (!res.feasible) return false;
    cache::Admission a = tree_->Commit(res, r.first_admission ? r.prompt_len : 0);
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

void Engine::ReleaseResources(Req& r, bool insert) {
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
  for (size_t i = 0; i < running_.size(); ++i) {
    Req& r = *running_[i];
    const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.computed;
    const bool decode = remaining == 1;
    int64_t n = decode ? 1 : AlignedChunk(r.computed, std::min(remaining, std::max<int64_t>(budget, 0)), remaining);
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
    budget -= n;
  }

  // 2. Admit waiting requests, cache-aware, while budget and batch slots remain.
  if (budget > 0 && static_cast<int>(running_.size()) < config_.scheduler.max_running && !waiting_.empty()) {
    std::vector<scheduler::WaitingRequest> views;
    for (const auto& w : waiting_) views.push_back({w->arrival, CachedPrefix(*w), w->waited_steps});
    std::vector<char> admitted(waiting_.size(), 0);
    for (size_t idx : scheduler::AdmissionOrder(views, config_.scheduler)) {
      if (budget <= 0 || static_cast<int>(running_.size()) >= config_.scheduler.max_running) break;
      Req& r = *waiting_[idx];
      if (!Admit(r, &copies)) break;  // no room: keep the order (no overtaking), wait
      admitted[idx] = 1;
      const int64_t remaining = static_cast<int64_t>(r.tokens.size()) - r.computed;
      const int64_t n = AlignedChunk(r.computed, std::min(remaining, budget), remaining);
      plan.push_back({&r, n});
      budget -= n;
      running_.push_back(std::move(waiting_[idx]));
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
    s.block_table = r.block_table;
    s.want_logits = r.computed + p.n == static_cast<int64_t>(r.tokens.size());
    s.state_slot = r.state_slot;
    s.reset_state = r.computed == 0;
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
