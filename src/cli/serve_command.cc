// radixlm serve: the OpenAI-compatible server on a real model with the radix prefix cache.
#include <memory>
#include <optional>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <cstdio>

#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "runner/hybrid_cache_setup.h"
#include "sim/model_shape.h"
#include "cli/common.h"
#include "engine/engine.h"
#include "models/kv_store.h"
#include "runner/model_executor.h"
#include "runner/scoring_queue.h"
#include "serve/kv_events_publisher.h"
#include "serve/server.h"
#include "serve/shutdown.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {
namespace {

// The key: --api-key, --api-key-file or RADIXLM_API_KEY; given but empty is an error (it would
// silently turn authentication off).
void ResolveApiKey(bool flag_given, const std::string& file, std::string* key) {
  const int sources = flag_given + !file.empty() + (std::getenv("RADIXLM_API_KEY") != nullptr);
  if (sources > 1) ExitIfError(core::InvalidArgument("give the API key one way: --api-key, --api-key-file or RADIXLM_API_KEY"));
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) ExitIfError(core::Status(core::StatusCode::kNotFound, "cannot read the API key file " + file));
    std::getline(f, *key);
    while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) key->pop_back();
  } else if (const char* env = std::getenv("RADIXLM_API_KEY")) {
    *key = env;
  }
  if (sources == 1 && key->empty())
    ExitIfError(core::InvalidArgument("the API key is empty (that would turn authentication off; omit it to serve without one)"));
}

// KV cache events: bound before serving (an endpoint in use is a start-up error).
std::unique_ptr<serve::KvEventsPublisher> StartKvEvents(serve::ServerConfig& sc, const std::string& seed, size_t buffer,
                                                        bool ssm, engine::Engine& eng) {
  if (sc.kv_events_endpoint.empty()) return nullptr;
  if (sc.kv_events_replay_endpoint.empty()) {
    auto replay = serve::DefaultReplayEndpoint(sc.kv_events_endpoint);
    ExitIfError(replay.status());
    sc.kv_events_replay_endpoint = *replay;
  }
  auto pub = serve::KvEventsPublisher::Start({.endpoint = sc.kv_events_endpoint,
                                              .replay_endpoint = sc.kv_events_replay_endpoint,
                                              .topic = sc.kv_events_topic,
                                              .block_size = eng.config().block_tokens,
                                              .buffer_batches = buffer});
  ExitIfError(pub.status());
  std::unique_ptr<serve::KvEventsPublisher> events = std::move(pub).value();
  ExitIfError(eng.PublishKvEvents(cache::BlockHasher(eng.config().block_tokens, seed),
                                  [p = events.get()](std::vector<cache::KvEvent> ev) { p->Publish(std::move(ev)); }, ssm));
  return events;
}

struct ServeOptions {
  ModelOptions model;
  EngineOptions engine;
  serve::ServerConfig server;
  std::string chat_template, embed_pooling = "last", api_key_file;
  double shutdown_timeout = 30;
  int64_t scoring_batch_tokens = 8192;
  double scoring_threshold = 0.92;
  std::string scoring_compaction = "trie";
  bool no_scoring = false;
  std::string kv_events_seed = "0";
  size_t kv_events_buffer = 10000;
  bool kv_events_ssm = false;
};

// The listener: address, key, drain, transport limits.
void AddHttpOptions(CLI::App* cmd, ServeOptions* o) {
  AddChecked(cmd, "--host", o->server.host,
             "address to listen on (0.0.0.0: every interface)",
             [](const std::string& h) { return h.empty() ? std::string("the address is empty (0.0.0.0 listens on every interface)") : std::string(); });
  AddChecked(cmd, "--port", o->server.port, "TCP port (0: any free port, printed)", CLI::Range(0, 65535));
  cmd->add_option("--model-name", o->server.model_name, "name clients use in 'model' (default: the model spec)");
  cmd->add_option("--api-key", o->server.api_key,
                  "require 'Authorization: Bearer KEY' (visible in ps: prefer --api-key-file or RADIXLM_API_KEY)");
  cmd->add_option("--api-key-file", o->api_key_file, "read the API key from this file (first line)");
  AddChecked(cmd, "--shutdown-timeout", o->shutdown_timeout,
             "seconds SIGTERM waits for requests in flight to finish before the process exits anyway", CLI::Range(0.0, 86400.0));
  AddChecked(cmd, "--max-concurrent", o->server.max_concurrent_requests,
             "concurrent requests before 429 (one worker thread each)", CLI::Range(1, 4096));
  AddChecked(cmd, "--max-body-bytes", o->server.max_body_bytes,
             "largest request body (after chunked decoding; 413 beyond)", CLI::Range(size_t{1024}, size_t{1} << 32));
  AddChecked(cmd, "--header-timeout", o->server.header_timeout_s,
             "seconds a request head may take to arrive, whole (408 beyond)", CLI::Range(0.1, 3600.0));
  AddChecked(cmd, "--body-timeout", o->server.body_timeout_s,
             "seconds a request body may take to arrive, whole (408 beyond)", CLI::Range(0.1, 3600.0));
  AddChecked(cmd, "--keep-alive-timeout", o->server.keep_alive_timeout_s,
             "seconds an idle connection stays open", CLI::Range(0.1, 3600.0));
  AddChecked(cmd, "--write-timeout", o->server.write_timeout_s,
             "seconds one response write may wait for a client that does not read", CLI::Range(0.1, 3600.0));
  AddChecked(cmd, "--max-connections", o->server.max_connections,
             "open connections at once (more: 503 and close)", CLI::Range(1, 65536));
}

