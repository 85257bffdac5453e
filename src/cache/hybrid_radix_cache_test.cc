#include "cache/hybrid_radix_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <random>

#include "cache/alpha_tuner.h"
#include "cache/cost_model.h"
#include "cache/flat_map_internal.h"
#include "cache/marconi_reference.h"
#include "cache/radix_policy.h"
#include "cache/python_heap.h"
#include "core/thread_pool.h"

namespace radixlm::cache {
namespace {

// The policy table (hybrid_cache.h): every policy has one row, names parse back to it, a radix
// row's factory makes a policy of its kind, and the messages list what the rows allow.
TEST(HybridPolicyTable, EveryPolicyHasOneConsistentRow) {
  for (HybridPolicy p : {HybridPolicy::kLru, HybridPolicy::kSglangPlus, HybridPolicy::kMarconi, HybridPolicy::kMarconiStatic,
                         HybridPolicy::kVllmPlus}) {
    const HybridPolicyRow& row = HybridPolicyRowOf(p);
    EXPECT_EQ(row.policy, p);
    EXPECT_EQ(*ParseHybridPolicy(row.name), p);
    if (row.alias) {
      EXPECT_EQ(*ParseHybridPolicy(row.alias), p);
    }
    EXPECT_EQ(row.radix == nullptr, row.block_tree) << row.name;
    if (row.radix) {
      EXPECT_EQ(row.radix(true)->kind(), p) << row.name;
    }
  }
  EXPECT_EQ(HybridPolicies().size(), 5u);
  EXPECT_EQ(ParseHybridPolicy("nope").status().message(),
            "unknown cache policy 'nope' (expected lru, vllm+, sglang+, marconi, marconi-static)");
  EXPECT_EQ(MakeSlotCheckpointCache(HybridPolicy::kLru, 4, HybridShape{}, 0, false).status().message(),
            "policy 'lru' cannot serve a model with Mamba2 layers (use sglang+, marconi or marconi-static)");
}

using Tokens = std::vector<int32_t>;

Tokens Seq(int32_t start, int n) {
  Tokens t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}
Tokens Cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- Cost model: the values Marconi's utils.py gives for its 7B hybrid (spec §1.5).
TEST(CostModel, ReferenceFormulasMatchTheArtifactsValues) {
  const CostModel n128(Marconi7BShape(128), Accounting::kReference);
  const CostModel n16(Marconi7BShape(16), Accounting::kReference);
  EXPECT_EQ(n128.SsmStateBytesPerLayer(), 1116160);
  EXPECT_EQ(n16.SsmStateBytesPerLayer(), 196864);
  EXPECT_EQ(n128.KvBytes(1), 65536);  // over the 4 attention layers
  EXPECT_EQ(n128.SsmFlops(1), Flops{209756160});
  EXPECT_EQ(n128.AttentionFlops(1), Flops{134234112});
  EXPECT_EQ(n128.MlpFlops(1), Flops{268435456});
  // FLOP efficiency of a root node (parent length 0), FLOPs per byte, as tabulated.
  const std::pair<int64_t, std::pair<int64_t, int64_t>> table[] = {
      {100, {39272, 114535}}, {1000, {142463, 184692}}, {10000, {201460, 205525}}, {32000, {228773, 228492}}};
  for (const auto& [len, want] : table) {
    EXPECT_EQ(std::llround(ExactRatio(n128.NodeMarginalFlops(0, len), n128.NodeRankingBytes(0, len))), want.first);
    EXPECT_EQ(std::llround(ExactRatio(n16.NodeMarginalFlops(0, len), n16.NodeRankingBytes(0, len))), want.second);
  }
  // Fig. 3b: a 10K-token sequence checkpointed every 16 tokens needs 17.40 GB.
  const double bytes = 625.0 * n128.CheckpointBytes() + static_cast<double>(n128.KvBytes(10000));
  EXPECT_NEAR(bytes / 1e9, 17.40, 0.005);
}

TEST(CostModel, ReferenceMlpMarginalSubtractsTheParentsAttentionFlops) {
  const CostModel ref(Marconi7BShape(128), Accounting::kReference);
  const CostModel fixed(Marconi7BShape(128), Accounting::kCorrected);
  const Flops ssm = 24 * ref.SsmFlops(100);
  const Flops attn = 4 * (ref.AttentionFlops(600) - ref.AttentionFlops(500));
  EXPECT_EQ(ref.NodeMarginalFlops(500, 100), ssm + attn + 28 * (ref.MlpFlops(600) - ref.AttentionFlops(500)));
  // Corrected: the MLP term is linear, so a node's marginal is exactly its own tokens'.
  EXPECT_EQ(fixed.NodeMarginalFlops(500, 100) - fixed.shape().n_attn_layers *
                (fixed.AttentionFlops(600) - fixed.AttentionFlops(500)) - 24 * fixed.SsmFlops(100),
            28 * fixed.MlpFlops(100));
}

TEST(CostModel, CorrectedStateCountsTheExpandedInnerWidth) {
  const CostModel fixed(Marconi7BShape(128), Accounting::kCorrected);
  // [128 heads x 64 head_dim x 128 state] + [d_conv - 1 = 3 inputs x conv_dim 8448], fp16.
  EXPECT_EQ(fixed.SsmStateBytesPerLayer(), (8192 * 128 + 8448 * 3) * 2);
}

TEST(ExactRatio, RoundsLikePythonTrueDivisionOfIntegers) {
  // Expected values printed by CPython's int / int.
  EXPECT_EQ(ExactRatio(Flops{300000000000000007}, Flops{1000000009}), 0x1.1e1a2fd4ccccdp+28);
  EXPECT_EQ(ExactRatio(Flops{4611686018427387905}, Flops{3}), 0x1.5555555555555p+60);
  EXPECT_EQ(ExactRatio(-Flops{1152921504606846981}, Flops{40353607}), -0x1.a9bbb147e0dd9p+34);
  const Flops big = Flops{1234567890123456789} * 10000 + 123;  // 12345678901234567890123
  EXPECT_EQ(ExactRatio(big, Flops{98765432109876543}), 0x1.e847ffb559b3dp+16);
  EXPECT_EQ(ExactRatio(Flops{9007199254740993}, Flops{9007199254740995}), 0x1.ffffffffffffep-1);
}

TEST(PythonHeap, PopsInCPythonHeapqOrderAmongEqualKeys) {
  // (ts) with ids 0..11; CPython heapq printed this pop order for the same operations.
  const int ts[] = {5, 3, 3, 9, 1, 3, 5, 1, 7, 3, 2, 2};
  std::map<int, int> key;
  std::vector<int> items;
  for (int i = 0; i < 12; ++i) key[i] = ts[i], items.push_back(i);
  auto less = [&](int a, int b) { return key[a] < key[b]; };
  PythonHeap<int, decltype(less)> heap(items, less);
  std::vector<int> order;
  for (int k = 0; k < 5; ++k) order.push_back(heap.Pop());
  key[100] = 3, key[101] = 0, key[102] = 3;
  heap.Push(100), heap.Push(101), heap.Push(102);
  while (!heap.empty()) order.push_back(heap.Pop());
  EXPECT_EQ(order, (std::vector<int>{4, 7, 11, 10, 5, 101, 2, 9, 102, 100, 1, 6, 0, 8, 3}));
}

// ---- Admission and hits.
HybridCacheConfig Config(HybridPolicy policy, double capacity) {
  HybridCacheConfig c;
  c.policy = policy;
  c.capacity_bytes = capacity;
  c.verify_victims = true;
  return c;
}

TEST(HybridCache, PurelyInputPrefixFirstHitsOnItsThirdOccurrence) {
  for (HybridPolicy policy : {HybridPolicy::kSglangPlus, HybridPolicy::kMarconi}) {
    const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
    auto cache = MakeHybridCache(Config(policy, 1e12), cost);
    const Tokens system = Seq(1, 300);
    int64_t hits[3];
    for (int i = 0; i < 3; ++i) {
      const Tokens input = Cat(system, Seq(10000 * (i + 1), 50));
      const HybridLookup l = cache->Lookup(input);
      hits[i] = l.hit_tokens;
      // The second request splits the first one's edge at the system prompt: a branch point.
      EXPECT_EQ(l.branch_checkpoint, i == 1) << HybridPolicyName(policy) << " request " << i;
      cache->Admit(Cat(input, Seq(20000 * (i + 1), 20)));
      cache->CheckInvariants();
    }
    EXPECT_EQ(hits[0], 0);
    EXPECT_EQ(hits[1], 0);  // the state at token 300 did not exist yet
    EXPECT_EQ(hits[2], 300);
  }
}

TEST(HybridCache, NextTurnReusesInputPlusOutput) {
  const CostModel cost(Marconi7BShape(16), Accounting::kCorrected);
  auto cache = MakeHybridCache(Config(HybridPolicy::kMarconi, 1e12), cost);
  const Tokens turn1 = Seq(1, 100), reply1 = Seq(500, 40);
  cache->Lookup(turn1);
  cache->Admit(Cat(turn1, reply1));
  const HybridLookup l = cache->Lookup(Cat(Cat(turn1, reply1), Seq(900, 30)));
  EXPECT_EQ(l.hit_tokens, 140);
  EXPECT_FALSE(l.branch_checkpoint);
  EXPECT_EQ(cache->Stats().checkpoints_admitted, 1);
}

TEST(HybridCache, HitsEndAtACheckpointUnlessTheModelHasNoSsmLayers) {
  HybridShape attention_only = Marconi7BShape(128);
  attention_only.n_ssm_layers = 0;
  const CostModel hybrid(Marconi7BShape(128), Accounting::kCorrected);
  const CostModel dense(attention_only, Accounting::kCorrected);
  const Tokens a = Seq(1, 200);
  for (bool has_ssm : {true, false}) {
    auto cache = MakeHybridCache(Config(has_ssm ? HybridPolicy::kSglangPlus : HybridPolicy::kLru, 1e12),
                                 has_ssm ? hybrid : dense);
    cache->Lookup(a);
    cache->Admit(a);
    // Shares 120 tokens, then diverges inside the cached edge.
    const HybridLookup l = cache->Lookup(Cat(Seq(1, 120), Seq(7000, 10)));
    EXPECT_EQ(l.matched_tokens, 120);
    EXPECT_EQ(l.hit_tokens, has_ssm ? 0 : 120);
  }
}

TEST(HybridCache, MarconiDropsAnIntermediateCheckpointByMergingIntoTheChild) {
  const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
  // Room for two checkpoints and a few hundred tokens of KV.
  const double capacity = 2 * cost.CheckpointBytes() + cost.KvBytes(500) + 1;
  auto cache = MakeHybridCache(Config(HybridPolicy::kMarconiStatic, capacity), cost);
  const Tokens a = Seq(1, 200);
  cache->Lookup(a);
  cache->Admit(a);  // one node, one checkpoint
  const Tokens b = Cat(Seq(1, 100), Seq(5000, 100));
  cache->Lookup(b);
  // Admitting b needs a branch node + a leaf: three checkpoints do not fit, so the least
  // valuable candidate goes; the tree stays within capacity.
  cache->Admit(b);
  cache->CheckInvariants();
  EXPECT_LE(cache->TreeBytes(), capacity);
  EXPECT_GE(cache->Stats().evictions, 1);
}

TEST(HybridCache, ReserveHasNoSideEffects) {
  const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
  auto cache = MakeHybridCache(Config(HybridPolicy::kMarconi, 1e12), cost);
  cache->Lookup(Seq(1, 50));
  cache->Admit(Seq(1, 80));
  const double before = cache->TreeBytes();
  const HybridReservation r = cache->Reserve(Cat(Seq(1, 40), Seq(900, 10)));
  EXPECT_EQ(r.new_tokens, 10);
  EXPECT_EQ(r.checkpoints, 2);  // branch at 40 + leaf
  EXPECT_EQ(r.bytes_needed, 2 * cost.CheckpointBytes() + cost.KvBytes(10));
  EXPECT_EQ(cache->TreeBytes(), before);
  EXPECT_EQ(cache->NodeCount(), 1);
}

TEST(HybridCache, SplitWithoutAStateLeavesATombstoneThatNeverHitsAndMergesAway) {
  const CostModel cost(Marconi7BShape(16), Accounting::kCorrected);
  auto cache = MakeRadixHybridCache(Config(HybridPolicy::kSglangPlus, 1e12), cost);
  HybridAdmitResult r = cache->AdmitStates(Seq(1, 100), {.branch_state_at = -1, .leaf_payload = 7});
  EXPECT_TRUE(r.leaf_used);
  // The second sequence splits the first at 60, but its state was taken at 50 (stale plan).
  const Tokens b = Cat(Seq(1, 60), Seq(900, 20));
  r = cache->AdmitStates(b, {.branch_state_at = 50, .branch_payload = 8, .leaf_payload = 9});
  EXPECT_FALSE(r.branch_used);
  EXPECT_TRUE(r.leaf_used);
  cache->CheckInvariants();
  int32_t node, payload;
  EXPECT_EQ(cache->CheckpointAtOrBelow(b, 70, &node, &payload), 0);  // the tombstone at 60 is no hit
  EXPECT_EQ(cache->CheckpointAtOrBelow(b, 80, &node, &payload), 80);
  EXPECT_EQ(payload, 9);
  EXPECT_EQ(cache->NodeCount(), 2);  // two checkpoints; the tombstone holds none
  // With the branch state where the split falls, the split node is a checkpoint.
  const Tokens c = Cat(Seq(1, 30), Seq(700, 5));
  r = cache->AdmitStates(c, {.branch_state_at = 30, .branch_payload = 10, .leaf_payload = 11});
  EXPECT_TRUE(r.branch_used && r.leaf_used);
  EXPECT_EQ(cache->CheckpointAtOrBelow(Seq(1, 45), 45, &node, &payload), 30);
  EXPECT_EQ(payload, 10);
  cache->CheckInvariants();
}

// Filling tombstones and ending inside an edge: Reserve counts what InsertSequence places, so
// a cache with room for three states never holds four.
TEST(HybridCache, FillingATombstoneOrEndingInsideAnEdgeStaysWithinCapacity) {
  HybridShape shape = Marconi7BShape(16);
  shape.kv_elem_bytes = 0;
  const CostModel slots_only(shape, Accounting::kCorrected);
  const double capacity = 3.5 * slots_only.CheckpointBytes();
  auto cache = MakeRadixHybridCache(Config(HybridPolicy::kSglangPlus, capacity), slots_only);
  cache->AdmitStates(Seq(1, 100), {.leaf_payload = 7});
  // A stale branch plan leaves a tombstone at 60; two states are held.
  cache->AdmitStates(Cat(Seq(1, 60), Seq(900, 20)), {.branch_state_at = 50, .branch_payload = 8, .leaf_payload = 9});
  EXPECT_EQ(cache->NodeCount(), 2);
  // Filling the tombstone at 60 and a new leaf are two more states: one must go first (the
  // tombstone then merges away and the branch state goes into a fresh split at 60).
  HybridAdmitResult r = cache->AdmitStates(Cat(Seq(1, 60), Seq(800, 10)),
                                           {.branch_state_at = 60, .branch_payload = 10, .leaf_payload = 11});
  EXPECT_TRUE(r.branch_used && r.leaf_used);
  EXPECT_EQ(r.freed_payloads, std::vector<int32_t>{7});
  cache->CheckInvariants();
  EXPECT_LE(cache->TreeBytes(), capacity);
  int32_t node, payload;
  EXPECT_EQ(cache->CheckpointAtOrBelow(Seq(1, 60), 60, &node, &payload), 60);
  EXPECT_EQ(payload, 10);

  // A sequence that is a strict prefix of a cached one keeps its own state: the edge splits
  // where it ends and the split node holds the leaf payload (no stateless single-child node).
  auto fresh = MakeRadixHybridCache(Config(HybridPolicy::kSglangPlus, 1e12), slots_only);
  fresh->AdmitStates(Seq(1, 100), {.leaf_payload = 1});
  r = fresh->AdmitStates(Seq(1, 40), {.leaf_payload = 2});
  EXPECT_TRUE(r.leaf_used);
  fresh->CheckInvariants();
  EXPECT_EQ(fresh->CheckpointAtOrBelow(Seq(1, 40), 40, &node, &payload), 40);
  EXPECT_EQ(payload, 2);
  EXPECT_EQ(fresh->Reserve(Seq(1, 40)).checkpoints, 0);  // already there
  EXPECT_EQ(fresh->Reserve(Seq(1, 20)).checkpoints, 1);  // a leaf split inside the edge
}

TEST(HybridCache, PeekAnswersLikeLookupWithoutRecordingARequest) {
  const CostModel cost(Marconi7BShape(16), Accounting::kCorrected);
  auto cache = MakeRadixHybridCache(Config(HybridPolicy::kMarconi, 1e12), cost);
  cache->Lookup(Seq(1, 100));
  cache->AdmitStates(Seq(1, 100), {.leaf_payload = 3});
  const auto before = cache->Stats();
  const HybridLookup peeked = cache->Peek(Cat(Seq(1, 100), Seq(500, 5)));
  EXPECT_EQ(peeked.hit_tokens, 100);
  const auto after = cache->Stats();
  EXPECT_EQ(after.requests, before.requests);
  EXPECT_EQ(after.hit_tokens, before.hit_tokens);
  const HybridLookup looked = cache->Lookup(Cat(Seq(1, 100), Seq(500, 5)));
  EXPECT_EQ(looked.hit_tokens, peeked.hit_tokens);
  EXPECT_EQ(cache->Stats().requests, before.requests + 1);
}

TEST(HybridCache, EvictedCheckpointsHandTheirPayloadsBack) {
  const CostModel cost(Marconi7BShape(16), Accounting::kCorrected);
  HybridShape shape = Marconi7BShape(16);
  shape.kv_elem_bytes = 0;  // the engine's setting: KV lives in the block tree, not here
  const CostModel slots_only(shape, Accounting::kCorrected);
  auto cache = MakeRadixHybridCache(Config(HybridPolicy::kMarconi, 2.0 * slots_only.CheckpointBytes()), slots_only);
  std::vector<int32_t> freed;
  for (int i = 0; i < 5; ++i) {
    const HybridAdmitResult r = cache->AdmitStates(Seq(1000 * (i + 1), 40), {.leaf_payload = 100 + i});
    EXPECT_TRUE(r.leaf_used);
    freed.insert(freed.end(), r.freed_payloads.begin(), r.freed_payloads.end());
    cache->CheckInvariants();
    EXPECT_LE(cache->NodeCount(), 2);
  }
  EXPECT_EQ(freed, (std::vector<int32_t>{100, 101, 102}));  // oldest first (alpha 0: LRU)
}

// ---- Randomized property test: random sessions sharing prefixes, random locks, every policy,
// a tight capacity; invariants after every step, the capacity never exceeded, locked prefixes
// never evicted.
TEST(HybridCache, RandomOperationsKeepTreeAndAccountingConsistent) {
  for (HybridPolicy policy : {HybridPolicy::kLru, HybridPolicy::kSglangPlus, HybridPolicy::kMarconi,
                              HybridPolicy::kMarconiStatic, HybridPolicy::kVllmPlus}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::mt19937 rng(seed);
      HybridShape shape = Marconi7BShape(16);
      if (policy == HybridPolicy::kLru) shape.n_ssm_layers = 0;
      const CostModel cost(shape, Accounting::kCorrected);
      HybridCacheConfig config = Config(policy, cost.CheckpointBytes() * 12.0 + cost.KvBytes(3000));
      config.alpha = 0.7;
      config.vllm_block_tokens = 8;
      auto cache = MakeHybridCache(config, cost);
      std::vector<Tokens> sessions(6);
      for (auto& s : sessions) s = Seq(1, 20 + rng() % 40);  // a shared system prompt, varied length
      std::vector<std::pair<HybridLookup, Tokens>> locked;
      for (int step = 0; step < 400; ++step) {
        Tokens& s = sessions[rng() % sessions.size()];
        if (rng() % 10 == 0) s.resize(std::min<size_t>(s.size(), 10 + rng() % 30));  // history rewritten
        const Tokens input = Cat(s, Seq(static_cast<int32_t>(rng() % 50000), 1 + rng() % 40));
        const HybridLookup l = cache->Lookup(input);
        ASSERT_LE(l.hit_tokens, static_cast<int64_t>(input.size()));
        if (rng() % 4 == 0 && l.hit_tokens > 0 && locked.size() < 3) {
          cache->Lock(l);
          locked.push_back({l, Tokens(input.begin(), input.begin() + l.hit_tokens)});
        }
        const Tokens sequence = Cat(input, Seq(static_cast<int32_t>(100000 + rng() % 50000), 1 + rng() % 30));
        cache->Admit(sequence);
        s = sequence;
        cache->CheckInvariants();  // includes TreeBytes() <= capacity in corrected accounting
        for (const auto& [lookup, prefix] : locked) {
          // A locked prefix is still fully cached: looking it up again hits all of it.
          ASSERT_EQ(cache->Reserve(prefix).new_tokens, 0) << HybridPolicyName(policy) << " step " << step;
        }
        if (!locked.empty() && rng() % 3 == 0) {
          cache->Unlock(locked.back().first);
          locked.pop_back();
        }
      }
      for (const auto& [lookup, prefix] : locked) cache->Unlock(lookup);
      cache->CheckInvariants();
      EXPECT_GT(cache->Stats().evictions, 0) << HybridPolicyName(policy);
      EXPECT_GT(cache->Stats().hit_tokens, 0) << HybridPolicyName(policy);
    }
  }
}

TEST(HybridCache, MarconiTunesEvenWhenLookupsRunAheadOfFinishes) {
  // The engine looks up every request it admits and admits states only when one finishes, so
  // the lookup count can step over the bootstrap window between two finishes. Tuning must still
  // happen (it fired only at exact equality, and the window then grew without end). Requests
  // go one at a time until the first eviction sets the window, then in groups whose size makes
  // the count step over it.
  const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
  HybridCacheConfig config = Config(HybridPolicy::kMarconi, cost.CheckpointBytes() * 8.0 + cost.KvBytes(4000));
  auto cache = MakeHybridCache(config, cost);
  constexpr int kRequests = 400;
  std::vector<Tokens> inputs, outputs;
  for (int i = 0; i < kRequests; ++i) {
    inputs.push_back(Cat(Seq(1 + 1000 * (i % 3), 200 + (i % 7) * 50), Seq(100000 + i * 300, 60)));
    outputs.push_back(Seq(500000 + i * 100, 30));
  }
  int next = 0;
  while (cache->Stats().bootstrap_window < 0 && next < kRequests) {
    cache->Lookup(inputs[next]);
    cache->Admit(Cat(inputs[next], outputs[next]));
    ++next;
  }
  const int64_t window = cache->Stats().bootstrap_window;
  ASSERT_GT(window, next) << "no eviction, or the window closed at once";
  ASSERT_LE(window, kRequests - 16);
  int group = 3;
  while ((window - next) % group == 0) ++group;  // the count jumps over the window
  for (; next + group <= kRequests && !cache->Stats().alpha_tuned; next += group) {
    for (int i = next; i < next + group; ++i) cache->Lookup(inputs[i]);
    for (int i = next; i < next + group; ++i) cache->Admit(Cat(inputs[i], outputs[i]));
  }
  EXPECT_TRUE(cache->Stats().alpha_tuned) << "window " << window << ", groups of " << group;
}

TEST(HybridCache, MarconiTunesAlphaOnceFromTheBootstrapWindow) {
  const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
  core::ThreadPool pool(2);
  HybridCacheConfig config = Config(HybridPolicy::kMarconi, cost.CheckpointBytes() * 8.0 + cost.KvBytes(4000));
  config.tuning_pool = &pool;
  auto tuned = MakeHybridCache(config, cost);
  std::mt19937 rng(7);
  std::vector<Tokens> inputs, outputs;
  for (int i = 0; i < 120; ++i) {
    inputs.push_back(Cat(Seq(1 + 1000 * (i % 3), 200 + (i % 7) * 50), Seq(100000 + i * 300, 60)));
    outputs.push_back(Seq(500000 + i * 100, 30));
  }
  for (int i = 0; i < 120; ++i) {
    tuned->Lookup(inputs[i]);
    tuned->Admit(Cat(inputs[i], outputs[i]));
  }
  const HybridCacheStats stats = tuned->Stats();
  ASSERT_TRUE(stats.alpha_tuned);
  ASSERT_GT(stats.bootstrap_window, 0);
  ASSERT_LE(stats.bootstrap_window, 120);
  // The tuned alpha saves the most FLOPs over the bootstrap window among the grid (ties: the
  // smallest), replayed from the start with a static alpha.
  auto window_flops = [&](double alpha) {
    HybridCacheConfig c = config;
    c.policy = HybridPolicy::kMarconiStatic;
    c.alpha = alpha;
    auto replay = MakeHybridCache(c, cost);
    for (int64_t i = 0; i < stats.bootstrap_window; ++i) {
      replay->Lookup(inputs[i]);
      replay->Admit(Cat(inputs[i], outputs[i]));
    }
    return replay->Stats().flops_saved;
  };
  const Flops chosen = window_flops(tuned->alpha());
  for (int i = 0; i <= 20; ++i) {
    const Flops other = window_flops(i / 10.0);
    EXPECT_LE(other, chosen) << "alpha " << i / 10.0;
    if (i / 10.0 < tuned->alpha()) {
      EXPECT_LT(other, chosen) << "a smaller alpha ties";
    }
  }
}

// ---- The child index: random inserts and erases against std::unordered_map (backward-shift
// deletion must keep every remaining key findable).
TEST(FlatMap, AgreesWithUnorderedMapUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(11);
  internal::FlatMap map;
  std::unordered_map<uint64_t, int32_t> want;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = rng() % 5000;  // few keys: long probe runs, many collisions
    if (rng() % 3 == 0) {
      map.Erase(key);
      want.erase(key);
    } else {
      const int32_t value = static_cast<int32_t>(rng() % 1000);
      auto [stored, fresh] = map.TryEmplace(key, value);
      auto [it, wfresh] = want.try_emplace(key, value);
      ASSERT_EQ(fresh, wfresh);
      ASSERT_EQ(*stored, it->second);
    }
    if (step % 997 == 0) {
      ASSERT_EQ(map.size(), want.size());
      for (uint64_t k = 0; k < 5000; ++k) {
        auto it = want.find(k);
        ASSERT_EQ(map.Find(k), it == want.end() ? -1 : it->second) << k;
      }
    }
  }
}

