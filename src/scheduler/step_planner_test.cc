#include "scheduler/step_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace radixlm::scheduler {
namespace {

// A memory of `blocks` KV blocks of `bt` tokens, counted per sequence; cached prefixes are
// given per request (a radix tree is the cache's business, not the planner's).
class FakeRoom : public Room {
 public:
  FakeRoom(int blocks, int bt) : free_(blocks), bt_(bt) {}
  std::map<int64_t, int64_t> cached;  // request id -> tokens a hit serves
  std::map<int64_t, int64_t> length;  // request id -> its tokens (admission reserves them all)

  bool Grow(int64_t id, int64_t upto) override {
    const int64_t need = (upto + bt_ - 1) / bt_ - held_[id];
    if (need > free_) return false;
    if (need > 0) {
      free_ -= need;
      held_[id] += need;
    }
    return true;
  }
  void Preempt(int64_t id) override {
    free_ += held_[id];
    held_[id] = 0;
  }
  int64_t CachedPrefix(int64_t id) const override {
    auto it = cached.find(id);
    return it == cached.end() ? 0 : it->second;
  }
  // ShareAhead: when on, promises are recorded and the timeline makes them good (the cached
  // prefix of every waiting request on the leader's path grows once the leader computed it).
  bool shares_ahead = false;
  std::map<int64_t, int64_t> promises;  // leader -> tokens promised
  bool ShareAhead(int64_t id, int64_t at) override {
    if (!shares_ahead || (promises.count(id) && promises[id] != at)) return false;
    promises[id] = at;
    return true;
  }
  // AwaitsElsewhere: these ids wait for a prefix another replica computes, for this many asks.
  std::map<int64_t, int> elsewhere;
  bool AwaitsElsewhere(int64_t id) override {
    auto it = elsewhere.find(id);
    return it != elsewhere.end() && it->second-- > 0;
  }
  bool Admit(int64_t id, bool alone, int64_t* computed) override {
    const int64_t c = CachedPrefix(id);
    const int64_t need = (length.at(id) + bt_ - 1) / bt_;  // as cache::Memory: every token it has
    if (need > free_) return false;
    free_ -= need;
    held_[id] = need;
    *computed = c;
    return true;
  }

 private:
  int64_t free_;
  int bt_;
  std::map<int64_t, int64_t> held_;
};

// Requests A, B, C, ... with given prompts; each step is planned, then "executed" (a request
// that computed its whole prompt generates a token; after `gen` tokens it finishes). The
// timeline is one line per step: "A 0+8 B 0+2 | wait C | preempt B".
struct Timeline {
  PlannerConfig config;
  FakeRoom room;
  int gen = 2;
  struct Seq {
    std::vector<int32_t> tokens;
    int64_t computed = 0, arrival = 0, waited = 0;
    int generated = 0;
    bool done = false;
  };
  std::map<int64_t, Seq> seqs;
  std::vector<int64_t> running, waiting;

  Timeline(PlannerConfig c, int blocks, int bt) : config(c), room(blocks, bt) {}
  static std::string Name(int64_t id) { return std::string(1, static_cast<char>('A' + id)); }