// What a completion request gets: lengths, biases, stored responses, turn reuse, template.
void AddRequestOptions(CLI::App* cmd, ServeOptions* o) {
  cmd->add_option("--default-max-tokens", o->server.default_max_tokens)->capture_default_str();
  cmd->add_option_function<std::vector<std::string>>(
         "--logit-bias",
         [o](const std::vector<std::string>& specs) {
           for (const std::string& s : specs) {
             const auto bias = serve::ParseLogitBiasSpec(s);
             if (!bias) throw CLI::ValidationError("--logit-bias", "expected TOKEN_ID+BIAS or TOKEN_ID-BIAS, bias in [-100, 100]: " + s);
             o->server.logit_bias.push_back(*bias);
           }
         },
         "added to every request's logits (llama.cpp's option): TOKEN_ID+BIAS or TOKEN_ID-BIAS, repeatable")
      ->take_all();
  AddChecked(cmd, "--max-output-tokens", o->server.max_output_tokens,
             "cut every request's max_tokens to this (0: what the context leaves), as llama-server's --n-predict",
             CLI::NonNegativeNumber);
  cmd->add_option("--max-stored-responses", o->server.max_stored_responses,
                  "Responses API: stored responses kept for GET /v1/responses/{id} and previous_response_id (least "
                  "recently used dropped first)")
      ->capture_default_str();
  cmd->add_flag_function(
      "--no-turn-reuse", [o](int64_t) { o->server.turn_reuse = false; },
      "render every turn of a re-sent history with the chat template (default: a turn this server generated keeps the "
      "tokens it was generated as, so the prefix cache hits the whole history; docs/agents.md)");
  auto* store_mb = cmd->add_option_function<size_t>(
      "--response-store-mb", [o](size_t mb) { o->server.response_store_bytes = mb << 20; },
      "Responses API: MiB the stored responses may hold (tokens, texts; default 256)");
  store_mb->check(CLI::Range(size_t{0}, size_t{1} << 20));
  cmd->add_option("--chat-template", o->chat_template, "chatml|llama3|llama2 (default: the model's)");
  cmd->add_flag("--no-scoring", o->no_scoring, "disable /v1/embeddings, /embed and /rerank");
  cmd->add_flag("--allow-special-in-content", o->server.allow_special_in_content,
                "parse special-token strings (<|im_start|>, ...) in chat message content as special tokens (default: text, so "
                "users cannot forge turn boundaries)");
}

// Embeddings and rerank, request limits, KV cache events.
void AddScoringAndEventOptions(CLI::App* cmd, ServeOptions* o) {
  AddChecked(cmd, "--scoring-batch-tokens", o->scoring_batch_tokens,
             "embedding/rerank forwards: rows computed per forward (compact rows when compacted); also the longest input",
             CLI::Range(1, 1 << 24));
  cmd->add_option("--scoring-threshold", o->scoring_threshold,
                  "compact an embedding/rerank forward when compact/original rows < this (0 never, 1 always)")
      ->capture_default_str();
  AddChecked(cmd, "--scoring-compaction", o->scoring_compaction,
             "attention of compacted scoring forwards: trie | gather", CLI::IsMember({"trie", "gather"}));
  AddChecked(cmd, "--embed-pooling", o->embed_pooling,
             "last (end-of-text appended, Qwen3-Embedding) | mean", CLI::IsMember({"last", "mean"}));
  cmd->add_option("--embed-instruction", o->server.embed_query_instruction,
                  "embed every input as a query with this instruction (requests may pass their own)");
  cmd->add_option("--rerank-instruction", o->server.rerank_instruction)->capture_default_str();
  AddChecked(cmd, "--max-total-tokens", o->server.max_total_tokens,
             "tokens one completion request may ask for: prompt + best_of x max_tokens (more: 400)",
             CLI::Range(int64_t{1}, int64_t{1} << 32));
  AddChecked(cmd, "--max-stop-strings", o->server.max_stop_strings, "stop strings per request (more: 400)", CLI::Range(0, 1024));
  AddChecked(cmd, "--max-stop-bytes", o->server.max_stop_bytes,
             "bytes of one stop string (more: 400)", CLI::Range(size_t{1}, size_t{1} << 20));
  AddChecked(cmd, "--max-scoring-inputs", o->server.max_scoring_inputs,
             "inputs per embedding or rerank request (more: 413 / 400)", CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--kv-events", o->server.kv_events_endpoint,
                  "publish KV cache events in vLLM's format on this ZMQ endpoint (PUB, bound), e.g. tcp://127.0.0.1:5557");
  cmd->add_option("--kv-events-replay", o->server.kv_events_replay_endpoint,
                  "the events' replay endpoint (ZMQ ROUTER; default: the events' port + 1)");
  cmd->add_option("--kv-events-topic", o->server.kv_events_topic, "topic frame of every event message (llm-d: kv@POD@MODEL)");
  cmd->add_option("--kv-events-seed", o->kv_events_seed, "block-hash seed (vLLM: the PYTHONHASHSEED string)")->capture_default_str();
  AddChecked(cmd, "--kv-events-buffer", o->kv_events_buffer, "event batches kept for replay", CLI::Range(size_t{1}, size_t{10000000}));
  cmd->add_flag("--kv-events-ssm-checkpoints", o->kv_events_ssm,
                "hybrid models: also announce SSM checkpoint positions (SsmCheckpointStored / SsmCheckpointRemoved, an "
                "extension no router reads yet)");
}

