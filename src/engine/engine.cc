#include "engine/engine.h"

#include <future>

#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

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
  return {.mode = c.memory_mode, .num_blocks = c.num_blocks, .block_tokens = c.block_tokens, .prefix_cache = c.prefix_cache,
          .eviction = c.kv_eviction,
          .max_running = c.scheduler.max_running, .recurrent = executor.state_slots() > 0,
          .checkpoint_slots = c.checkpoint_slots, .prompt_end_checkpoints = c.prompt_end_checkpoints,
          .prompt_end_min_gap = c.prompt_end_min_gap,
          .draft_states = c.speculate.on() && executor.state_slots() > 0 && c.memory_mode == cache::MemoryMode::kBlockPool};
}

Engine::Engine(EngineConfig config, Executor& executor, cache::PrefixCaches caches, const Clock* clock)
    : config_(config),
      executor_(executor),
      clock_(clock ? clock : &wall_clock_),
      memory_(MemoryConfigOf(config, executor), caches) {
  // Memory turns the prefix cache off for a recurrent model without a hybrid cache.
  config_.prefix_cache = memory_.prefix_cache();
  RADIXLM_CHECK_MSG(executor_.state_slots() >= cache::Memory::StateSlots(memory_.config(), memory_.checkpoints() != nullptr),
                    "the executor's state store is smaller than the memory's slot layout");
  metrics_.blocks_total = config.num_blocks;
  // A chunked recurrent scan gives bits that depend on where a call starts: verifying a draft
  // would change answers, so such a model does not speculate (nor does one without draft slots).
  if (config_.speculate.on() && executor_.prefill_alignment() == 0) {
    auto source = speculate::MakeSource(config_.speculate.source,
                                        {.tree = memory_.tree(), .suffix_index_tokens = config_.speculate.suffix_index_tokens});
    RADIXLM_CHECK_MSG(source.ok(), source.status().message());
    drafter_ = std::move(source).value();
  }
}

Engine::~Engine() { Stop(); }

core::StatusOr<RequestId> Engine::Submit(RequestParams params, TokenCallback callback) {
  const auto reject = [&](core::Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests_rejected;
    return st;
  };
  if (params.prompt.empty()) return reject(core::InvalidArgument("the prompt is empty"));
  if (params.continuation) {
    params.max_tokens = static_cast<int>(params.continuation->size());
  } else if (params.max_tokens < 1) {
    return reject(core::InvalidArgument("max_tokens must be at least 1"));
  }
  for (const std::vector<int32_t>* ids : {&params.prompt, params.continuation ? &*params.continuation : nullptr})
    if (ids)
      for (int32_t id : *ids)
        if (id < 0 || id >= executor_.vocab_size())
          return reject(core::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary"));
  const int64_t total = static_cast<int64_t>(params.prompt.size()) + params.max_tokens;
  if (total > executor_.max_context())
    return reject(core::OutOfRange("prompt of " + std::to_string(params.prompt.size()) + " tokens plus max_tokens " +
                                   std::to_string(params.max_tokens) + " exceeds the model's context of " +
                                   std::to_string(executor_.max_context()) + " tokens"));
  if (total > memory_.max_sequence_tokens()) {
    const int64_t blocks_needed = (total + config_.block_tokens - 1) / config_.block_tokens;
    return reject(core::ResourceExhausted("request needs " + std::to_string(blocks_needed) + " KV blocks; the pool has " +
                                          std::to_string(config_.num_blocks)));
  }
  if (params.min_tokens < 0 || params.min_tokens > params.max_tokens)
    return reject(core::InvalidArgument("min_tokens must be in [0, max_tokens]"));
  auto r = std::make_unique<Req>(params.sampling, config_.speculate);
  r->sampler.SetPrompt(params.prompt);
  r->tokens = params.prompt;
  r->prompt_len = static_cast<int64_t>(params.prompt.size());
  r->params = std::move(params);
  r->callback = std::move(callback);
  r->submit_time = clock_->Now();
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
    cancels_.push_back({id, false});
  }
  cv_.notify_all();
}

void Engine::EndEarly(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back({id, true});
  }
  cv_.notify_all();
}

void Engine::DrainInbox() {
  std::vector<std::unique_ptr<Req>> incoming;
  std::vector<std::pair<RequestId, bool>> cancels;
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
  for (auto& r : incoming) {
    memory_.Bind(&r->mem, r->params.cache_salt);
    waiting_.push_back(std::move(r));
  }
  for (const auto& [id, end_early] : cancels) {
    for (auto* list : {&waiting_, &running_})
      for (auto& r : *list)
        if (r && r->id == id && !r->cancelled) {
          r->cancelled = true;
          r->end_early = end_early;
        }
  }
}

