#include "sim/fleet.h"

#include <algorithm>

namespace radixlm::sim {

core::StatusOr<Routing> ParseRouting(const std::string& name) {
  if (name == "round-robin") return Routing::kRoundRobin;
  if (name == "least-loaded") return Routing::kLeastLoaded;
  if (name == "prefix-aware") return Routing::kPrefixAware;
  return core::InvalidArgument("unknown routing '" + name + "' (round-robin, least-loaded, prefix-aware)");
}

const char* RoutingName(Routing r) {
  switch (r) {
    case Routing::kRoundRobin: return "round-robin";
    case Routing::kLeastLoaded: return "least-loaded";
    case Routing::kPrefixAware: return "prefix-aware";
  }
  return "?";
}

FleetSimulator::FleetSimulator(FleetConfig config)
    : config_(std::move(config)), hasher_(config_.replica.engine.block_tokens) {}

core::StatusOr<std::unique_ptr<FleetSimulator>> FleetSimulator::Create(FleetConfig config, const std::function<SimPolicy()>& make_policy,
                                                                       const cache::CostModel& cost) {
  if (config.replicas < 1) return core::InvalidArgument("a fleet needs at least one replica");
  std::unique_ptr<FleetSimulator> f(new FleetSimulator(std::move(config)));
  f->index_.resize(f->config_.replicas);
  f->assigned_.assign(f->config_.replicas, 0);
  f->pressure_.assign(f->config_.replicas, 0.0);
  if (f->config_.remote_gbps > 0) {
    const int32_t bt = f->config_.replica.engine.block_tokens;
    const int64_t block_bytes = cost.KvBytes(bt);
    if (block_bytes <= 0) return core::InvalidArgument("a remote store holds KV blocks: the model has none");
    f->remote_ = std::make_unique<ModelledTier>(bt, block_bytes, static_cast<int64_t>(f->config_.remote_bytes / block_bytes),
                                                "remote", f->config_.remote_gbps);
    f->config_.replica.remote = f->remote_.get();
  }
  for (int r = 0; r < f->config_.replicas; ++r) {
    auto sim = std::make_unique<Simulator>(f->config_.replica, make_policy(), cost);
    // Every routing keeps the indexes (they measure duplication); only prefix-aware needs them.
    auto& index = f->index_[r];
    const core::Status subscribed = sim->PublishKvEvents(f->hasher_, [&index](std::vector<cache::KvEvent> events) {
        for (const cache::KvEvent& e : events) {
          if (!e.medium.empty() && e.medium != "cpu") continue;  // the pool's blocks (the store is everyone's)
          if (e.kind == cache::KvEvent::Kind::kAllCleared) index.clear();
          for (uint64_t k : e.block_keys) {
            if (e.kind == cache::KvEvent::Kind::kStored) index.insert(k);
            else index.erase(k);
          }
        }
      });
    if (!subscribed.ok() && f->config_.routing == Routing::kPrefixAware) return subscribed;
    f->indexed_ = subscribed.ok();
    f->replicas_.push_back(std::move(sim));
  }
  return f;
}

int FleetSimulator::LeastLoaded(const std::vector<int64_t>& loads, bool by_blocks) const {
  int best = 0;
  for (int r = 1; r < config_.replicas; ++r) {
    auto key = [&](int i) {
      return std::make_tuple(loads[i], by_blocks ? static_cast<int64_t>(index_[i].size()) : 0, assigned_[i]);
    };
    if (key(r) < key(best)) best = r;
  }
  return best;
}

int FleetSimulator::Route(const TraceRequest& request) {
  const int n = config_.replicas;
  if (config_.routing == Routing::kRoundRobin) return static_cast<int>(next_++ % n);
  std::vector<int64_t> loads(n);
  for (int r = 0; r < n; ++r) loads[r] = replicas_[r]->Load();
  if (config_.routing == Routing::kLeastLoaded) return LeastLoaded(loads, false);
  const auto [lo, hi] = std::minmax_element(loads.begin(), loads.end());
  if (*hi - *lo > config_.balance_abs && static_cast<double>(*hi) > config_.balance_rel * static_cast<double>(*lo)) {
    ++by_load_;
    return LeastLoaded(loads, false);
  }
  // The longest run of the request's leading blocks each replica holds, and the tokens it would
  // compute there.
  const std::vector<cache::BlockDigest> chain = hasher_.Chain(request.input, 0);
  const int64_t bt = config_.replica.engine.block_tokens, len = static_cast<int64_t>(request.input.size());
  std::vector<int64_t> match(n, 0), fresh(n);
  for (int r = 0; r < n; ++r) {
    while (match[r] < static_cast<int64_t>(chain.size()) && index_[r].count(cache::BlockHasher::Key(chain[match[r]]))) ++match[r];
    fresh[r] = std::max<int64_t>(0, len - match[r] * bt);
  }
  // Candidates, best match first (ties: the least pressed, then the fewest routed).
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_tuple(-match[a], pressure_[a], assigned_[a]) < std::make_tuple(-match[b], pressure_[b], assigned_[b]);
  });
  const int best = order[0];
  int chosen = -1;
  const bool continuation =
      match[best] > 0 && static_cast<double>(match[best]) > config_.match_threshold * static_cast<double>(chain.size());
  if (continuation) {
    chosen = best;  // most of the request is cached there: its own history
  } else {
    // A short match (a system prompt, a shared document): followed only while that replica has
    // not taken more than its share of the new KV lately (bounded-load placement), so a hot
    // prefix spreads over replicas instead of piling every conversation onto its first home.
    double total = 0;
    for (int r = 0; r < n; ++r) total += pressure_[r];
    const double cap = (1.0 + config_.pressure_slack) * (total + static_cast<double>(fresh[best])) / n;
    for (int r : order) {
      if (match[r] == 0) break;  // past the replicas that hold anything of it
      if (pressure_[r] + static_cast<double>(fresh[r]) <= cap) {
        chosen = r;
        break;
      }
    }
    if (chosen < 0) {  // no match worth following: the least pressed, then the fewest blocks
      chosen = 0;
      for (int r = 1; r < n; ++r)
        if (std::make_tuple(loads[r], pressure_[r], static_cast<int64_t>(index_[r].size()), assigned_[r]) <
            std::make_tuple(loads[chosen], pressure_[chosen], static_cast<int64_t>(index_[chosen].size()), assigned_[chosen]))
          chosen = r;
    }
  }
  (match[chosen] > 0 ? by_prefix_ : by_load_) += 1;
  // Pressure: new tokens placed on each replica, decaying over the last ~pressure_window
  // requests (what its cache must absorb, whatever the arrival times).
  const double keep = 1.0 - 1.0 / std::max(1.0, config_.pressure_window * n);
  for (double& p : pressure_) p *= keep;
  pressure_[chosen] += static_cast<double>(fresh[chosen]);
  return chosen;
}