// Loads the model, starts the engine, the scoring queue and the events, serves until a signal drains it.
void RunServe(ServeOptions& o, bool api_key_given) {
  ResolveApiKey(api_key_given, o.api_key_file, &o.server.api_key);
  o.model.kv_tokens = o.engine.kv_tokens;  // refused up front when it cannot fit
  const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o.model);
  auto& model = *loaded.model;
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;
  std::optional<tokenizer::ChatTemplate> format;
  if (auto f = tokenizer::ChatTemplate::ForTokenizer(tok, o.chat_template); f.ok()) format = std::move(*f);
  else if (!o.chat_template.empty()) ExitIfError(f.status());
  else std::fprintf(stderr, "radixlm: %s; /v1/chat/completions is disabled\n", f.status().message().c_str());
  core::ThreadPool pool(o.model.threads);
  const auto serving = MakeServingEngineOrExit(model, pool, o.engine, KvDtypeOf(o.model), &o.model, tok.vocab_size());
  engine::Engine& eng = serving->engine();
  if (o.server.model_name == "radixlm") o.server.model_name = o.model.model;
  o.server.stop_ids = EndOfTurnIds(tok);
  o.server.embed_pooling = o.embed_pooling == "last" ? engine::Pooling::kLastToken : engine::Pooling::kMean;
  const runner::ScoringConfig scoring_config{.max_batch_tokens = o.scoring_batch_tokens,
                                             .threshold = o.scoring_threshold,
                                             .trie_attention = o.scoring_compaction == "trie",
                                             .kv_dtype = KvDtypeOf(o.model)};
  // The runner (and its KV store for one forward) is made on the first scoring request.
  std::unique_ptr<runner::ScoringQueue> scoring;
  if (!o.no_scoring)
    scoring = std::make_unique<runner::ScoringQueue>(
        [&model, &pool, scoring_config] { return std::make_unique<runner::ScoringRunner>(model, pool, scoring_config); },
        std::min<int64_t>(o.scoring_batch_tokens, model.config().max_context));
  const std::unique_ptr<serve::KvEventsPublisher> kv_events =
      StartKvEvents(o.server, o.kv_events_seed, o.kv_events_buffer, o.kv_events_ssm, eng);
  serve::Server server(o.server, eng, tok, format, scoring.get());
  std::optional<serve::Drain> drain(std::in_place, [&server] { server.Stop(); }, o.shutdown_timeout);
  const core::StatusOr<int> bound = server.Bind();
  if (!bound.ok()) {
    drain.reset();
    ExitIfError(bound.status());
  }
  eng.Start();
  std::fprintf(stderr, "radixlm: serving %s on http://%s:%d (KV pool %d blocks x %d tokens = %.0f MiB, prefix cache %s)\n",
               o.server.model_name.c_str(), o.server.host.c_str(), *bound, eng.config().num_blocks,
               eng.config().block_tokens, serving->kv().nbytes() / 1048576.0, eng.config().prefix_cache ? "on" : "off");
  if (const tier::Tier* tiers = serving->tiers())
    for (const cache::TierReport& r : tiers->Reports())
      std::fprintf(stderr, "radixlm: %s tier %s: %lld blocks, %.2f of %.2f GB\n", r.medium.c_str(), r.path.c_str(),
                   static_cast<long long>(r.blocks), r.used_bytes / 1e9, r.capacity_bytes / 1e9);
  server.ListenAfterBind();
  drain.reset();
  eng.Stop();
}

}  // namespace

void RegisterServe(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (default model: the built-in random:qwen3-0.6b)");
  AddModelOptions(cmd, &o->model, /*positional_model=*/true);
  AddTokenizerOptions(cmd, &o->model);
  ChatServingDefaults(&o->engine);
  AddEngineOptions(cmd, &o->engine);
  AddHttpOptions(cmd, o.get());
  AddRequestOptions(cmd, o.get());
  AddScoringAndEventOptions(cmd, o.get());
  CLI::Option* api_key_opt = cmd->get_option("--api-key");
  cmd->callback([o, api_key_opt] { RunServe(*o, api_key_opt->count() > 0); });
}

}  // namespace radixlm::cli