bool Engine::Admit(Req& r, std::vector<BlockCopy>* copies, bool alone) {
  cache::Memory::Admitted a;
  if (!memory_.Admit(r.tokens, r.first_admission ? r.prompt_len : 0, alone, &r.mem, &a)) return false;
  if (!a.loads.empty() || a.state_load) {
    std::vector<BlockTransfer> loads;
    for (const cache::TierTransfer& t : a.loads) loads.push_back({t.block, t.key});
    const double t0 = clock_->Now();
    const int32_t loaded = loads.empty() ? 0 : executor_.LoadBlocks(loads);
    bool state = false;
    if (a.state_load && loaded == static_cast<int32_t>(loads.size())) {
      const cache::StateTransfer& s = *a.state_load;
      state = executor_.LoadState({s.slot, s.block, s.tail, s.parent, s.key});
    }
    memory_.Loaded(&r.mem, loaded, &a, state);
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.tier_load_seconds += clock_->Now() - t0;
  }
  for (const cache::BlockCopyPlan& c : a.copies) copies->push_back({c.src, c.dst, c.tokens});
  r.computed = a.cached_tokens;
  if (r.first_admission) {
    r.usage.cached_tokens = a.hit_tokens;
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.cached_prompt_tokens += a.hit_tokens;
    ++metrics_.admitted_requests;
    metrics_.hit_requests += a.hit_tokens > 0;
  }
  r.prompt_inserted = r.computed >= r.prompt_len;
  r.first_admission = false;
  MarkComputing(r);
  return true;
}

double Engine::MarkSeconds() const {
  // Outlives a step (marks are refreshed between steps); without a measured rate, a generous one.
  if (prefill_rate_ <= 0) return 120;
  return std::max(10.0, 3.0 * config_.scheduler.step_token_budget / prefill_rate_);
}

void Engine::MarkComputing(Req& r) {
  if (!memory_.tier() || r.computed >= r.prompt_len) return;
  memory_.MarkComputing(r.tokens, r.computed, r.prompt_len, &r.mem, MarkSeconds(), prefill_rate_);
  r.marked_at = clock_->Now();
  r.marked_rate = prefill_rate_;
}

void Engine::RefreshMarks(Req& r) {
  if (r.marked_at < 0) return;
  if (r.prompt_inserted) {  // its prompt's blocks are stored (StoreToTier ran): the marks go after them
    memory_.ClearComputing(&r.mem);
    r.marked_at = -1;
  } else if (clock_->Now() - r.marked_at > MarkSeconds() / 3 || (r.marked_rate <= 0 && prefill_rate_ > 0)) {
    MarkComputing(r);  // refreshed, and as soon as a first rate is measured (a fresh engine's marks said none)
  }
}

bool Engine::AwaitsElsewhere(Req& r) {
  if (r.await_over || !r.first_admission || !config_.await_elsewhere || !memory_.tier()) return false;
  const double now = clock_->Now();
  const std::optional<cache::Memory::Elsewhere> e = memory_.ComputingElsewhere(r.tokens, r.prompt_len, &r.mem);
  // Bounded by what the wait saves: computing the missing tokens here, at this engine's
  // measured prefill rate (a fresh engine: the marker's), from when the marker last made progress
  // (its blocks appearing): a marker that stalls is waited for no longer than computing what it
  // left would take (its marks also expire); one that goes on is followed to its end.
  const double rate = prefill_rate_ > 0 ? prefill_rate_ : e ? e->tokens_per_second : 0;
  bool wait = e && rate > 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (wait && r.await_since < 0) {
    r.await_since = now;
    ++metrics_.remote_waits;
  }
  if (wait && (r.await_missing < 0 || e->missing_tokens < r.await_missing)) {
    r.await_missing = e->missing_tokens;
    // (+ a step: the marker's blocks appear a step's chunk at a time)
    r.await_until = std::max(r.await_until, now + static_cast<double>(e->missing_tokens + config_.scheduler.step_token_budget) / rate);
  }
  if (wait && now >= r.await_until) {
    wait = false;
    ++metrics_.remote_wait_timeouts;
  }
  if (!wait) {
    r.await_over = true;
    if (r.await_since >= 0) metrics_.remote_wait_seconds += now - r.await_since;
  }
  return wait;
}

