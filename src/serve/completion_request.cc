#include "serve/completion_request.h"

#include "serve/tool_calls.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <random>
#include <type_traits>

namespace radixlm::serve {
namespace {

using json = nlohmann::ordered_json;

// Reads an optional field of type T (see the header: strict about types and ranges).
template <typename T>
bool Field(const json& body, const char* name, T* out, ApiError* err) {
  if (!body.contains(name) || body[name].is_null()) return true;
  const json& v = body[name];
  bool fits;
  if constexpr (std::is_same_v<T, bool>) {
    fits = v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    fits = IntegerFits<T, json>(v);
    if (!fits && v.is_number_integer()) {
      *err = {400, std::string("'") + name + "' is out of range", "invalid_request_error", name, "invalid_value"};
      return false;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    fits = v.is_number();
  } else {
    fits = true;
  }
  if (fits) {
    *out = v.get<T>();
    return true;
  }
  *err = {400, std::string("'") + name + "' has the wrong type", "invalid_request_error", name, "invalid_type"};
  return false;
}

// Every field a request may carry, and what this server does with it. A field not listed is a
// 400 naming it (as OpenAI answers "Unrecognized request argument"), so no client takes an
// answer computed without an option it asked for.
enum class Use {
  kRead,          // implemented (read below)
  kNoEffect,      // accepted, changes nothing by its definition (an end-user id)
  kUnlessOff,     // not implemented: refused unless it asks for nothing (null, false, 0, "", {}, [])
  kUnsupported,   // not implemented, refused whatever its value
};
struct FieldRule {
  const char* name;
  Use use;
};
constexpr FieldRule kFields[] = {
    {"model", Use::kRead}, {"prompt", Use::kRead}, {"messages", Use::kRead}, {"max_tokens", Use::kRead},
    {"max_completion_tokens", Use::kRead}, {"temperature", Use::kRead}, {"top_p", Use::kRead}, {"top_k", Use::kRead},
    {"min_p", Use::kRead}, {"seed", Use::kRead}, {"n", Use::kRead}, {"best_of", Use::kRead}, {"stream", Use::kRead},
    {"stream_options", Use::kRead}, {"stop", Use::kRead}, {"stop_token_ids", Use::kRead},
    {"presence_penalty", Use::kRead}, {"frequency_penalty", Use::kRead}, {"repetition_penalty", Use::kRead},
    {"min_tokens", Use::kRead}, {"ignore_eos", Use::kRead}, {"return_token_ids", Use::kRead}, {"cache_salt", Use::kRead},
    {"user", Use::kNoEffect},
    {"logprobs", Use::kRead}, {"top_logprobs", Use::kRead}, {"echo", Use::kRead}, {"logit_bias", Use::kRead},
    {"suffix", Use::kUnlessOff}, {"tools", Use::kRead}, {"tool_choice", Use::kRead},
    {"parallel_tool_calls", Use::kRead}, {"response_format", Use::kRead}, {"grammar", Use::kRead}, {"functions", Use::kUnlessOff},
    {"function_call", Use::kUnlessOff}, {"store", Use::kUnlessOff}, {"metadata", Use::kUnlessOff},
    {"guided_json", Use::kUnsupported}, {"guided_regex", Use::kUnsupported}, {"guided_choice", Use::kUnsupported},
    {"guided_grammar", Use::kUnsupported}, {"use_beam_search", Use::kUnlessOff}, {"length_penalty", Use::kUnsupported},
    {"prompt_logprobs", Use::kUnlessOff}, {"skip_special_tokens", Use::kUnsupported},
    {"spaces_between_special_tokens", Use::kUnsupported}, {"include_stop_str_in_output", Use::kUnlessOff},
    {"chat_template", Use::kUnsupported}, {"chat_template_kwargs", Use::kRead},
    {"add_generation_prompt", Use::kUnsupported}, {"continue_final_message", Use::kUnsupported},
    {"reasoning_effort", Use::kRead}, {"modalities", Use::kUnsupported}, {"audio", Use::kUnsupported},
    {"prediction", Use::kUnsupported}, {"web_search_options", Use::kUnsupported}, {"service_tier", Use::kUnsupported},
};

bool OffValue(const std::string& key, const json& v) {
  return v.is_null() || v == false || (v.is_number_integer() && v == 0 && key != "logprobs") ||
         ((v.is_object() || v.is_array()) && v.empty()) || (v.is_string() && v.get<std::string>().empty()) ||
         (key == "response_format" && v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text") ||
         (key == "tool_choice" && v == "none");
}

// Refuses fields this server does not know or does not implement (see kFields).
bool CheckFields(const json& body, ApiError* err) {
  for (const auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const FieldRule& r : kFields)
      if (key == r.name) rule = &r;
    if (!rule) {
      *err = {400, "Unrecognized request argument supplied: " + key, "invalid_request_error", key, "unsupported_parameter"};
      return false;
    }
    if (rule->use == Use::kUnsupported || (rule->use == Use::kUnlessOff && !OffValue(key, value))) {
      *err = {400, "'" + key + "' is not supported by this server", "invalid_request_error", key, "unsupported_parameter"};
      return false;
    }
  }
  return true;
}

bool ParsePrompt(const json& body, CompletionRequest* out, ApiError* err) {
  if (!body.contains("prompt")) {
    *err = {400, "'prompt' is required", "invalid_request_error", "prompt", "missing"};
    return false;
  }
  const json& pr = body["prompt"];
  if (pr.is_string()) {
    out->prompt_text = pr.get<std::string>();
  } else if (IsTokenIdList(pr)) {
    out->prompt_ids = pr.get<std::vector<int32_t>>();
    out->prompt_is_ids = true;
  } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
    out->prompt_text = pr[0].get<std::string>();
  } else {
    *err = {400, "'prompt' must be a string or a list of token ids", "invalid_request_error", "prompt", "invalid_type"};
    return false;
  }
  return true;
}

// min_p, min_tokens and the penalties (sampling/sampler.h says what each does), with OpenAI's
// and vLLM's ranges.
bool ParsePenalties(const json& body, CompletionRequest* p, ApiError* err) {
  sampling::SamplingParams& sp = p->params.sampling;
  if (!Field(body, "min_p", &sp.min_p, err) || !Field(body, "presence_penalty", &sp.presence_penalty, err) ||
      !Field(body, "frequency_penalty", &sp.frequency_penalty, err) || !Field(body, "repetition_penalty", &sp.repetition_penalty, err) ||
      !Field(body, "min_tokens", &p->params.min_tokens, err))
    return false;
  auto bad = [&](const char* name, const std::string& range) {
    *err = {400, std::string("'") + name + "' must be in " + range, "invalid_request_error", name, "invalid_value"};
    return false;
  };
  if (!(sp.min_p >= 0 && sp.min_p <= 1)) return bad("min_p", "[0, 1]");
  if (!(sp.presence_penalty >= -2 && sp.presence_penalty <= 2)) return bad("presence_penalty", "[-2, 2]");
  if (!(sp.frequency_penalty >= -2 && sp.frequency_penalty <= 2)) return bad("frequency_penalty", "[-2, 2]");
  if (!(sp.repetition_penalty > 0 && sp.repetition_penalty <= 100)) return bad("repetition_penalty", "(0, 100]");
  if (p->params.min_tokens < 0 || p->params.min_tokens > p->params.max_tokens) return bad("min_tokens", "[0, max_tokens]");
  // logit_bias: {"token id": bias in [-100, 100]}, at most 300 entries (OpenAI's bounds).
  if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
    const json& lb = body["logit_bias"];
    if (!lb.is_object() || lb.size() > 300) return bad("logit_bias", "an object of at most 300 \"token id\": bias entries");
    for (auto it = lb.begin(); it != lb.end(); ++it) {
      int32_t id = -1;
      const std::string& k = it.key();
      const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), id);
      if (ec != std::errc() || end != k.data() + k.size() || id < 0) return bad("logit_bias", "keys that are token ids");
      if (!it.value().is_number() || !(it.value().get<double>() >= -100 && it.value().get<double>() <= 100))
        return bad("logit_bias", "biases in [-100, 100]");
      p->params.logit_bias.emplace_back(id, it.value().get<float>());
    }
  }
  return true;
}

