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

cache::MemoryConfig Engine::MemoryConfigOf(const EngineConfig& c, const Executor& executor) {
  return {.num_blocks = c.num_blocks, .block_tokens = c.block_tokens, .prefix_cache = c.prefix_cache,
          .max_running = c.scheduler.max_running, .recurrent = executor.state_slots() > 0,
          .checkpoint_slots = c.checkpoint_slots};
}

Engine::Engine(EngineConfig config, Executor& executor, cache::HybridPrefixCache* checkpoints)
    : config_(config), executor_(executor), memory_(MemoryConfigOf(config, executor), checkpoints) {
  // Memory turns the prefix cache off for a recurrent model without a hybrid cache.
  config_.prefix_cache = memory_.prefix_cache();
  RADIXLM_CHECK_MSG(executor_.state_slots() >= cache::Memory::StateSlots(memory_.config(), memory_.checkpoints() != nullptr),
                    "the executor's state store is smaller than the memory's slot layout");
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

bool Engine::Admit(Req& r, std::vector<BlockCopy>* copies) {
  cache::Memory::Admitted a;
  if (!memory_.Admit(r.tokens, r.first_admission ? r.prompt_len : 0, running_.empty(), &r.mem, &a)) return false;
  for (const cache::BlockCopyPlan& c : a.copies) copies->push_back({c.src, c.dst, c.tokens});
  r.computed = a.cached_tokens;
  if (r.first_admission) {
    r.usage.cached_tokens = a.cached_tokens;
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.cached_prompt_tokens += a.cached_tokens;
  }
  r.prompt_inserted = r.computed >= r.prompt_len;
  r.first_admission = false;
  return true;
}

void Engine::Release(Req& r, cache::ReleaseMode mode) {
  for (const cache::StateCopy& c : memory_.Release(r.tokens, r.computed, mode, &r.mem)) executor_.CopyState(c.src, c.dst);
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
  Release(r, cache::ReleaseMode::kPreempt);
  ++r.usage.preemptions;
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.preemptions;
}

void Engine::Finish(std::unique_ptr<Req>& r, FinishReason reason, int32_t last_token) {
  Release(*r, reason == FinishReason::kCancelled ? cache::ReleaseMode::kCancel : cache::ReleaseMode::kFinish);
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
    while (!memory_.Grow(&r.mem, r.computed + n)) {
      // Out of blocks: preempt the newest running request (not this one if others exist).
      size_t victim = running_.size() - 1;
      while (victim > i && !running_[victim]) --victim;
      if (victim == i) break;
      Preempt(*running_[victim]);
      waiting_.insert(waiting_.begin(), std::move(running_[victim]));
      running_.erase(running_.begin() + victim);  // victim > i: not planned yet
    }
    if (static_cast<int64_t>(r.mem.block_table.size()) * config_.block_tokens < r.computed + n) {
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
    for (const auto& w : waiting_) views.push_back({w->arrival, memory_.CachedPrefix(w->tokens), w->waited_steps});
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
    s.block_table = r.mem.block_table;
    s.want_logits = r.computed + p.n == static_cast<int64_t>(r.tokens.size());
    const cache::StepState st = memory_.StateFor(&r.mem, r.computed, p.n);
    s.state_slot = st.slot;
    s.reset_state = st.reset;
    s.restore_from = st.restore_from;
    for (const cache::StepState::Capture& c : st.captures) s.checkpoints.push_back({c.after_tokens, c.slot});
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
    if (!r.prompt_inserted && r.computed >= r.prompt_len) {
      memory_.Publish(r.tokens, r.prompt_len, r.mem);  // share the prompt with concurrent requests
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
  metrics_.blocks_in_use = memory_.pool().blocks_in_use();
  if (const cache::RadixTree* tree = memory_.tree()) {
    metrics_.tree_cached_tokens = tree->cached_tokens();
    metrics_.evicted_tokens = tree->stats().evicted_tokens;
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