void Engine::Release(Req& r, cache::ReleaseMode mode) {
  for (const cache::StateCopy& c : memory_.Release(r.tokens, r.computed, mode, &r.mem)) executor_.CopyState(c.src, c.dst);
  r.computed = 0;
  StoreToTier();  // the released blocks may be reused by the next admission
  memory_.ClearComputing(&r.mem);  // behind the stores
  r.marked_at = -1;
}

void Engine::StoreToTier() {
  if (!memory_.tier()) return;
  const std::vector<cache::TierTransfer> stores = memory_.TakeStores();
  if (!stores.empty()) {
    std::vector<BlockTransfer> out;
    for (const cache::TierTransfer& t : stores) out.push_back({t.block, t.key});
    executor_.StoreBlocks(out);
  }
  const std::vector<cache::StateTransfer> states = memory_.TakeStateStores();
  if (!states.empty()) {
    std::vector<StateTransfer> out;
    for (const cache::StateTransfer& s : states) out.push_back({s.slot, s.block, s.tail, s.parent, s.key});
    executor_.StoreStates(out);
  }
}

void Engine::Preempt(Req& r) {
  // Keep what was computed in the cache: the recompute usually finds it there.
  Release(r, cache::ReleaseMode::kPreempt);
  DropDraft(r, 0);
  ++r.usage.preemptions;
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.preemptions;
}

void Engine::SampleRow(Req& r, std::span<float> logits, int64_t generated, int32_t* token, double* cumulative, SampledInfo* info) {
  if (config_.sampled_vocab > 0 && config_.sampled_vocab < static_cast<int64_t>(logits.size()))
    std::fill(logits.begin() + config_.sampled_vocab, logits.end(), -std::numeric_limits<float>::infinity());
  const int64_t vocab = static_cast<int64_t>(logits.size());
  // logprobs: the model's distribution, before any processor changes the row.
  const bool want = r.params.top_logprobs >= 0;
  double lse = 0;
  std::vector<float> raw;  // the raw row, only when the penalties would overwrite the sampled logit
  if (want) {
    lse = sampling::LogSumExp(logits);
    sampling::TopLogProbs(logits, r.params.top_logprobs, lse, &info->top);
    if (r.sampler.params().HasPenalties() || !r.params.logit_bias.empty()) raw.assign(logits.begin(), logits.end());
  }
  // Logit processors (each row is its request's alone): min_tokens, the penalties, the constraint.
  if (generated < r.params.min_tokens)
    for (int32_t id : r.params.stop_ids)
      if (id >= 0 && id < vocab) logits[id] = -std::numeric_limits<float>::infinity();
  for (const auto& [id, bias] : r.params.logit_bias)
    if (id >= 0 && id < vocab) logits[id] += bias;
  if (r.sampler.params().HasPenalties()) r.sampler.Penalize(logits);
  if (r.params.constraint) {
    r.params.constraint->Mask(logits);
    if (*std::max_element(logits.begin(), logits.end()) == -std::numeric_limits<float>::infinity()) {
      *token = -1;
      return;
    }
  }
  *token = r.sampler.Sample(logits);
  if (r.params.constraint) r.params.constraint->Accept(*token);
  if (r.params.cumulative_logprob) *cumulative = sampling::LogProb(logits, *token);
  if (want) info->logprob = static_cast<float>((raw.empty() ? logits[*token] : raw[*token]) - lse);
}

void Engine::Finish(std::unique_ptr<Req>& r, FinishReason reason, int32_t last_token) {
  // A marked prompt (cache_control, prompt_cache_key) is marked once Release has put its path
  // in the tree.
  Release(*r, reason == FinishReason::kCancelled ? cache::ReleaseMode::kCancel : cache::ReleaseMode::kFinish);
  if (r->params.cache_mark.tokens > 0 && reason != FinishReason::kError)  // (expired marks went at the step's start)
    memory_.Mark(r->tokens, std::min<int64_t>(r->params.cache_mark.tokens, r->prompt_len), r->mem,
                 clock_->Now() + r->params.cache_mark.ttl_seconds);
  r->usage.completion_tokens = static_cast<int64_t>(r->tokens.size()) - r->prompt_len;
  if (drafter_ && (reason == FinishReason::kStop || reason == FinishReason::kLength)) drafter_->Finished(r->tokens, r->mem.ns);
  r->usage.total_seconds = clock_->Now() - r->submit_time;
  TokenEvent ev;
  ev.id = r->id;
  ev.token = last_token;
  ev.finish = reason;
  ev.usage = r->usage;
  ev.error = r->error;
  if (last_token >= 0 && r->params.top_logprobs >= 0) {
    ev.logprob = r->last.logprob;
    ev.top_logprobs = std::move(r->last.top);
  }
  if (r->callback) r->callback(ev);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests_finished;
  }
  r.reset();
}