// ---- The reference class is only for the reference: it refuses what the artifact lacks.
TEST(MarconiReference, RefusesLruAndTheCorrectedCostModel) {
  HybridCacheConfig c = Config(HybridPolicy::kLru, 1e12);
  EXPECT_FALSE(MakeMarconiReferenceCache(c, CostModel(Marconi7BShape(128), Accounting::kReference)).ok());
  c.policy = HybridPolicy::kMarconi;
  EXPECT_FALSE(MakeMarconiReferenceCache(c, CostModel(Marconi7BShape(128), Accounting::kCorrected)).ok());
  EXPECT_TRUE(MakeMarconiReferenceCache(c, CostModel(Marconi7BShape(128), Accounting::kReference)).ok());
  // And the engine cannot be handed vllm+ (a checkpoint per block): an error, not a crash.
  c.policy = HybridPolicy::kVllmPlus;
  EXPECT_FALSE(MakeCheckpointCache(c, CostModel(Marconi7BShape(128), Accounting::kCorrected)).ok());
}

// ---- Tuning memory is bounded, and tuning in the background ends with the alpha tuning in
// place gives (the replays are deterministic), without the caller waiting for it.
std::vector<std::pair<Tokens, Tokens>> TuningWorkload(int n) {
  std::vector<std::pair<Tokens, Tokens>> w;
  for (int i = 0; i < n; ++i)
    w.push_back({Cat(Seq(1 + 1000 * (i % 3), 200 + (i % 7) * 50), Seq(100000 + i * 300, 60)), Seq(500000 + i * 100, 30)});
  return w;
}

