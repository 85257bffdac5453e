// A fleet of engine replicas behind a router, simulated on one trace (radixlm simulate
// --replicas N --routing ...), to size what prefix-aware routing gains over round-robin and
// what splitting one cache into N costs. Each replica is a Simulator (the real engine, memory
// and cache policy; a cost model for the model) holding 1/N of the memory. The router sees what
// a production router sees (llm-d, Dynamo, SGLang's gateway):
//  - each replica's load: requests waiting + running (with --arrivals trace; a sequential
//    trace leaves every replica idle between requests, so load ties and requests routed so far
//    decide);
//  - for prefix-aware routing, an index of each replica's cached blocks rebuilt from that
//    replica's KV cache events alone (cache/kv_events.h: the same BlockStored / BlockRemoved a
//    served replica publishes), and the request's block keys from the same hashing.
// Routing rules:
//  - round-robin: request i goes to replica i mod N;
//  - least-loaded: the lowest load, then the fewest requests routed so far;
//  - prefix-aware (SGLang's cache-aware policy with bounded-load placement): when loads are out
//    of balance (max - min > balance_abs and max > balance_rel x min) the least loaded; else
//    the replica whose index holds the longest prefix of the request's blocks if it covers
//    more than match_threshold of them (a conversation's or an agent's own history); else the
//    best-matching replica whose pressure (new tokens placed on it lately) stays within
//    (1 + pressure_slack) x the mean with this request; else the least pressed. Following
//    every match (the old rule) piled every conversation with one system prompt onto the
//    replica that first held it: 0.26x one cache's hit rate on a real trace, below
//    round-robin's 0.35x (issue 25.10); docs/fleet.md has the measurements.
// Single-threaded and deterministic (events reach the router synchronously, as it steps).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/kv_events.h"
#include "core/status.h"
#include "sim/simulator.h"

namespace radixlm::sim {

enum class Routing { kRoundRobin, kLeastLoaded, kPrefixAware };
core::StatusOr<Routing> ParseRouting(const std::string& name);  // round-robin | least-loaded | prefix-aware
const char* RoutingName(Routing r);

struct FleetConfig {
  int replicas = 2;
  Routing routing = Routing::kPrefixAware;
  SimulatorConfig replica;  // one replica's (its memory is 1/N of the fleet's)
  int64_t balance_abs = 32;
  double balance_rel = 1.5;
  // A match covering more than this share of the request's blocks is followed (SGLang's
  // cache_threshold); a shorter one only while that replica's pressure stays under the cap.
  double match_threshold = 0.9;
  // Pressure: the new tokens placed on a replica, decaying over ~pressure_window x replicas
  // requests; a short match is followed only while pressure + the request's new tokens stay
  // within (1 + pressure_slack) x the fleet's mean.
  double pressure_window = 16;
  double pressure_slack = 0.5;
  // A remote store every replica stacks under its pool (sim/disk_model.h; remote_gbps 0: none):
  // what one replica computed, another loads. The router still indexes each replica's pool
  // (its "cpu" events): the store is everyone's.
  double remote_bytes = 0, remote_gbps = 0;
};

struct FleetResult {
  std::string routing;
  std::vector<SimResult> replicas;
  int64_t prompt_tokens = 0, hit_tokens = 0, computed_prompt_tokens = 0;
  double token_hit_rate = 0;
  std::vector<int64_t> requests_per_replica;
  int64_t routed_by_prefix = 0, routed_by_load = 0;
  // Blocks held by more than one replica at the end: sum of the indexes' sizes - their union
  // (-1: replicas without block events, a hybrid model's).
  int64_t duplicate_blocks_at_end = 0;
  // The remote store (remote_gbps > 0): what it held and moved; of hit_tokens, those it served,
  // and the simulated seconds the replicas spent reading it.
  bool remote = false;
  DiskModelStats remote_stats;
  int64_t remote_hit_tokens = 0;
  double remote_read_seconds = 0;
};

class FleetSimulator {
 public:
  // make_policy: a fresh policy object per replica (see SimPolicy).
  static core::StatusOr<std::unique_ptr<FleetSimulator>> Create(FleetConfig config, const std::function<SimPolicy()>& make_policy,
                                                                const cache::CostModel& cost);
  core::Status Feed(const TraceRequest& request);
  FleetResult Finish();

 private:
  explicit FleetSimulator(FleetConfig config);
  int Route(const TraceRequest& request);
  int LeastLoaded(const std::vector<int64_t>& loads, bool by_blocks) const;

  FleetConfig config_;
  cache::BlockHasher hasher_;
  std::unique_ptr<ModelledTier> remote_;  // the store the replicas share (null: none)
  std::vector<std::unique_ptr<Simulator>> replicas_;
  std::vector<std::unordered_set<uint64_t>> index_;  // per replica, from its events
  std::vector<int64_t> assigned_;
  std::vector<double> pressure_;  // per replica: new tokens placed lately (decaying)
  bool indexed_ = false;
  int64_t next_ = 0, by_prefix_ = 0, by_load_ = 0;
};

}  // namespace radixlm::sim