void Engine::SampleRows(Req& r, float* logits, int32_t rows, Produced* out) {
  const int64_t vocab = executor_.vocab_size();
  const int64_t real_end = static_cast<int64_t>(r.tokens.size()) - r.drafted;
  for (int32_t i = 0; i < rows; ++i) {
    Emitted e;
    // The row is r's alone: the processors may write it.
    std::span<float> row(logits + int64_t{i} * vocab, static_cast<size_t>(vocab));
    SampleRow(r, row, real_end - r.prompt_len + i, &e.token, &e.logprob, &e.info);
    if (e.token < 0) {
      out->no_token = true;
      return;
    }
    out->tokens.push_back(std::move(e));
    const int32_t t = out->tokens.back().token;
    const bool stop = std::ranges::find(r.params.stop_ids, t) != r.params.stop_ids.end();
    // The next row was computed after the draft's token: it counts only if that is what was drawn.
    if (stop || i >= r.drafted || r.tokens[static_cast<size_t>(real_end + i)] != t) return;
  }
}

void Engine::ContinueRecorded(const Req& r, Produced* out) const {
  const std::vector<int32_t>& given = *r.params.continuation;
  const int64_t real_end = static_cast<int64_t>(r.tokens.size()) - r.drafted;
  const size_t done = static_cast<size_t>(real_end - r.prompt_len);
  // The recorded tokens stand in for the draws: the draft's rows count while they agree.
  for (int64_t i = 0; done + static_cast<size_t>(i) < given.size(); ++i) {
    out->tokens.push_back({given[done + static_cast<size_t>(i)], 0, {}});
    if (i >= r.drafted || r.tokens[static_cast<size_t>(real_end + i)] != out->tokens.back().token) return;
  }
}

void Engine::ProposeDrafts() {
  if (!drafter_) return;
  const SpeculateConfig& spec = config_.speculate;
  int64_t rows = static_cast<int64_t>(running_.size());  // a row each at least
  double tokens = static_cast<double>(rows);             // ... and a token each
  const bool pool = config_.memory_mode == cache::MemoryMode::kBlockPool;
  int64_t free_tokens = pool ? int64_t{memory_.pool().num_free()} * config_.block_tokens : 0;
  for (auto& owner : running_) {
    Req& r = *owner;
    const int64_t size = static_cast<int64_t>(r.tokens.size());
    if (r.drafted > 0 || size <= r.prompt_len || r.cancelled) continue;  // not decoding
    int64_t k = std::min<int64_t>(spec.draft_max, r.params.max_tokens - (size - r.prompt_len) - 1);
    k = std::min<int64_t>(k, spec.max_step_rows - rows);
    // Within the blocks it holds and the pool's free ones (a draft evicts and preempts nobody).
    const int64_t held = static_cast<int64_t>(r.mem.block_table.size()) * config_.block_tokens;
    if (pool) k = std::min<int64_t>(k, std::max<int64_t>(held, size) - size + free_tokens);
    if (k <= 0 || (r.mem.state_slot >= 0 && memory_.DraftSlot(r.mem) < 0)) continue;
    speculate::Draft d;
    drafter_->Propose({.tokens = r.tokens, .prompt_len = r.prompt_len, .ns = r.mem.ns, .max_tokens = static_cast<int>(k),
                       .min_match = r.draft_policy.min_match()},
                      &d);
    if (d.tokens.empty()) continue;
    // The acceptance to expect: mostly that of drafts found by matches as long, some of this
    // request's so far.
    const double p = 0.75 * acceptance_.Estimate(d.match) + 0.25 * r.draft_policy.acceptance();
    k = std::min<int64_t>(k, static_cast<int64_t>(d.tokens.size()));
    if (spec.adapt) k = speculate::BestDraftLength(p, static_cast<int>(k), rows, tokens, step_cost_);
    if (k == 0) {
      r.draft_policy.Skipped();
      continue;
    }
    d.tokens.resize(static_cast<size_t>(k));
    free_tokens -= std::max<int64_t>(size + static_cast<int64_t>(d.tokens.size()) - std::max(held, size), 0);
    r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
    r.drafted = static_cast<int64_t>(d.tokens.size());
    r.draft_origin = d.origin;
    r.draft_match = d.match;
    rows += r.drafted;
    tokens += speculate::ExpectedTokens(p, static_cast<int>(r.drafted)) - 1;
  }
}

