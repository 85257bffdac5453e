#include "replay/recorded.h"

namespace radixlm::replay {

using nlohmann::json;

namespace {

json RecordedReport(const engine::EngineMetrics& m, int64_t requests, int64_t skipped, int64_t prompt_tokens,
                    int64_t completion, int64_t decode_steps, double decode_seconds, double seconds) {
  json origins = json::object();
  const engine::SpeculationCounts all = m.SpeculationTotal();
  for (size_t i = 0; i < m.speculation.size(); ++i) {
    const engine::SpeculationCounts& c = m.speculation[i];
    origins[engine::SpeculationOrigin(i)] = {
        {"verifications", c.steps}, {"drafted", c.drafted}, {"accepted", c.accepted}, {"recomputed", c.recomputed},
        {"acceptance_rate", c.drafted ? double(c.accepted) / c.drafted : 0.0},
        {"tokens_per_verification", c.steps ? double(c.steps + c.accepted) / c.steps : 0.0}};
  }
  const int64_t decode_tokens = completion - requests;  // each request's first token comes with its prefill
  return {{"requests", requests}, {"skipped", skipped}, {"prompt_tokens", prompt_tokens}, {"recorded_tokens", completion},
          {"cached_tokens", m.cached_prompt_tokens}, {"decode_steps", decode_steps},
          {"tokens_per_decode_step", decode_steps ? double(decode_tokens) / decode_steps : 0.0},
          {"decode_seconds", decode_seconds}, {"decode_tokens_per_s", decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0},
          {"seconds", seconds}, {"drafted", all.drafted}, {"accepted", all.accepted},
          {"acceptance_rate", all.drafted ? double(all.accepted) / all.drafted : 0.0},
          {"accepted_per_step", decode_steps ? double(all.accepted) / decode_steps : 0.0}, {"by_origin", origins}};
}

}  // namespace

core::StatusOr<json> RunRecorded(engine::Engine& eng, const std::vector<Conversation>& convs, const tokenizer::Tokenizer& tok,
                                 const tokenizer::ChatTemplate& format, int max_tokens) {
  int64_t requests = 0, prompt_tokens = 0, completion = 0, decode_steps = 0, skipped = 0;
  double decode_seconds = 0;
  const double t0 = engine::NowSeconds();
  for (const Conversation& c : convs)
    for (const Turn& turn : c.turns) {
      auto text = format.RenderMessages(turn.history, true);
      if (!text.ok()) continue;
      engine::RequestParams p;
      p.prompt = tok.Encode(*text);
      std::vector<int32_t> answer = tok.Encode(turn.recorded);
      if (answer.size() > static_cast<size_t>(max_tokens)) answer.resize(static_cast<size_t>(max_tokens));
      if (answer.size() < 2 || static_cast<int64_t>(p.prompt.size() + answer.size()) > eng.max_request_tokens()) {
        ++skipped;
        continue;
      }
      p.continuation = answer;
      double first = 0;
      int64_t steps_at_first = 0;
      bool done = false;
      const auto submitted = eng.Submit(p, [&](const engine::TokenEvent& ev) {
        if (ev.token >= 0 && first == 0) first = engine::NowSeconds(), steps_at_first = eng.Metrics().steps + 1;
        if (ev.finish != engine::FinishReason::kNone) done = true;
      });
      RADIXLM_RETURN_IF_ERROR(submitted.status());
      while (!done && eng.Step()) {
      }
      decode_seconds += engine::NowSeconds() - first;
      decode_steps += eng.Metrics().steps - steps_at_first;
      ++requests;
      prompt_tokens += static_cast<int64_t>(p.prompt.size());
      completion += static_cast<int64_t>(answer.size());
    }
  return RecordedReport(eng.Metrics(), requests, skipped, prompt_tokens, completion, decode_steps, decode_seconds,
                        engine::NowSeconds() - t0);
}

}  // namespace radixlm::replay