TEST(AlphaTuner, BackgroundTuningReachesTheSameAlphaAndTheWindowIsBounded) {
  const CostModel cost(Marconi7BShape(128), Accounting::kCorrected);
  HybridCacheConfig config = Config(HybridPolicy::kMarconi, cost.CheckpointBytes() * 8.0 + cost.KvBytes(4000));
  const auto work = TuningWorkload(160);
  auto inline_cache = MakeHybridCache(config, cost);
  for (const auto& [in, out] : work) {
    inline_cache->Lookup(in);
    inline_cache->Admit(Cat(in, out));
  }
  ASSERT_TRUE(inline_cache->Stats().alpha_tuned);
  config.tune_in_background = true;
  auto background = MakeHybridCache(config, cost);
  for (const auto& [in, out] : work) {
    background->Lookup(in);
    background->Admit(Cat(in, out));
  }
  // The result is picked up at an admission after the replays finish.
  for (int i = 0; i < 200 && !background->Stats().alpha_tuned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    background->Lookup(work[i % 7].first);
    background->Admit(work[i % 7].first);
  }
  ASSERT_TRUE(background->Stats().alpha_tuned);
  EXPECT_EQ(background->alpha(), inline_cache->alpha());
  EXPECT_GT(inline_cache->Stats().tuning_window_tokens, 0);

  // A window capped at 5,000 tokens holds no more than that, and tuning still happens.
  config.tune_in_background = false;
  config.tuning_max_tokens = 5000;
  auto capped = MakeHybridCache(config, cost);
  for (const auto& [in, out] : work) {
    capped->Lookup(in);
    capped->Admit(Cat(in, out));
  }
  EXPECT_LE(capped->Stats().tuning_window_tokens, 5000);
  EXPECT_TRUE(capped->Stats().alpha_tuned);
}