void Engine::DropDraft(Req& r, int64_t keep) {
  if (r.drafted <= keep) return;
  r.tokens.resize(r.tokens.size() - static_cast<size_t>(r.drafted - keep));
  r.drafted = keep;
}

void Engine::SettleDraft(Req& r, const Produced& produced) {
  const int64_t real_end = static_cast<int64_t>(r.tokens.size()) - r.drafted;
  int64_t accepted = 0;
  while (accepted < r.drafted && accepted < static_cast<int64_t>(produced.tokens.size()) &&
         produced.tokens[static_cast<size_t>(accepted)].token == r.tokens[static_cast<size_t>(real_end + accepted)])
    ++accepted;
  r.draft_policy.Verified(static_cast<int>(r.drafted), static_cast<int>(accepted));
  acceptance_.Observe(r.draft_match, static_cast<int>(r.drafted), static_cast<int>(accepted));
  {
    std::lock_guard<std::mutex> lock(mu_);
    SpeculationCounts& c = metrics_.speculation[static_cast<size_t>(r.draft_origin)];
    ++c.steps;
    c.drafted += r.drafted;
    c.accepted += accepted;
    if (accepted < r.drafted && r.mem.state_slot >= 0) c.recomputed += accepted;
  }
  // KV: rows past the accepted tokens are garbage nobody reads (the tree never sees them);
  // a recurrent state ran over the whole draft, so it goes back to the state before it and the
  // accepted tokens are computed again with the next step's rows.
  if (accepted < r.drafted && r.mem.state_slot >= 0) {
    executor_.CopyState(memory_.DraftSlot(r.mem), r.mem.state_slot);
    r.computed = real_end;
  } else {
    r.computed = real_end + accepted;
  }
  r.tokens.resize(static_cast<size_t>(real_end));  // EmitTokens appends what was produced
  r.drafted = 0;
  memory_.Trim(&r.mem, real_end + accepted + 1);
}

bool Engine::EmitTokens(std::unique_ptr<Req>& owner, Produced& produced) {
  Req& r = *owner;
  if (produced.tokens.empty() && !produced.no_token) {  // an empty continuation: the prompt only
    Finish(owner, FinishReason::kLength);
    return false;
  }
  for (Emitted& e : produced.tokens) {
    r.tokens.push_back(e.token);
    r.usage.cumulative_logprob += e.logprob;
    r.last = std::move(e.info);
    const int64_t generated = static_cast<int64_t>(r.tokens.size()) - r.prompt_len;
    if (generated == 1) r.usage.ttft_seconds = clock_->Now() - r.submit_time;
    TokenEvent ev;
    ev.id = r.id;
    ev.token = e.token;
    if (r.params.top_logprobs >= 0) {
      ev.logprob = r.last.logprob;
      ev.top_logprobs = r.last.top;  // (the final event, in Finish, reads it too)
    }
    const bool stop = std::ranges::find(r.params.stop_ids, e.token) != r.params.stop_ids.end();
    if (stop) ev.finish = FinishReason::kStop;
    else if (generated >= r.params.max_tokens) ev.finish = FinishReason::kLength;
    if (ev.finish != FinishReason::kNone) {  // the finish event carries the final token with the usage
      Finish(owner, ev.finish, e.token);
      return false;
    }
    if (r.callback) r.callback(ev);
  }
  if (produced.no_token) {
    const std::string why = r.params.constraint ? r.params.constraint->failure() : "";
    r.error = why.empty() ? "the output constraint (grammar) allows no token at this point" : why;
    Finish(owner, FinishReason::kError);
    return false;
  }
  return true;
}

// The adapter through which the scheduler asks memory for room (engine-private access).
class Engine::PlanRoom : public scheduler::Room {
 public:
  PlanRoom(Engine& engine, std::unordered_map<RequestId, Req*>& reqs, std::vector<BlockCopy>& copies)
      : e_(engine), reqs_(reqs), copies_(copies) {}
  bool Grow(int64_t id, int64_t upto) override { return e_.memory_.Grow(&reqs_.at(id)->mem, upto); }
  void Preempt(int64_t id) override { e_.Preempt(*reqs_.at(id)); }
  int64_t CachedPrefix(int64_t id) const override {
    const Req& r = *reqs_.at(id);
    return e_.memory_.CachedPrefix(r.tokens, r.mem);
  }
  bool Admit(int64_t id, bool alone, int64_t* computed) override {
    Req& r = *reqs_.at(id);
    if (!e_.Admit(r, &copies_, alone)) return false;
    *computed = r.computed;
    return true;
  }
  bool ShareAhead(int64_t id, int64_t at) override {
    Req& r = *reqs_.at(id);
    return e_.memory_.ShareAhead(&r.mem, r.computed, at);
  }
  bool AwaitsElsewhere(int64_t id) override { return e_.AwaitsElsewhere(*reqs_.at(id)); }