core::Status FleetSimulator::Feed(const TraceRequest& request) {
  // Every replica serves what it has until the request arrives, so the router sees its load then.
  if (config_.replica.arrivals == Arrivals::kTrace)
    for (auto& r : replicas_) r->RunUntil(request.ts);
  const int r = Route(request);
  ++assigned_[r];
  return replicas_[r]->Feed(request);
}

FleetResult FleetSimulator::Finish() {
  FleetResult out;
  out.routing = RoutingName(config_.routing);
  std::unordered_set<uint64_t> all;
  int64_t held = 0;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    out.replicas.push_back(replicas_[r]->Finish());
    const engine::EngineMetrics& m = out.replicas.back().metrics;
    out.prompt_tokens += m.prompt_tokens;
    out.hit_tokens += m.cached_prompt_tokens;
    out.remote_hit_tokens += m.tier_hit_tokens;
    out.remote_read_seconds += out.replicas.back().tier_read_seconds;
    held += static_cast<int64_t>(index_[r].size());
    all.insert(index_[r].begin(), index_[r].end());
  }
  out.computed_prompt_tokens = out.prompt_tokens - out.hit_tokens;
  out.token_hit_rate = out.prompt_tokens ? double(out.hit_tokens) / out.prompt_tokens : 0;
  out.requests_per_replica = assigned_;
  out.routed_by_prefix = by_prefix_;
  out.routed_by_load = by_load_;
  out.duplicate_blocks_at_end = indexed_ ? held - static_cast<int64_t>(all.size()) : -1;
  out.remote = remote_ != nullptr;
  if (remote_) out.remote_stats = remote_->stats();
  return out;
}

}  // namespace radixlm::sim
