#include "sim/workloads.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/random.h"

namespace radixlm::sim {
namespace {

constexpr int32_t kVocab = 32000;  // Llama-2's, as the recipe tokenises with Llama-2-7b

using Tokens = std::vector<int32_t>;

Tokens RandomTokens(core::Rng& rng, int64_t n) {
  Tokens t(static_cast<size_t>(std::max<int64_t>(1, n)));
  for (auto& x : t) x = static_cast<int32_t>(3 + rng.Below(kVocab - 3));  // skip special ids
  return t;
}

// Log-normal length with the given mean and shape, at least 1.
int64_t LogNormalLength(core::Rng& rng, double mean, double sigma) {
  const double mu = std::log(mean) - sigma * sigma / 2;
  return std::max<int64_t>(1, std::llround(std::exp(mu + sigma * rng.Normal(0.f, 1.f))));
}

int64_t Poisson(core::Rng& rng, double lambda) {  // Knuth's method; lambda is seconds, small
  const double limit = std::exp(-lambda);
  double p = 1;
  int64_t k = -1;
  do {
    ++k;
    p *= rng.Uniform();
  } while (p > limit);
  return k;
}

// A request as a list of segment ids into the session's segments, materialised at emission so
// the generator holds each distinct token once.
struct PlannedRequest {
  double ts;
  int64_t session, turn;
  std::vector<int32_t> input_segments;
  int32_t output_segment;
};

struct Session {
  std::vector<const Tokens*> segments;  // borrowed shared prompts or owned below
  std::vector<Tokens> owned;
};

struct ChatShape {
  double user_mean, reply_mean;
  int min_turns, max_turns;
  bool cap_includes_output;
};

// What a session's planner draws from and writes to.
struct Planner {
  const WorkloadOptions& o;
  core::Rng& rng;
  core::Rng& regen_rng;  // regenerations' own stream: regenerate = 0 leaves every trace as it was
  const std::vector<Tokens>& shared;
  Session& session;
  int64_t s;  // the session's index
  std::vector<PlannedRequest>* plan;

  bool Regenerated() { return o.regenerate > 0 && regen_rng.Uniform() < o.regenerate; }
  int32_t Add(Tokens t) {
    session.owned.push_back(std::move(t));
    session.segments.push_back(&session.owned.back());
    return static_cast<int32_t>(session.segments.size() - 1);
  }
  int32_t Share(const Tokens& t) {
    session.segments.push_back(&t);
    return static_cast<int32_t>(session.segments.size() - 1);
  }
  bool Full(size_t more) const { return session.owned.size() + more > session.owned.capacity(); }  // keeps pointers valid
};

// SWE-agent: the shared system prompt and demonstration, the issue, then action / observation
// pairs, observations older than the last five collapsed to a placeholder.
void PlanAgentSession(Planner& p, const ChatShape&) {
  double ts = static_cast<double>(p.s) / p.o.sessions_per_second;
  std::vector<int32_t> prefix = {p.Share(p.shared[0]), p.Add(RandomTokens(p.rng, LogNormalLength(p.rng, 420, 0.6)))};
  const int64_t prefix_len = static_cast<int64_t>(p.shared[0].size() + p.session.owned.back().size());
  std::vector<std::tuple<int32_t, int32_t, int32_t>> pairs;  // (action, observation, collapsed)
  for (int turn = 0; turn < std::min(p.o.max_turns, 50); ++turn) {
    std::vector<int32_t> input = prefix;
    int64_t len = prefix_len;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto [action, obs, collapsed] = pairs[i];
      const int32_t shown = i + 5 < pairs.size() ? collapsed : obs;
      input.push_back(action);
      input.push_back(shown);
      len += static_cast<int64_t>(p.session.segments[action]->size() + p.session.segments[shown]->size());
    }
    if (len > p.o.max_context || p.Full(3)) break;
    int32_t action = p.Add(RandomTokens(p.rng, LogNormalLength(p.rng, 120, 0.5)));
    p.plan->push_back({ts, p.s, turn, input, action});
    while (p.Regenerated() && !p.Full(4)) {  // the step retried
      ts += 2.0;
      action = p.Add(RandomTokens(p.regen_rng, LogNormalLength(p.regen_rng, 120, 0.5)));
      p.plan->push_back({ts, p.s, turn, input, action});
    }
    const int64_t obs_len = LogNormalLength(p.rng, 520, 1.1);
    const int32_t obs = p.Add(RandomTokens(p.rng, obs_len));
    // SWE-agent's placeholder names how many lines it dropped: a few fixed tokens + count.
    const int32_t collapsed = p.Add({450, 3430, 1962, 25181, 29901, 29871, static_cast<int32_t>(29900 + obs_len % 10)});
    pairs.emplace_back(action, obs, collapsed);
    ts += static_cast<double>(Poisson(p.rng, p.o.mean_agent_gap_s));
  }
}

// A chat: one of the shared system prompts, then user turns and replies of the shape's lengths.
void PlanChatSession(Planner& p, const ChatShape& chat) {
  double ts = static_cast<double>(p.s) / p.o.sessions_per_second;
  std::vector<int32_t> history = {p.Share(p.shared[p.rng.Below(p.shared.size())])};
  int64_t len = static_cast<int64_t>(p.session.segments[0]->size());
  const int turns = chat.min_turns + static_cast<int>(p.rng.Below(chat.max_turns - chat.min_turns + 1));
  for (int turn = 0; turn < std::min(turns, p.o.max_turns); ++turn) {
    const int64_t user_len = LogNormalLength(p.rng, chat.user_mean, 0.9);
    const int64_t reply_len = LogNormalLength(p.rng, chat.reply_mean, 0.8);
    const int64_t cap_len = len + user_len + (chat.cap_includes_output ? reply_len : 0);
    if (cap_len > p.o.max_context || p.Full(3)) break;
    if (turn > 0) ts += 0.75 * static_cast<double>(user_len) / (90.0 / 60.0);  // typing
    history.push_back(p.Add(RandomTokens(p.rng, user_len)));
    int32_t reply = p.Add(RandomTokens(p.rng, reply_len));
    p.plan->push_back({ts, p.s, turn, history, reply});
    while (p.Regenerated() && !p.Full(4)) {  // "regenerate"
      ts += 5.0;
      reply = p.Add(RandomTokens(p.regen_rng, LogNormalLength(p.regen_rng, chat.reply_mean, 0.8)));
      p.plan->push_back({ts, p.s, turn, history, reply});
    }
    history.push_back(reply);
    len += user_len + static_cast<int64_t>(p.session.segments[reply]->size());
  }
}

// The workloads, one row each: the shared prompts' lengths, the session planner and its shape.
struct WorkloadRow {
  const char* name;
  int64_t shared[4];  // token lengths of the shared prompts (0: none)
  void (*plan_session)(Planner&, const ChatShape&);
  ChatShape chat;
};
const WorkloadRow kWorkloads[] = {
    {"lmsys", {180, 320, 560, 90}, PlanChatSession, {70, 215, 10, 20, true}},  // LMSys-Chat-1M turn means (tokens)
    {"sharegpt", {180, 320, 560, 90}, PlanChatSession, {95, 290, 10, 25, false}},
    {"swebench", {2600, 0, 0, 0}, PlanAgentSession, {}},  // system prompt + demonstration
};

void Emit(const std::vector<PlannedRequest>& plan, const std::vector<Session>& sessions,
          const std::function<void(const TraceRequest&)>& emit) {
  TraceRequest request;
  for (const PlannedRequest& p : plan) {
    const Session& session = sessions[p.session];
    request.session_id = p.session;
    request.turn_id = p.turn;
    request.ts = p.ts;
    request.input.clear();
    for (int32_t seg : p.input_segments)
      request.input.insert(request.input.end(), session.segments[seg]->begin(), session.segments[seg]->end());
    request.output = *session.segments[p.output_segment];
    emit(request);
  }
}

}  // namespace