 private:
  Engine& e_;
  std::unordered_map<RequestId, Req*>& reqs_;
  std::vector<BlockCopy>& copies_;
};

scheduler::StepPlan Engine::PlanAndReorder(std::unordered_map<RequestId, Req*>* by_id, std::vector<BlockCopy>* copies) {
  std::vector<scheduler::SeqView> run_views, wait_views;
  for (const auto& r : running_) {
    (*by_id)[r->id] = r.get();
    run_views.push_back({static_cast<int64_t>(r->id), r->tokens, r->computed, r->arrival, r->waited_steps, r->mem.ns, r->drafted});
  }
  for (const auto& r : waiting_) {
    (*by_id)[r->id] = r.get();
    wait_views.push_back({static_cast<int64_t>(r->id), r->tokens, 0, r->arrival, r->waited_steps, r->mem.ns});
  }
  PlanRoom room(*this, *by_id, *copies);
  const scheduler::PlannerConfig planner{.scheduler = config_.scheduler,
                                         .alignment = executor_.prefill_alignment(),
                                         .shares_step_prefixes = executor_.shares_step_prefixes()};
  scheduler::StepPlan plan = scheduler::PlanStep(planner, run_views, wait_views, room);
  // The new running and waiting orders.
  std::unordered_map<RequestId, std::unique_ptr<Req>> owned;
  for (auto* list : {&running_, &waiting_})
    for (auto& r : *list) owned[r->id] = std::move(r);
  running_.clear();
  waiting_.clear();
  for (int64_t id : plan.running) running_.push_back(std::move(owned.at(id)));
  for (size_t k = 0; k < plan.waiting.size(); ++k) {
    waiting_.push_back(std::move(owned.at(plan.waiting[k])));
    waiting_.back()->waited_steps = plan.waited_steps[k];
  }
  return plan;
}

std::vector<StepSequence> Engine::BuildSequences(std::span<const Planned> planned) {
  std::vector<StepSequence> seqs;
  for (const Planned& p : planned) {
    Req& r = *p.r;
    StepSequence s;
    s.tokens = std::span<const int32_t>(r.tokens.data() + r.computed, p.n);
    s.start_position = static_cast<int32_t>(r.computed);
    s.context = std::span<const int32_t>(r.tokens.data(), r.computed);
    s.share_group = r.mem.ns;
    s.block_table = r.mem.block_table;
    const bool reaches_end = r.computed + p.n == static_cast<int64_t>(r.tokens.size());
    s.logit_rows = reaches_end && !r.params.continuation ? static_cast<int32_t>(1 + r.drafted) : 0;
    const cache::StepState st = memory_.StateFor(&r.mem, r.computed, p.n);
    s.state_slot = st.slot;
    s.reset_state = st.reset;
    s.restore_from = st.restore_from;
    for (const cache::StepState::Capture& c : st.captures) s.checkpoints.push_back({c.after_tokens, c.slot});
    if (r.drafted > 0 && st.slot >= 0) {  // the state before the draft, for a rollback
      s.checkpoints.push_back({static_cast<int32_t>(p.n - r.drafted), memory_.DraftSlot(r.mem)});
      std::ranges::sort(s.checkpoints, {}, &StepSequence::Checkpoint::after_tokens);
    }
    seqs.push_back(s);
  }
  return seqs;
}

void Engine::SampleAll(std::span<const Planned> planned, std::span<const StepSequence> seqs, std::vector<Produced>* produced) {
  const int64_t vocab = executor_.vocab_size();
  produced->assign(planned.size(), {});
  std::vector<std::pair<size_t, int64_t>> sampling;  // (planned index, first logits row)
  int64_t logit_row = 0;
  for (size_t k = 0; k < planned.size(); ++k) {
    if (seqs[k].logit_rows == 0) continue;
    sampling.push_back({k, logit_row});
    logit_row += seqs[k].logit_rows;
  }
  auto sample_rows = [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [k, row] = sampling[static_cast<size_t>(i)];
      SampleRows(*planned[k].r, logits_.data() + row * vocab, seqs[k].logit_rows, &(*produced)[k]);
    }
  };
  if (config_.sampling_pool && sampling.size() > 1) config_.sampling_pool->ParallelFor(static_cast<int64_t>(sampling.size()), sample_rows);
  else sample_rows(0, 0, static_cast<int64_t>(sampling.size()));
}