  void Submit(std::vector<int32_t> prompt) {
    const int64_t id = static_cast<int64_t>(seqs.size());
    seqs[id] = {std::move(prompt), 0, id, 0};
    waiting.push_back(id);
  }
  std::string Step() {
    std::vector<SeqView> rv, wv;
    for (int64_t id : running) rv.push_back({id, seqs[id].tokens, seqs[id].computed, seqs[id].arrival, seqs[id].waited});
    for (int64_t id : waiting) wv.push_back({id, seqs[id].tokens, 0, seqs[id].arrival, seqs[id].waited});
    for (const auto& [id, s] : seqs) room.length[id] = static_cast<int64_t>(s.tokens.size());
    const StepPlan plan = PlanStep(config, rv, wv, room);
    for (int64_t id : plan.preempted) seqs[id].computed = 0;
    for (int64_t id : plan.admitted) seqs[id].computed = room.CachedPrefix(id);
    running = plan.running;
    waiting = plan.waiting;
    for (size_t k = 0; k < waiting.size(); ++k) seqs[waiting[k]].waited = plan.waited_steps[k];
    std::string line;
    for (const StepPlan::Chunk& c : plan.chunks) {
      line += (line.empty() ? "" : " ") + Name(c.id) + " " + std::to_string(c.from) + "+" + std::to_string(c.n);
      Seq& s = seqs[c.id];
      s.computed += c.n;
      if (s.computed == static_cast<int64_t>(s.tokens.size())) {
        s.tokens.push_back(7);
        if (++s.generated == gen) s.done = true;
      }
    }
    for (auto it = room.promises.begin(); it != room.promises.end();) {
      const Seq& leader = seqs[it->first];
      if (leader.computed < it->second) {
        ++it;
        continue;
      }
      for (int64_t id : waiting) {
        const std::vector<int32_t>& t = seqs[id].tokens;
        if (static_cast<int64_t>(t.size()) > it->second &&
            std::equal(t.begin(), t.begin() + it->second, leader.tokens.begin()))
          room.cached[id] = std::max(room.cached[id], it->second);
      }
      it = room.promises.erase(it);
    }
    std::vector<int64_t> still;
    for (int64_t id : running) {
      if (seqs[id].done) room.Preempt(id);  // finished: its memory goes back
      else still.push_back(id);
    }
    running = still;
    if (!waiting.empty()) {
      line += " | wait";
      for (int64_t id : waiting) line += " " + Name(id);
    }
    if (!plan.preempted.empty()) {
      line += " | preempt";
      for (int64_t id : plan.preempted) line += " " + Name(id);
    }
    return line;
  }
  std::vector<std::string> Run(int steps) {
    std::vector<std::string> out;
    for (int i = 0; i < steps && (!running.empty() || !waiting.empty()); ++i) out.push_back(Step());
    return out;
  }
};

std::vector<int32_t> Tokens(int n, int32_t base = 100) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = base + i;
  return t;
}

PlannerConfig Config(int budget, int max_running, int64_t alignment = 0, bool shares = false) {
  PlannerConfig c;
  c.scheduler.step_token_budget = budget;
  c.scheduler.max_running = max_running;
  c.alignment = alignment;
  c.shares_step_prefixes = shares;
  return c;
}

// The budget splits A's prompt in chunks; B is admitted once budget is left, and decodes cost
// one token each.
TEST(StepPlanner, BudgetChunksPrefillsAndAdmitsWhenTokensAreLeft) {
  Timeline t(Config(8, 4), 64, 4);
  t.Submit(Tokens(10));
  t.Submit(Tokens(6, 200));
  EXPECT_EQ(t.Run(10), (std::vector<std::string>{
                           "A 0+8 | wait B",
                           "A 8+2 B 0+6",  // A's last two, then B fits in what is left
                           "A 10+1 B 6+1",  // each decodes its second token and finishes
                       }));
}

// A request awaiting its prefix from another replica is passed over, not a stop: B, behind it,
// is admitted meanwhile; A is admitted once the room no longer says it waits.
TEST(StepPlanner, ARequestAwaitingAnotherReplicaIsPassedOver) {
  Timeline t(Config(16, 4), 64, 4);
  t.Submit(Tokens(6));
  t.Submit(Tokens(4, 200));
  t.room.elsewhere[0] = 2;  // A waits for two asks
  EXPECT_EQ(t.Run(10), (std::vector<std::string>{
                           "B 0+4 | wait A",
                           "B 4+1 | wait A",
                           "A 0+6",
                           "A 6+1",
                       }));
}

// Chunks end on the executor's grid when they can (a recurrent scan's chunk grid).
TEST(StepPlanner, ChunksEndOnTheAlignmentGrid) {
  Timeline t(Config(10, 2, /*alignment=*/4), 64, 4);
  t.Submit(Tokens(13));
  EXPECT_EQ(t.Run(4), (std::vector<std::string>{"A 0+8", "A 8+5", "A 13+1"}));
}

// Out of blocks, the newest running sequence is preempted and goes first in the queue; it
// comes back when room returns.
TEST(StepPlanner, PreemptsTheNewestWhenMemoryRunsOut) {
  Timeline t(Config(16, 4), 4, 4);  // 4 blocks of 4 tokens
  t.gen = 3;
  t.Submit(Tokens(8));
  t.Submit(Tokens(4, 300));
  EXPECT_EQ(t.Run(8), (std::vector<std::string>{
                          "A 0+8 B 0+4",                 // 2 blocks + 1: one left
                          "A 8+1 | wait B | preempt B",  // A takes the last block; B cannot grow: out
                          "A 9+1 | wait B",              // B's 5 tokens need 2 blocks, 1 is free
                          "B 0+5",                       // A finished: B recomputes
                          "B 5+1",
                      }));
}