inline constexpr size_t kMaxStopTokenIds = 256;

// The ids that end a completion: the model's end-of-text and end-of-turn tokens (unless
// ignore_eos) and the request's stop_token_ids.
bool ParseStopIds(const json& body, const CompletionLimits& limits, CompletionRequest* p, ApiError* err) {
  bool ignore_eos = false;
  if (!Field(body, "ignore_eos", &ignore_eos, err)) return false;
  p->params.stop_ids = ignore_eos ? std::vector<int32_t>{} : limits.stop_ids;
  if (!body.contains("stop_token_ids") || body["stop_token_ids"].is_null()) return true;
  const json& ids = body["stop_token_ids"];
  if (!ids.is_array() || ids.size() > kMaxStopTokenIds ||
      !std::all_of(ids.begin(), ids.end(), [](const json& x) { return IntegerFits<int32_t, json>(x) && x.get<int64_t>() >= 0; })) {
    *err = {400, "'stop_token_ids' must be a list of at most " + std::to_string(kMaxStopTokenIds) + " token ids",
            "invalid_request_error", "stop_token_ids", "invalid_type"};
    return false;
  }
  for (const json& x : ids) p->params.stop_ids.push_back(x.get<int32_t>());
  return true;
}

// 'model', when given, must name the model this server serves (404 otherwise, as OpenAI).
bool CheckModel(const json& body, const CompletionLimits& limits, ApiError* err) {
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) {
      *err = {400, "'model' must be a string", "invalid_request_error", "model", "invalid_type"};
      return false;
    }
    if (body["model"].get<std::string>() != limits.model_name) {
      *err = {404, "The model '" + body["model"].get<std::string>() + "' does not exist; this server serves '" + limits.model_name + "'",
              "invalid_request_error", "model", "model_not_found"};
      return false;
    }
  }
  return true;
}