int64_t Engine::Advance(Req& r, int64_t n, Produced& produced) {
  r.computed += n;
  const bool reached_end = r.computed == static_cast<int64_t>(r.tokens.size());
  if (reached_end && r.params.continuation) ContinueRecorded(r, &produced);
  if (r.drafted > 0) SettleDraft(r, produced);
  for (const cache::StateCopy& c : memory_.PublishAhead(r.tokens, r.computed, &r.mem)) executor_.CopyState(c.src, c.dst);
  if (!r.prompt_inserted && r.computed >= r.prompt_len) {
    memory_.Publish(r.tokens, r.prompt_len, &r.mem);  // share the prompt with concurrent requests
    r.prompt_inserted = true;
  } else if (!r.prompt_inserted) {
    memory_.PublishComputed(r.tokens, r.computed, &r.mem);  // ... and its full blocks as they are done
  }
  StoreToTier();
  RefreshMarks(r);
  if (!reached_end) return 0;  // prefill goes on
  auto owner = std::ranges::find_if(running_, [&](const std::unique_ptr<Req>& p) { return p.get() == &r; });
  RADIXLM_CHECK(owner != running_.end());
  const int64_t generated = static_cast<int64_t>(produced.tokens.size());
  EmitTokens(*owner, produced);
  return generated;
}

bool Engine::Step() {
  DrainInbox();
  memory_.ExpireMarks(clock_->Now());
  // Cancellations first: they free resources for everyone else.
  for (auto* list : {&waiting_, &running_})
    for (auto& r : *list)
      if (r && r->cancelled) Finish(r, r->end_early ? FinishReason::kStop : FinishReason::kCancelled);
  auto compact = [](std::vector<std::unique_ptr<Req>>& v) { v.erase(std::remove(v.begin(), v.end(), nullptr), v.end()); };
  compact(waiting_);
  compact(running_);
  if (waiting_.empty() && running_.empty()) {
    PublishMetrics(0, 0, 0);
    return false;
  }
  const double t0 = clock_->Now();
  ProposeDrafts();
  // 1-2. The scheduler plans the step (chunks, preemptions, admissions).
  std::unordered_map<RequestId, Req*> by_id;
  std::vector<BlockCopy> copies;
  const scheduler::StepPlan plan = PlanAndReorder(&by_id, &copies);
  if (plan.chunks.empty()) {
    PublishMetrics(0, 0, 0);
    return false;
  }
  // 3. Execute. Drafts the plan does not reach go back first.
  std::vector<Planned> planned;
  std::unordered_map<Req*, int64_t> chunk_end;
  int64_t computed_now = 0, prefill_now = 0;
  for (const scheduler::StepPlan::Chunk& c : plan.chunks) {
    Req* r = by_id.at(c.id);
    RADIXLM_CHECK(r->computed == c.from);
    planned.push_back({r, c.n});
    chunk_end[r] = c.from + c.n;
    computed_now += c.n;
    if (c.from < r->prompt_len) prefill_now += c.n;
  }
  if (drafter_)
    for (auto* list : {&running_, &waiting_})
      for (auto& r : *list) {
        const auto it = chunk_end.find(r.get());
        const int64_t real_end = static_cast<int64_t>(r->tokens.size()) - r->drafted;
        DropDraft(*r, it == chunk_end.end() ? 0 : std::max<int64_t>(it->second - real_end, 0));
      }
  const std::vector<StepSequence> seqs = BuildSequences(planned);
  executor_.Execute(copies, seqs, &logits_);
  // 4. Sample every request's logit rows, then settle drafts, advance, stream and finish in
  // plan order. A step of decodes only (one new token and its draft per sequence) teaches the
  // draft lengths what rows cost.
  std::vector<Produced> produced;
  SampleAll(planned, seqs, &produced);
  bool decode_only = drafter_ != nullptr;
  for (const Planned& p : planned) decode_only = decode_only && p.n == 1 + p.r->drafted;
  int64_t generated_now = 0;
  for (size_t k = 0; k < planned.size(); ++k) generated_now += Advance(*planned[k].r, planned[k].n, produced[k]);
  compact(running_);
  const double step_seconds = clock_->Now() - t0;
  ObserveStep(decode_only, computed_now, prefill_now, step_seconds);
  PublishMetrics(computed_now, generated_now, step_seconds);
  return true;
}