// A replay that throws keeps the alpha in use; a tuner going away stops its replays at the next
// alpha instead of running the whole grid.
TEST(AlphaTuner, AFailedReplayKeepsTheAlphaAndShutdownDoesNotRunTheGrid) {
  HybridCacheConfig config = Config(HybridPolicy::kMarconi, 1e12);
  config.tune_in_background = true;
  config.bootstrap_multiplier = 1;
  {
    AlphaTuner tuner(config);
    tuner.RecordLookup(Seq(1, 10));
    tuner.OnEviction(1);
    const AlphaTuner::Replay failing = [](double, const std::vector<AlphaTuner::Request>&, int) -> Flops {
      throw std::runtime_error("replay broke");
    };
    EXPECT_FALSE(tuner.Poll(1, failing).has_value());  // started in the background
    std::optional<double> got;
    for (int i = 0; i < 500 && !tuner.tuned(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      got = tuner.Poll(1, failing);
    }
    EXPECT_TRUE(tuner.tuned());
    EXPECT_FALSE(got.has_value());
  }
  auto calls = std::make_shared<std::atomic<int>>(0);
  {
    AlphaTuner tuner(config);
    tuner.RecordLookup(Seq(1, 10));
    tuner.OnEviction(1);
    const AlphaTuner::Replay slow = [calls](double, const std::vector<AlphaTuner::Request>&, int) -> Flops {
      calls->fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return 0;
    };
    tuner.Poll(1, slow);
  }  // the destructor cancels
  EXPECT_LE(calls->load(), 2);
}

}  // namespace
}  // namespace radixlm::cache
