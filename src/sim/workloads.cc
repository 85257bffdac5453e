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

}  // namespace

core::Status GenerateWorkload(const WorkloadOptions& o,
                              const std::function<void(const TraceRequest&)>& emit) {
  // Written as "not within" so that NaN, which every comparison rejects, is refused too.
  if (o.sessions <= 0 || !(o.sessions_per_second > 0 && std::isfinite(o.sessions_per_second)) ||
      !(o.mean_agent_gap_s >= 0 && std::isfinite(o.mean_agent_gap_s)) || o.max_turns <= 0)
    return core::InvalidArgument("sessions, sps and turns must be positive (sps and art finite), art non-negative");
  if (!(o.regenerate >= 0 && o.regenerate < 1)) return core::InvalidArgument("regenerate must be in [0, 1)");
  // Regenerations draw from their own stream, so regenerate = 0 leaves every trace as it was.
  core::Rng regen_rng(o.seed * 0x2545f4914f6cdd1dull + 91);
  auto regenerated = [&]() { return o.regenerate > 0 && regen_rng.Uniform() < o.regenerate; };
  const bool agent = o.kind == "swebench";
  ChatShape chat{};
  if (o.kind == "lmsys") {
    chat = {70, 215, 10, 20, true};  // LMSys-Chat-1M turn means (tokens)
  } else if (o.kind == "sharegpt") {
    chat = {95, 290, 10, 25, false};
  } else if (!agent) {
    return core::InvalidArgument("unknown workload '" + o.kind + "' (lmsys, sharegpt, swebench)");
  }
  core::Rng rng(o.seed * 0x9e3779b97f4a7c15ull + 17);
  // Shared prompts: four chat system prompts, or the agent's system prompt + demonstration.
  std::vector<Tokens> shared;
  if (agent) {
    shared.push_back(RandomTokens(rng, 2600));
  } else {
    for (int64_t len : {180, 320, 560, 90}) shared.push_back(RandomTokens(rng, len));
  }
  std::vector<Session> sessions(o.sessions);
  std::vector<PlannedRequest> plan;
  for (int s = 0; s < o.sessions; ++s) {
    Session& session = sessions[s];
    session.owned.reserve(256);
    auto add = [&](Tokens t) {
      session.owned.push_back(std::move(t));
      session.segments.push_back(&session.owned.back());
      return static_cast<int32_t>(session.segments.size() - 1);
    };
    auto share = [&](const Tokens& t) {
      session.segments.push_back(&t);
      return static_cast<int32_t>(session.segments.size() - 1);
    };
    double ts = s / o.sessions_per_second;
    if (agent) {
      std::vector<int32_t> prefix = {share(shared[0]), add(RandomTokens(rng, LogNormalLength(rng, 420, 0.6)))};
      int64_t prefix_len = static_cast<int64_t>(shared[0].size() + session.owned.back().size());
      std::vector<std::tuple<int32_t, int32_t, int32_t>> pairs;  // (action, observation, collapsed)
      for (int turn = 0; turn < std::min(o.max_turns, 50); ++turn) {
        // History: every pair, observations older than the last five collapsed.
        std::vector<int32_t> input = prefix;
        int64_t len = prefix_len;
        for (size_t i = 0; i < pairs.size(); ++i) {
          const auto [action, obs, collapsed] = pairs[i];
          const int32_t shown = i + 5 < pairs.size() ? collapsed : obs;
          input.push_back(action);
          input.push_back(shown);
          len += static_cast<int64_t>(session.segments[action]->size() + session.segments[shown]->size());
        }
        if (len > o.max_context) break;
        if (session.owned.size() + 3 > session.owned.capacity()) break;  // keeps pointers valid
        int32_t action = add(RandomTokens(rng, LogNormalLength(rng, 120, 0.5)));
        plan.push_back({ts, s, turn, input, action});
        while (regenerated() && session.owned.size() + 4 <= session.owned.capacity()) {  // the step retried
          ts += 2.0;
          action = add(RandomTokens(regen_rng, LogNormalLength(regen_rng, 120, 0.5)));
          plan.push_back({ts, s, turn, input, action});
        }
        const int64_t obs_len = LogNormalLength(rng, 520, 1.1);
        const int32_t obs = add(RandomTokens(rng, obs_len));
        // SWE-agent's placeholder names how many lines it dropped: a few fixed tokens + count.
        Tokens placeholder = {450, 3430, 1962, 25181, 29901, 29871, static_cast<int32_t>(29900 + obs_len % 10)};
        const int32_t collapsed = add(std::move(placeholder));
        pairs.emplace_back(action, obs, collapsed);
        ts += static_cast<double>(Poisson(rng, o.mean_agent_gap_s));
      }
    } else {
      std::vector<int32_t> history = {share(shared[rng.Below(shared.size())])};
      int64_t len = static_cast<int64_t>(session.segments[0]->size());
      const int turns = chat.min_turns + static_cast<int>(rng.Below(chat.max_turns - chat.min_turns + 1));
      for (int turn = 0; turn < std::min(turns, o.max_turns); ++turn) {
        const int64_t user_len = LogNormalLength(rng, chat.user_mean, 0.9);
        const int64_t reply_len = LogNormalLength(rng, chat.reply_mean, 0.8);
        const int64_t cap_len = len + user_len + (chat.cap_includes_output ? reply_len : 0);
        if (cap_len > o.max_context) break;
        if (session.owned.size() + 3 > session.owned.capacity()) break;
        if (turn > 0) ts += 0.75 * static_cast<double>(user_len) / (90.0 / 60.0);  // typing
        history.push_back(add(RandomTokens(rng, user_len)));
        int32_t reply = add(RandomTokens(rng, reply_len));
        plan.push_back({ts, s, turn, history, reply});
        while (regenerated() && session.owned.size() + 4 <= session.owned.capacity()) {  // "regenerate"
          ts += 5.0;
          reply = add(RandomTokens(regen_rng, LogNormalLength(regen_rng, chat.reply_mean, 0.8)));
          plan.push_back({ts, s, turn, history, reply});
        }
        history.push_back(reply);
        len += user_len + static_cast<int64_t>(session.segments[reply]->size());
      }
    }
  }
  std::stable_sort(plan.begin(), plan.end(), [](const PlannedRequest& a, const PlannedRequest& b) {
    return std::tie(a.ts, a.session, a.turn) < std::tie(b.ts, b.session, b.turn);
  });
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
  return core::Status::Ok();
}

}  // namespace radixlm::sim