void Engine::ObserveStep(bool decode_only, int64_t computed, int64_t prefill, double seconds) {
  if (decode_only) step_cost_.Observe(computed, seconds);
  if (prefill >= 8 && 2 * prefill >= computed && seconds > 0) {  // prefill rows dominate
    const double rate = static_cast<double>(computed) / seconds;
    prefill_rate_ = prefill_rate_ > 0 ? 0.7 * prefill_rate_ + 0.3 * rate : rate;
  }
}

void Engine::PublishMetrics(int64_t computed, int64_t generated, double seconds) {
  if (kv_events_ && memory_.tier()) {
    for (const cache::TierDrops& d : memory_.tier()->TakeDropped())
      if (!d.keys.empty()) kv_events_->TierRemoved(d.medium, d.keys);
  }
  if (kv_events_ && !kv_events_->empty()) kv_sink_(kv_events_->Take());  // this step's, in order
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
  const cache::Memory::TierStats& t = memory_.tier_stats();
  metrics_.tier_hit_tokens = t.hit_tokens;
  metrics_.tier_loaded_blocks = t.loaded_blocks;
  metrics_.tier_failed_loads = t.failed_loads;
  metrics_.tier_offered_blocks = t.offered_blocks;
}

void Engine::RunUntilIdle() {
  for (;;) {
    if (Step()) continue;
    DrainInbox();
    if (waiting_.empty() && running_.empty()) return;
    // Only a request waiting for another replica's blocks may hold the engine still (its wait
    // is bounded); it is asked again shortly.
    const bool awaiting = std::ranges::any_of(waiting_, [](const auto& r) { return r->await_since >= 0 && !r->await_over; });
    RADIXLM_CHECK_MSG(awaiting, "engine made no progress with requests pending");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Engine::Start() {
  stop_ = false;
  loop_ = std::thread([this] {
    while (!stop_) {
      if (Step()) continue;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50),
                   [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !tasks_.empty(); });
    }
  });
}

void Engine::Stop() {
  stop_ = true;
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

core::Status Engine::PublishKvEvents(cache::BlockHasher hasher, std::function<void(std::vector<cache::KvEvent>)> sink,
                                     bool ssm_checkpoints) {
  auto log = std::make_unique<cache::KvEventLog>(std::move(hasher));
  if (!memory_.SetBlockObserver(log.get())) return core::Unimplemented("KV cache events need the radix prefix cache (it is off)");
  if (ssm_checkpoints && !memory_.SetStateObserver(log.get())) {
    memory_.SetBlockObserver(nullptr);
    return core::InvalidArgument("SSM checkpoint events need a hybrid model with its checkpoint cache");
  }
  if (cache::BlockTier* tier = memory_.tier()) {
    log->set_pool_medium("cpu");
    tier->ReportDrops();
  }
  kv_events_ = std::move(log);
  kv_sink_ = std::move(sink);
  kv_states_ = ssm_checkpoints;
  return core::Status::Ok();
}

void Engine::RunOnLoop(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(fn));
  }
  cv_.notify_all();
}

// fn's answer, computed on the engine loop (the cache is the loop's alone); nullopt when the loop
// did not answer within `timeout` (the task still runs later, into a promise nobody reads).
template <typename Fn>
auto AskLoop(Engine& engine, Fn fn, std::chrono::milliseconds timeout) -> std::optional<decltype(fn())> {
  auto result = std::make_shared<std::promise<decltype(fn())>>();
  auto answer = result->get_future();
  engine.RunOnLoop([result, fn] { result->set_value(fn()); });
  if (answer.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return answer.get();
}

std::optional<std::vector<uint64_t>> Engine::CachedBlockKeys(std::chrono::milliseconds timeout) {
  RADIXLM_CHECK(kv_events_ != nullptr);
  return AskLoop(*this, [this] { return cache::CachedBlockKeys(*memory_.tree(), kv_events_->hasher()); }, timeout);
}

std::optional<std::vector<uint64_t>> Engine::CachedStateKeys(std::chrono::milliseconds timeout) {
  if (!kv_states_) return std::vector<uint64_t>{};
  return AskLoop(*this, [this] { return cache::CachedStateKeys(*memory_.checkpoints(), kv_events_->hasher()); }, timeout);
}

EngineMetrics Engine::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineMetrics m = metrics_;  // loop-side figures as of the last step
  m.waiting += static_cast<int64_t>(inbox_.size());
  return m;
}

}  // namespace radixlm::engine