core::Status GenerateWorkload(const WorkloadOptions& o,
                              const std::function<void(const TraceRequest&)>& emit) {
  // Written as "not within" so that NaN, which every comparison rejects, is refused too.
  if (o.sessions <= 0 || !(o.sessions_per_second > 0 && std::isfinite(o.sessions_per_second)) ||
      !(o.mean_agent_gap_s >= 0 && std::isfinite(o.mean_agent_gap_s)) || o.max_turns <= 0)
    return core::InvalidArgument("sessions, sps and turns must be positive (sps and art finite), art non-negative");
  if (!(o.regenerate >= 0 && o.regenerate < 1)) return core::InvalidArgument("regenerate must be in [0, 1)");
  const WorkloadRow* row = nullptr;
  std::string names;
  for (const WorkloadRow& r : kWorkloads) {
    if (o.kind == r.name) row = &r;
    names += (names.empty() ? "" : ", ") + std::string(r.name);
  }
  if (!row) return core::InvalidArgument("unknown workload '" + o.kind + "' (" + names + ")");
  core::Rng regen_rng(o.seed * 0x2545f4914f6cdd1dull + 91);
  core::Rng rng(o.seed * 0x9e3779b97f4a7c15ull + 17);
  std::vector<Tokens> shared;
  for (int64_t len : row->shared)
    if (len > 0) shared.push_back(RandomTokens(rng, len));
  std::vector<Session> sessions(o.sessions);
  std::vector<PlannedRequest> plan;
  for (int s = 0; s < o.sessions; ++s) {
    sessions[s].owned.reserve(256);
    Planner p{o, rng, regen_rng, shared, sessions[s], s, &plan};
    row->plan_session(p, row->chat);
  }
  std::stable_sort(plan.begin(), plan.end(), [](const PlannedRequest& a, const PlannedRequest& b) {
    return std::tie(a.ts, a.session, a.turn) < std::tie(b.ts, b.session, b.turn);
  });
  Emit(plan, sessions, emit);
  return core::Status::Ok();
}

}  // namespace radixlm::sim