// max_tokens (or its newer name max_completion_tokens, which wins), the server's default when
// neither is given.
bool ParseMaxTokens(const json& body, const CompletionLimits& limits, CompletionRequest* p, ApiError* err) {
  int max_tokens = limits.default_max_tokens;
  if (!Field(body, "max_tokens", &max_tokens, err)) return false;
  if (!Field(body, "max_completion_tokens", &max_tokens, err)) return false;
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  p->default_max_tokens = !given("max_tokens") && !given("max_completion_tokens");
  if (max_tokens < 1) {
    *err = {400, "'max_tokens' must be at least 1", "invalid_request_error", "max_tokens", "invalid_value"};
    return false;
  }
  p->params.max_tokens = max_tokens;
  return true;
}

// temperature, top_p, top_k, seed, n, best_of (and stream and return_token_ids, read in the
// same pass), with their ranges.
bool ParseSampling(const json& body, CompletionRequest* p, ApiError* err) {
  float temperature = 1.0f, top_p = 1.0f;
  int top_k = 0, n = 1, best_of = 0;
  // No seed means a fresh one (OpenAI's meaning); a seed makes sampling reproducible.
  int64_t seed = static_cast<int64_t>(std::random_device{}() >> 1);
  if (!Field(body, "temperature", &temperature, err) || !Field(body, "top_p", &top_p, err) ||
      !Field(body, "top_k", &top_k, err) || !Field(body, "seed", &seed, err) || !Field(body, "n", &n, err) || !Field(body, "best_of", &best_of, err) ||
      !Field(body, "stream", &p->stream, err) || !Field(body, "return_token_ids", &p->return_token_ids, err))
    return false;
  if (temperature < 0 || temperature > 2 || top_p <= 0 || top_p > 1) {
    *err = {400, "'temperature' must be in [0, 2] and 'top_p' in (0, 1]", "invalid_request_error", "temperature", "invalid_value"};
    return false;
  }
  if (n < 1 || n > kMaxChoices) {
    *err = {400, "'n' must be in [1, " + std::to_string(kMaxChoices) + "]", "invalid_request_error", "n", "invalid_value"};
    return false;
  }
  p->n = n;
  // best_of: that many samples, the n with the highest cumulative log-probability returned.
  if (best_of == 0) best_of = n;
  if (best_of < n || best_of > kMaxChoices) {
    *err = {400, "'best_of' must be in [n, " + std::to_string(kMaxChoices) + "]", "invalid_request_error", "best_of", "invalid_value"};
    return false;
  }
  if (best_of > n && p->stream) {
    *err = {400, "'best_of' greater than 'n' cannot be streamed (the best are known only at the end)", "invalid_request_error",
            "best_of", "invalid_value"};
    return false;
  }
  p->best_of = best_of;
  p->params.sampling = {temperature, top_k, top_p, static_cast<uint64_t>(seed)};
  return true;
}

// 'stop': a string or a list of strings, bounded in count and bytes by the server's limits.
bool ParseStopStrings(const json& body, const CompletionLimits& limits, CompletionRequest* p, ApiError* err) {
  if (!body.contains("stop") || body["stop"].is_null()) return true;
  const json& s = body["stop"];
  if (s.is_string()) {
    p->stop_strings.push_back(s.get<std::string>());
  } else if (s.is_array() && static_cast<int64_t>(s.size()) <= limits.max_stop_strings &&
             std::all_of(s.begin(), s.end(), [](const json& x) { return x.is_string(); })) {
    for (const auto& x : s) p->stop_strings.push_back(x.get<std::string>());
  } else {
    *err = {400, "'stop' must be a string or a list of up to " + std::to_string(limits.max_stop_strings) + " strings",
            "invalid_request_error", "stop", "invalid_type"};
    return false;
  }
  for (const std::string& stop : p->stop_strings)
    if (stop.size() > limits.max_stop_bytes) {
      *err = {400, "a stop string has " + std::to_string(stop.size()) + " bytes; the limit is " + std::to_string(limits.max_stop_bytes) +
                       " (--max-stop-bytes)", "invalid_request_error", "stop", "invalid_value"};
      return false;
    }
  return true;
}