// Rows another sequence of the step computes are not charged: with dedup, two prompts with a
// common prefix prefill together although the budget covers one.
TEST(StepPlanner, RowsSharedWithinTheStepAreNotCharged) {
  std::vector<int32_t> a = Tokens(8), b = Tokens(8);
  b[7] = 999;  // the first 7 tokens are common
  {
    Timeline t(Config(8, 4, 0, /*shares=*/false), 64, 4);
    t.Submit(a);
    t.Submit(b);
    EXPECT_EQ(t.Run(1), (std::vector<std::string>{"A 0+8 | wait B"}));
  }
  Timeline t(Config(8, 4, 0, /*shares=*/true), 64, 4);
  t.Submit(a);
  t.Submit(b);
  EXPECT_EQ(t.Run(1), (std::vector<std::string>{"A 0+8 B 0+7"})) << "B's 7 shared rows cost nothing; its last waits";
}

// Where a step's rows are not shared (a hybrid model), requests that share a long prompt prefix
// with a running prefill wait for it to compute that prefix and share it ahead of its prompt's
// end, then compute only their own suffixes; without ShareAhead each computes it again.
TEST(StepPlanner, RequestsSharingARunningPrefillsPrefixWaitForIt) {
  std::vector<int32_t> b = Tokens(150), c = Tokens(150);
  for (int i = 0; i < 20; ++i) b.push_back(900 + i), c.push_back(950 + i);
  for (const bool ahead : {true, false}) {
    Timeline t(Config(64, 4), 256, 16);
    t.gen = 1;
    t.room.shares_ahead = ahead;
    t.Submit(Tokens(200));
    t.Submit(b);
    t.Submit(c);
    if (ahead) {
      EXPECT_EQ(t.Run(8), (std::vector<std::string>{"A 0+64 | wait B C", "A 64+64 | wait B C", "A 128+64 | wait B C",
                                                     "A 192+8 B 150+20 C 150+20"}));
    } else {
      EXPECT_EQ(t.Run(8), (std::vector<std::string>{"A 0+64 | wait B C", "A 64+64 | wait B C", "A 128+64 | wait B C",
                                                     "A 192+8 B 0+56 | wait C", "B 56+64 | wait C", "B 120+50 C 0+14",
                                                     "C 14+64", "C 78+64"}));
    }
  }
  // A shared prefix shorter than await_shared_prefill past the cached prefix: no waiting.
  PlannerConfig cfg = Config(64, 4);
  cfg.scheduler.await_shared_prefill = 200;
  Timeline t(cfg, 256, 16);
  t.room.shares_ahead = true;
  t.Submit(Tokens(10));
  t.Submit(Tokens(200));
  t.Submit(b);
  EXPECT_EQ(t.Run(1), (std::vector<std::string>{"A 0+10 B 0+54 | wait C"}));
  EXPECT_TRUE(t.room.promises.empty());
}

// Admission takes the longest cached prefix first; a request passed over in starvation_steps
// admission rounds goes ahead, oldest first (waited_steps counts rounds it lost, not steps).
TEST(StepPlanner, LongestCachedPrefixFirstUntilARequestStarves) {
  for (const int64_t starvation : {3, 100}) {
    PlannerConfig c = Config(4, 1);
    c.scheduler.starvation_steps = starvation;
    Timeline t(c, 64, 4);
    t.gen = 1;
    t.Submit(Tokens(4));        // A: nothing cached, passed over twice already
    t.Submit(Tokens(4, 300));   // B: 3 tokens cached
    t.Submit(Tokens(4, 500));   // C: 2 tokens cached
    t.seqs[0].waited = 2;
    t.room.cached = {{1, 3}, {2, 2}};
    if (starvation == 3) {
      EXPECT_EQ(t.Run(6), (std::vector<std::string>{"B 3+1 | wait A C", "A 0+4 | wait C", "C 2+2"}))
          << "A starved: it goes before C's longer hit";
    } else {
      EXPECT_EQ(t.Run(6), (std::vector<std::string>{"B 3+1 | wait A C", "C 2+2 | wait A", "A 0+4"}));
    }
  }
}

}  // namespace
}  // namespace radixlm::scheduler