// stream_options (only include_usage) and cache_salt.
bool ParseStreamOptionsAndSalt(const json& body, CompletionRequest* p, ApiError* err) {
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) {
      *err = {400, "'stream_options' must be an object", "invalid_request_error", "stream_options", "invalid_type"};
      return false;
    }
    if (!Field(body["stream_options"], "include_usage", &p->include_usage, err)) return false;
  }
  if (body.contains("cache_salt") && !body["cache_salt"].is_null()) {
    if (!body["cache_salt"].is_string() || body["cache_salt"].get<std::string>().empty()) {
      *err = {400, "'cache_salt' must be a non-empty string", "invalid_request_error", "cache_salt", "invalid_type"};
      return false;
    }
    p->params.cache_salt = body["cache_salt"].get<std::string>();
  }
  return true;
}

}  // namespace

std::optional<std::pair<int32_t, float>> ParseLogitBiasSpec(const std::string& spec) {
  const size_t at = spec.find_first_of("+-", 1);
  if (at == std::string::npos) return std::nullopt;
  int32_t id = -1;
  const auto [end, ec] = std::from_chars(spec.data(), spec.data() + at, id);
  char* bias_end = nullptr;
  const double bias = std::strtod(spec.c_str() + at, &bias_end);
  if (ec != std::errc() || end != spec.data() + at || id < 0 || *bias_end != '\0' || !(bias >= -100 && bias <= 100))
    return std::nullopt;
  return std::pair{id, static_cast<float>(bias)};
}

std::vector<int> BestOf(const std::vector<double>& cumulative_logprobs, int n) {
  std::vector<int> order(cumulative_logprobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return cumulative_logprobs[a] > cumulative_logprobs[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max(n, 0))));
  return order;
}

bool ParseCompletionRequest(const json& body, bool chat, const CompletionLimits& limits, CompletionRequest* p,
                            ApiError* err) {
  *p = {};
  p->chat = chat;
  if (!body.is_object()) {
    *err = {400, "the request body must be a JSON object"};
    return false;
  }
  if (!CheckFields(body, err) || !CheckModel(body, limits, err) || !ParseMaxTokens(body, limits, p, err) ||
      !ParseSampling(body, p, err) || !ParsePenalties(body, p, err) || !ParseStopStrings(body, limits, p, err) ||
      !ParseStreamOptionsAndSalt(body, p, err) || !ParseStopIds(body, limits, p, err))
    return false;
  p->allow_special_in_content = limits.allow_special_in_content;
  if (!ParseOutputFields(body, p, err)) return false;
  return chat ? ParseChatFields(body, p, err) : ParsePrompt(body, p, err);
}

bool CheckRequestSize(const CompletionRequest& r, const CompletionLimits& limits, ApiError* err) {
  const int64_t total = static_cast<int64_t>(r.params.prompt.size()) + int64_t{r.best_of} * r.params.max_tokens;
  if (total <= limits.max_total_tokens) return true;
  *err = {400, "the request asks for " + std::to_string(total) + " tokens (prompt " + std::to_string(r.params.prompt.size()) + " + " +
                   std::to_string(r.best_of) + " x max_tokens " + std::to_string(r.params.max_tokens) + "); the limit is " +
                   std::to_string(limits.max_total_tokens) + " per request (--max-total-tokens)",
          "invalid_request_error", "max_tokens", "request_too_large"};
  return false;
}

bool BuildPrompt(CompletionRequest& r, const tokenizer::Tokenizer& tok,
                 const std::optional<tokenizer::ChatTemplate>& chat_format, std::vector<int32_t>* ids, ApiError* err,
                 std::string* rendered) {
  if (r.chat) {
    if (!chat_format) {
      *err = {400, "this model has no chat template; use /v1/completions", "invalid_request_error", "messages", "unsupported"};
      return false;
    }
    CallsIntoContent(chat_format->source(), &r.chat_vars);
    nlohmann::ordered_json vars = r.chat_vars;
    vars["add_generation_prompt"] = true;
    auto text = chat_format->Render(std::move(vars));
    if (!text.ok()) {  // the template's own refusal ("TemplateError: ..."), a 400 naming it
      *err = {400, "the chat template refused the request: " + text.status().message(), "invalid_request_error", "messages",
              "invalid_value"};
      return false;
    }
    const std::vector<tokenizer::TextRange> contents = tokenizer::LocateContents(*text, r.literal_texts);
    *ids = r.allow_special_in_content ? tok.Encode(*text) : tok.Encode(*text, /*add_special=*/false, contents);
    if (rendered) *rendered = std::move(*text);
    return true;
  }
  *ids = r.prompt_is_ids ? r.prompt_ids : tok.Encode(r.prompt_text, /*add_special=*/true);
  return true;
}

}  // namespace radixlm::serve
