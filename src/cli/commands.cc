#include "cli/commands.h"
#include "models/describe.h"

#include "core/json_text.h"

#include <sys/resource.h>

#include <memory>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cache/block_pool.h"
#include "cli/common.h"
#include "cli/engine_setup.h"
#include "core/progress.h"
#include "runner/speculate_bench.h"
#include "core/cpu_features.h"
#include "core/random.h"
#include "engine/batch_runner.h"
#include "engine/engine.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "models/kv_store.h"
#include "models/roofline.h"
#include "runner/benchmarks.h"
#include "runner/ceilings.h"
#include "runner/generator.h"
#include "runner/model_executor.h"
#include "runner/scoring.h"
#include "tokenizer/chat_template.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

double PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}


}  // namespace

// info's line on the recurrent layers, from RecurrentJson.
void PrintRecurrentLine(const json& r, const models::ModelConfig& c) {
  char kind[160];
  if (r["kind"] == "short_conv")
    std::snprintf(kind, sizeof kind, "gated short convolution layers over %d channels", c.d_model);
  else if (r["kind"] == "gated_deltanet")
    std::snprintf(kind, sizeof kind, "Gated DeltaNet layers: %d key / %d value heads x %d (%s)", c.gdn_k_heads,
                  c.gdn_v_heads, c.gdn_head_dim, c.gdn_tiled ? "tiled" : "grouped");
  else
    std::snprintf(kind, sizeof kind, "Mamba2 layers: %d heads x %d, d_state %d, %d groups", c.ssm_heads, c.ssm_head_dim,
                  c.ssm_state, c.ssm_groups);
  std::printf("  %d %s, d_conv %d; %d %sattention layers%s; state %.2f MiB per sequence (= %lld tokens of KV)\n",
              c.n_ssm_layers(), kind, r["d_conv"].get<int>(), c.n_attention_layers(), c.attn_output_gate ? "gated " : "",
              c.use_rope ? "" : " (no positional embedding)", r["state_bytes_per_sequence"].get<int64_t>() / 1048576.0,
              static_cast<long long>(r["state_as_kv_tokens"].get<int64_t>()));
}

// info's line on the experts, from ExpertsJson.
void PrintExpertsLine(const json& e, const json& info) {
  std::string shared = "no shared expert";
  if (e["shared_ffn"].get<int>() > 0)
    shared = "shared expert of " + std::to_string(e["shared_ffn"].get<int>()) + (e["shared_gate"].get<bool>() ? " (sigmoid-gated)" : "");
  std::printf("  experts: %d layers x %d of MLP %d (%s), %d used per token, router %s%s%s%s; %s\n", e["layers"].get<int>(),
              e["experts"].get<int>(), e["ffn"].get<int>(), e["expert_type"].get<std::string>().c_str(), e["used"].get<int>(),
              e["gating"].get<std::string>().c_str(), e["selection_bias"].get<bool>() ? " + selection bias" : "",
              e["norm_weights"].get<bool>() ? ", renormalised" : "",
              e["groups"].get<int>() > 1 ? (", " + std::to_string(e["groups_used"].get<int>()) + " of " +
                                            std::to_string(e["groups"].get<int>()) + " groups").c_str() : "",
              shared.c_str());
  std::printf("  %.2fB parameters, %.2fB active per token; experts %.1f MiB, %.1f MiB read per decode token\n",
              info["total_parameters"].get<int64_t>() / 1e9, info["active_parameters"].get<int64_t>() / 1e9,
              e["expert_bytes"].get<size_t>() / 1048576.0, e["active_expert_bytes_per_token"].get<size_t>() / 1048576.0);
}

// info's line on sliding-window attention, from WindowsJson.
// Gemma 4: head shapes by kind, shared-KV layers, per-layer inputs.
void PrintLayerShapesLine(const json& s) {
  std::string line = "  layer shapes:";
  for (const char* kind : {"sliding", "full"})
    if (s.contains(kind))
      line += std::string(" ") + kind + " " + std::to_string(s[kind]["kv_heads"].get<int>()) + " kv x " +
              std::to_string(s[kind]["head_dim"].get<int>()) + ";";
  line += " " + std::to_string(s["shared_kv_layers"].get<int>()) + " layers read an earlier layer's KV";
  if (s["per_layer_input"].get<int>() > 0) line += "; per-layer inputs of " + std::to_string(s["per_layer_input"].get<int>());
  std::printf("%s\n", line.c_str());
}

void PrintWindowsLine(const json& w) {
  std::printf("  sliding window %d on %d of %d attention layers (RoPE theta %g there%s); KV per token %.1f KiB full + "
              "%.1f KiB sliding\n",
              w["window"].get<int>(), w["sliding_layers"].get<int>(), w["sliding_layers"].get<int>() + w["full_layers"].get<int>(),
              w["rope_theta_sliding"].get<double>(), w["sinks"].get<bool>() ? ", attention sinks" : "",
              w["kv_bytes_per_token_full_layers"].get<int64_t>() / 1024.0,
              w["kv_bytes_per_token_sliding_layers"].get<int64_t>() / 1024.0);
  std::printf("  a 32K sequence keeps %.1f MiB of KV with window rings (the sliding layers' ring: %d tokens, %.1f MiB "
              "a sequence or checkpoint), %.1f MiB paged whole (--swa-cache full), %.1f MiB at the window bound\n",
              w["kv_bytes_per_sequence_32k_window_rings"].get<int64_t>() / 1048576.0, w["window_ring_tokens"].get<int>(),
              w["window_ring_bytes"].get<int64_t>() / 1048576.0,
              w["kv_bytes_per_sequence_32k"].get<int64_t>() / 1048576.0,
              w["kv_bytes_per_sequence_32k_window_bound"].get<int64_t>() / 1048576.0);
}

void RegisterInfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "describe a model: architecture, sizes, dtype, layer kinds");
  auto o = std::make_shared<ModelOptions>();
  auto as_json = std::make_shared<bool>(false);
  AddModelOptions(cmd, o.get(), /*positional_model=*/true);
  cmd->add_flag("--json", *as_json, "print one JSON object");
  cmd->callback([o, as_json] {
    auto m = LoadFromOptions(*o);
    ExitIfError(m.status());
    const json j = models::ModelInfoJson(**m, o->kv_dtype);
    if (*as_json) {
      std::printf("%s\n", core::JsonText(j).c_str());
      return;
    }
    std::printf("%s: %s, %.1fM parameters, weights %s (%.1f MiB packed)\n", j["name"].get<std::string>().c_str(),
                j["architecture"].get<std::string>().c_str(), j["parameters"].get<int64_t>() / 1e6,
                j["weight_type"].get<std::string>().c_str(), j["weights_bytes"].get<size_t>() / 1048576.0);
    std::printf("  matmul: %s; KV cache %s\n", j["matmul"].get<std::string>().c_str(), o->kv_dtype.c_str());
    const auto& c = (*m)->config();
    char rope[96] = "no RoPE";
    if (c.use_rope)
      std::snprintf(rope, sizeof rope, "RoPE theta %g (%s%s)", c.rope_theta, j["rope_layout"].get<std::string>().c_str(),
                    c.rope_sections.empty() ? "" : ", interleaved sections");
    if (c.use_rope && c.rope_dim > 0 && c.rope_dim < c.head_dim)
      std::snprintf(rope + std::strlen(rope), sizeof rope - std::strlen(rope), " on %d of %d dims", c.rope_dim, c.head_dim);
    const std::string mlp = c.ffn_dim > 0 ? "MLP " + std::to_string(c.ffn_dim) + ", " : "";
    std::printf("  vocab %lld, d_model %d, %d blocks, %d q / %d kv heads x %d, %s%s%s%s%s\n",
                static_cast<long long>(c.vocab_size), c.d_model, c.n_blocks, c.n_heads, c.n_kv_heads, c.head_dim,
                mlp.c_str(), rope, c.qk_norm ? ", q/k norm" : "", c.qkv_bias ? ", qkv bias" : "",
                c.tied_embeddings ? ", tied embeddings" : "");
    if (c.n_ssm_layers() > 0) PrintRecurrentLine(j["ssm"], c);
    if (!j["experts"].is_null()) PrintExpertsLine(j["experts"], j);
    if (!j["sliding_window"].is_null()) PrintWindowsLine(j["sliding_window"]);
    if (!j["layer_shapes"].is_null()) PrintLayerShapesLine(j["layer_shapes"]);
  });
}

// `generate --n N`: parallel sampling through the serving engine, run as one prefix group of a
// batch job (engine/batch_runner.h): a prompt-only request puts the prompt in the radix cache;
// the n samples then find it there, share its blocks and decode as one cascade group.
void GenerateSamples(models::Transformer& model, core::ThreadPool& pool, const tokenizer::Tokenizer* tok,
                     const std::vector<int32_t>& prompt, const runner::GenerateOptions& gen, int n, core::DType kv_dtype,
                     bool json_out) {
  EngineOptions eo;
  const int64_t per_sample = (gen.max_tokens + eo.block_tokens) / eo.block_tokens * eo.block_tokens;
  eo.kv_tokens = std::max<int64_t>(eo.kv_tokens, static_cast<int64_t>(prompt.size()) + eo.block_tokens + n * per_sample);
  eo.max_running = std::max(eo.max_running, n);
  const auto serving = MakeServingEngineOrExit(model, pool, eo, kv_dtype);
  engine::Engine& eng = serving->engine();
  std::vector<engine::RequestParams> items(n);
  for (int i = 0; i < n; ++i) {
    items[i].prompt = prompt;
    items[i].max_tokens = gen.max_tokens;
    items[i].stop_ids = gen.stop_ids;
    items[i].sampling = gen.sampling;
    items[i].sampling.seed = gen.sampling.seed + static_cast<uint64_t>(i);
  }
  // One prefix group, as a batch job runs it: the prompt but its last token (each sample's own,
  // for its first logits) computed once, then the samples together.
  scheduler::PrefixGroup group{static_cast<int64_t>(prompt.size()) - 1, {}};
  for (int i = 0; i < n; ++i) group.members.push_back(i);
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<engine::TokenEvent> last(n);
  const auto t0 = std::chrono::steady_clock::now();
  engine::RunBatchGroups(eng, items, std::span(&group, 1), {}, [&](int64_t i, const engine::TokenEvent& ev) {
    if (ev.token >= 0) tokens[i].push_back(ev.token);
    if (ev.finish != engine::FinishReason::kNone) last[i] = ev;
    return true;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const engine::EngineMetrics m = eng.Metrics();
  int64_t generated = 0;
  json choices = json::array();
  for (int i = 0; i < n; ++i) {
    if (last[i].finish == engine::FinishReason::kError) ExitIfError(core::Status(core::StatusCode::kInternal, last[i].error));
    generated += static_cast<int64_t>(tokens[i].size());
    json c = {{"index", i}, {"tokens", tokens[i]}, {"finish_reason", engine::FinishReasonName(last[i].finish)}};
    if (tok) c["text"] = tok->Decode(tokens[i], /*skip_special=*/false);
    choices.push_back(std::move(c));
  }
  if (json_out) {
    const json j = {{"prompt_tokens", prompt.size()}, {"prompt_tokens_computed", m.prompt_tokens - m.cached_prompt_tokens},
                    {"choices", choices}, {"completion_tokens", generated}, {"tokens_per_s", generated / seconds}};
    std::printf("%s\n", core::JsonText(j).c_str());
    return;
  }
  std::printf("prompt: %zu tokens (computed once); %d samples:\n", prompt.size(), n);
  for (const json& c : choices) {
    std::printf("[%d] ", c["index"].get<int>());
    if (tok) {
      std::printf("%s\n", c["text"].get<std::string>().c_str());
    } else {
      for (int32_t t : c["tokens"]) std::printf("%d ", t);
      std::printf("\n");
    }
  }
  std::printf("%lld tokens in %.2f s (%.1f tok/s over the %d samples)\n", static_cast<long long>(generated), seconds,
              generated / seconds, n);
}

// `generate --speculate`: one request through the serving engine with drafts.
void GenerateSpeculative(models::Transformer& model, core::ThreadPool& pool, const tokenizer::Tokenizer* tok,
                         const std::vector<int32_t>& prompt, const runner::GenerateOptions& gen, const EngineOptions& eo,
                         core::DType kv_dtype, bool json_out) {
  std::unique_ptr<tokenizer::StreamDecoder> stream;
  if (tok) stream = std::make_unique<tokenizer::StreamDecoder>(*tok);
  if (!json_out) std::printf("prompt: %zu tokens; generated:%s", prompt.size(), tok ? "\n" : "");
  std::string text;
  auto run = runner::RunSpeculative(model, pool, prompt, gen, eo, kv_dtype, [&](int32_t id) {
    if (stream) {
      const std::string piece = stream->Push(id);
      text += piece;
      if (!json_out) std::printf("%s", piece.c_str());
    } else if (!json_out) {
      std::printf(" %d", id);
    }
    std::fflush(stdout);
  });
  ExitIfError(run.status());
  const runner::SpeculativeRun& r = *run;
  if (stream) text += stream->Finish();
  const double decode_tps = r.decode_seconds > 0 ? (r.tokens.size() - 1) / r.decode_seconds : 0;
  const double per_step = r.decode_steps > 0 ? double(r.tokens.size() - 1) / r.decode_steps : 0;
  if (json_out) {
    json j = {{"prompt_tokens", prompt.size()}, {"tokens", r.tokens}, {"prefill_seconds", r.prefill_seconds},
              {"decode_tokens_per_s", decode_tps}, {"stopped", r.stopped}, {"speculate", eo.speculate},
              {"tokens_per_step", per_step}, {"drafted", r.drafted}, {"accepted", r.accepted},
              {"acceptance_rate", r.drafted ? double(r.accepted) / r.drafted : 0.0}, {"by_origin", r.by_origin}};
    if (tok) j["text"] = text;
    std::printf("%s\n", core::JsonText(j).c_str());
  } else {
    std::printf("\n%zu tokens; prefill %.1f ms, decode %.1f tok/s%s; %.2f tokens per step, %lld of %lld draft tokens accepted\n",
                r.tokens.size(), r.prefill_seconds * 1e3, decode_tps, r.stopped ? ", ended on a stop token" : "", per_step,
                static_cast<long long>(r.accepted), static_cast<long long>(r.drafted));
  }
}

namespace {

struct GenerateCommandOptions {
  ModelOptions model;
  std::string ids = "1,2,3,4,5,6,7,8";
  runner::GenerateOptions gen;
  std::string stop, prompt;
  bool json_out = false, chat = false;
  int n = 1;
  EngineOptions engine;  // --speculate: through the serving engine
};

// The prompt: --prompt's text (as one chat turn with --chat) with the model's tokenizer, else --ids.
std::vector<int32_t> GeneratePrompt(const GenerateCommandOptions& o, int64_t vocab, std::unique_ptr<tokenizer::Tokenizer>* tok) {
  if (o.prompt.empty()) {
    auto ids = ParseIds(o.ids);
    ExitIfError(ids.status());
    return *ids;
  }
  auto t = LoadTokenizer(o.model, vocab);
  ExitIfError(t.status());
  *tok = std::move(t).value();
  std::string text = o.prompt;
  if (o.chat) {
    auto format = tokenizer::ChatTemplate::ForTokenizer(**tok);
    ExitIfError(format.status());
    const tokenizer::ChatMessage msg{"user", o.prompt};
    auto rendered = format->RenderMessages(std::span(&msg, 1), true);
    ExitIfError(rendered.status());
    text = *rendered;
  }
  return (*tok)->Encode(text, /*add_special=*/!o.chat);
}

// One sequence through the generator, streamed (text with a tokenizer, else ids).
void GenerateOne(models::Transformer& model, core::ThreadPool& pool, const tokenizer::Tokenizer* tok,
                 const std::vector<int32_t>& prompt, const GenerateCommandOptions& o) {
  runner::SequenceKv kv(model.config(), static_cast<int64_t>(prompt.size()) + o.gen.max_tokens, KvDtypeOf(o.model));
  runner::Generator gen(model, pool, kv.store, kv.pool);
  std::unique_ptr<tokenizer::StreamDecoder> stream;
  if (tok) stream = std::make_unique<tokenizer::StreamDecoder>(*tok);
  if (!o.json_out) std::printf("prompt: %zu tokens; generated:%s", prompt.size(), tok ? "\n" : "");
  std::string text;
  auto r = gen.Generate(prompt, o.gen, [&](int32_t id) {
    if (stream) {
      const std::string piece = stream->Push(id);
      text += piece;
      if (!o.json_out) std::printf("%s", piece.c_str());
    } else if (!o.json_out) {
      std::printf(" %d", id);
    }
    std::fflush(stdout);
    return true;
  });
  ExitIfError(r.status());
  if (stream) text += stream->Finish();
  const double decode_tps = r->decode_steps ? r->decode_steps / r->decode_seconds : 0;
  if (o.json_out) {
    json j = {{"prompt_tokens", prompt.size()}, {"tokens", r->tokens}, {"prefill_seconds", r->prefill_seconds},
              {"decode_tokens_per_s", decode_tps}, {"stopped", r->stopped}};
    if (tok) j["text"] = text;
    std::printf("%s\n", core::JsonText(j).c_str());
  } else {
    std::printf("\n%zu tokens; prefill %.1f ms (%.1f tok/s), decode %.1f tok/s%s\n", r->tokens.size(), r->prefill_seconds * 1e3,
                prompt.size() / r->prefill_seconds, decode_tps, r->stopped ? ", ended on a stop token" : "");
  }
}

void RunGenerate(GenerateCommandOptions& o) {
  auto m = LoadFromOptions(o.model);
  ExitIfError(m.status());
  auto& model = **m;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  const std::vector<int32_t> prompt = GeneratePrompt(o, model.config().vocab_size, &tok);
  if (!o.stop.empty()) {
    auto stop = ParseIds(o.stop);
    ExitIfError(stop.status());
    o.gen.stop_ids = *stop;
  } else if (model.config().eos_id >= 0) {
    o.gen.stop_ids = {model.config().eos_id};
  }
  core::ThreadPool pool(o.model.threads);
  if (o.n > 1) return GenerateSamples(model, pool, tok.get(), prompt, o.gen, o.n, KvDtypeOf(o.model), o.json_out);
  if (o.engine.speculate != "off") return GenerateSpeculative(model, pool, tok.get(), prompt, o.gen, o.engine, KvDtypeOf(o.model), o.json_out);
  GenerateOne(model, pool, tok.get(), prompt, o);
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto o = std::make_shared<GenerateCommandOptions>();
  o->gen.max_tokens = 32;
  auto* cmd = app.add_subcommand("generate", "generate tokens after a prompt of token ids");
  AddModelOptions(cmd, &o->model);
  cmd->add_option("--ids", o->ids, "prompt token ids, comma-separated")->capture_default_str();
  cmd->add_option("--prompt,-p", o->prompt, "prompt text (tokenized with the model's tokenizer); replaces --ids");
  cmd->add_flag("--chat", o->chat, "with --prompt: wrap it as one user turn in the model's chat template");
  AddTokenizerOptions(cmd, &o->model);
  cmd->add_option("--max-tokens,-n", o->gen.max_tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", o->gen.sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", o->gen.sampling.top_k, "0 = off");
  cmd->add_option("--top-p", o->gen.sampling.top_p, "1 = off");
  cmd->add_option("--seed", o->gen.sampling.seed, "sampling seed");
  cmd->add_option("--stop", o->stop, "stop token ids, comma-separated (default: the model's EOS)");
  AddChecked(cmd, "--n", o->n,
             "samples of the prompt (seeds seed .. seed + n - 1): the prompt is computed once and "
             "the samples decode as one cascade group",
             CLI::Range(1, 16));
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  AddSpeculateOptions(cmd, &o->engine);
  cmd->callback([o] { RunGenerate(*o); });
}

void RegisterLogits(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string ids, out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("logits", "write the logits of every position as little-endian f32 [n_tokens, vocab]");
  AddModelOptions(cmd, &o->model);
  cmd->add_option("--ids", o->ids, "token ids, comma-separated")->required();
  cmd->add_option("--out,-o", o->out, "output file")->required();
  cmd->callback([o] {
    auto ids = ParseIds(o->ids);
    ExitIfError(ids.status());
    auto m = LoadFromOptions(o->model);
    ExitIfError(m.status());
    core::ThreadPool pool(o->model.threads);
    runner::SequenceKv kv((*m)->config(), ids->size(), KvDtypeOf(o->model));
    runner::Generator gen(**m, pool, kv.store, kv.pool);
    auto logits = gen.AllLogits(*ids);
    ExitIfError(logits.status());
    std::ofstream f(o->out, std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits->data()), logits->size() * sizeof(float));
    if (!f) ExitIfError(core::IoError(o->out + ": write failed"));
  });
}

// Perplexity of a text file as train/train_kjv.py computes it: the text tokenised whole (no BOS),
// cut into windows of --ctx tokens, each window's tokens after its first scored from the logits
// of the window so far; exp(mean negative log-likelihood). (llama.cpp's tool differs: it adds
// BOS, scores each window's second half only and drops a last partial window.)
void RegisterPerplexity(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file;
    int64_t ctx = 0;
    bool json_out = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a model on a text file (windows of --ctx tokens)");
  AddModelOptions(cmd, &o->model, /*positional_model=*/true);
  AddTokenizerOptions(cmd, &o->model);
  cmd->add_option("--file,-f", o->file, "UTF-8 text")->required();
  cmd->add_option("--ctx", o->ctx, "tokens per window (default: the model's context, at most 512)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  cmd->callback([o] {
    std::ifstream in(o->file, std::ios::binary);
    if (!in) ExitIfError(core::NotFound(o->file + ": cannot open"));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const ModelAndTokenizer loaded = LoadModelAndTokenizerOrExit(o->model);
    const models::Transformer& model = *loaded.model;
    const int64_t ctx = o->ctx > 0 ? o->ctx : std::min<int64_t>(model.config().max_context, 512);
    if (ctx > model.config().max_context)
      ExitIfError(core::InvalidArgument("--ctx " + std::to_string(ctx) + " exceeds the model's context of " +
                                        std::to_string(model.config().max_context)));
    const std::vector<int32_t> ids = loaded.tokenizer->Encode(text);
    if (ids.size() < 2) ExitIfError(core::InvalidArgument(o->file + ": fewer than two tokens"));
    core::ThreadPool pool(o->model.threads);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t windows = (static_cast<int64_t>(ids.size()) - 1 + ctx - 1) / ctx;
    core::Progress progress("perplexity", windows);
    auto r = runner::Perplexity(*loaded.model, pool, ids, ctx, KvDtypeOf(o->model), [&](int64_t w) { progress.Update(w); });
    ExitIfError(r.status());
    progress.Done();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double ppl = r->perplexity;
    const int64_t scored = r->tokens_scored;
    if (o->json_out) {
      std::printf("%s\n", core::JsonText(json({{"perplexity", ppl}, {"tokens_scored", scored}, {"windows", windows}, {"ctx", ctx},
                                {"seconds", seconds}})).c_str());
    } else {
      std::printf("perplexity %.3f over %lld tokens of %s (%lld windows of %lld tokens, %.1f s)\n", ppl,
                  static_cast<long long>(scored), o->file.c_str(), static_cast<long long>(windows),
                  static_cast<long long>(ctx), seconds);
    }
  });
}

// Prefill of `batch` sequences = one shared prefix + a random suffix each, run as the scoring
// runner runs them: forwards filled up to max_batch_tokens *computed* rows (original rows when
// off, compact rows when compacted) and KV blocks of a forward's rows plus one per sequence;
namespace {

struct BenchOptions {
  ModelOptions model;
  int prompt_tokens = 512, gen_tokens = 64, repeats = 3;
  bool json_out = false;
  // Intra-batch prefix dedup sweep (RadixMLP): batch > 0 switches to it.
  int batch = 0, shared_prefix = 0, suffix = 64, max_batch_tokens = 8192;
  std::string compaction = "gather";
  // Cascade decode: decode_batch > 0 switches to it.
  int decode_batch = 0;
  std::string cascade = "on";
  // Speculative decoding: --speculate given switches to it (one prompt through the engine).
  EngineOptions engine;
  std::string prompt, prompt_file;
  sampling::SamplingParams sampling;
};

// A prompt for --speculate: the text given (or read), tokenised, else random ids.
std::vector<int32_t> SpeculatePrompt(const BenchOptions& o, int64_t vocab) {
  std::string text = o.prompt;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) ExitIfError(core::NotFound(o.prompt_file + ": cannot open"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<int32_t> prompt;
  if (!text.empty()) {
    auto tok = LoadTokenizer(o.model, vocab);
    ExitIfError(tok.status());
    return (*tok)->Encode(text, /*add_special=*/true);
  }
  core::Rng rng(11);
  for (int i = 0; i < o.prompt_tokens; ++i) prompt.push_back(static_cast<int32_t>(rng.Below(vocab)));
  return prompt;
}

// Prefill and decode throughput on a random prompt, against the ceilings measured in the same
// run (runner/ceilings.h) over the roofline's work (models/roofline.h), and where the time goes.
json TimeShares(const models::ForwardProfile& p) {
  const double t = std::max(p.total_s, 1e-12);
  return json{{"gemm", p.gemm_s / t}, {"ssm_scan", p.ssm_s / t}, {"attention", p.attention_s / t},
              {"other", std::max(0.0, 1 - (p.gemm_s + p.ssm_s + p.attention_s) / t)}};
}

json BenchJson(const models::Transformer& model, const BenchOptions& o, int threads, const runner::Ceilings& peak,
               double prefill_tps, double decode_tps, double load_s) {
  const auto& c = model.config();
  const double prefill_gflops = models::PrefillFlopsOf(c, o.prompt_tokens).total() / (o.prompt_tokens / prefill_tps) / 1e9;
  const double weight_gb = model.weights().nbytes() / 1e9;
  const double read_gb = models::DecodeBytesOf(model.weights(), c).read() / 1e9;
  return {{"model", c.name}, {"dtype", std::string(core::DTypeName(model.weight_dtype()))},
          {"weight_type", model.weights().TypeSummary()}, {"matmul", models::MatmulDescription(model)},
          {"kv_dtype", o.model.kv_dtype},
          {"threads", threads}, {"isa", core::IsaName(core::ActiveIsa())},
          {"prompt_tokens", o.prompt_tokens}, {"gen_tokens", o.gen_tokens},
          {"prefill_tokens_per_s", prefill_tps}, {"decode_tokens_per_s", decode_tps},
          {"prefill_gflops", prefill_gflops}, {"gemm_peak_gflops", peak.gemm_gflops},
          {"fma_peak_gflops", peak.fma_gflops},
          {"prefill_fraction_of_gemm_peak", peak.gemm_gflops > 0 ? prefill_gflops / peak.gemm_gflops : 0},
          {"prefill_fraction_of_fma_peak", peak.fma_gflops > 0 ? prefill_gflops / peak.fma_gflops : 0},
          {"bf16_dot_peak_gflops", peak.bf16_dot_gflops}, {"int8_dot_peak_gops", peak.int8_dot_gops},
          {"isa_peak_gflops", peak.isa_gflops},
          {"prefill_fraction_of_isa_peak", peak.isa_gflops > 0 ? prefill_gflops / peak.isa_gflops : 0},
          {"decode_weight_gb_per_s", read_gb * decode_tps}, {"weights_gb", weight_gb},
          {"decode_read_gb_per_token", read_gb}, {"read_bandwidth_gb_per_s", peak.read_gb_per_s},
          {"decode_fraction_of_bandwidth", peak.read_gb_per_s > 0 ? read_gb * decode_tps / peak.read_gb_per_s : 0},
          {"load_seconds", load_s}, {"peak_rss_mib", PeakRssMiB()}, {"repeats", o.repeats}};
}

json BenchThroughput(models::Transformer& model, core::ThreadPool& pool, const BenchOptions& o, double load_s) {
  const auto& c = model.config();
  const runner::Ceilings peak = runner::MeasureCeilings(model, pool, o.prompt_tokens);
  core::Rng rng(1);
  std::vector<int32_t> prompt(o.prompt_tokens);
  for (auto& id : prompt) id = static_cast<int32_t>(rng.Below(c.vocab_size));
  runner::SequenceKv kv(c, o.prompt_tokens + o.gen_tokens + 1, KvDtypeOf(o.model));
  runner::Generator gen(model, pool, kv.store, kv.pool);
  runner::GenerateOptions go;
  go.max_tokens = o.gen_tokens;
  go.prefill_chunk = o.prompt_tokens;
  std::vector<double> prefill, decode;
  for (int r = 0; r < o.repeats; ++r) {
    auto res = gen.Generate(prompt, go);
    ExitIfError(res.status());
    prefill.push_back(o.prompt_tokens / res->prefill_seconds);
    decode.push_back(res->decode_steps > 0 ? res->decode_steps / res->decode_seconds : 0);
  }
  const double prefill_tps = Median(prefill), decode_tps = Median(decode);
  json j = BenchJson(model, o, pool.size(), peak, prefill_tps, decode_tps, load_s);
  // Where the time goes: one profiled prefill (max_tokens 1) and one profiled full run.
  models::ForwardProfile p_prefill, p_all;
  runner::GenerateOptions prefill_only = go;
  prefill_only.max_tokens = 1;
  model.set_profile(&p_prefill);
  ExitIfError(gen.Generate(prompt, prefill_only).status());
  model.set_profile(&p_all);
  ExitIfError(gen.Generate(prompt, go).status());
  model.set_profile(nullptr);
  const models::ForwardProfile p_decode{p_all.total_s - p_prefill.total_s, p_all.gemm_s - p_prefill.gemm_s,
                                        p_all.ssm_s - p_prefill.ssm_s, p_all.attention_s - p_prefill.attention_s};
  j["prefill_time_share"] = TimeShares(p_prefill);
  // --gen-tokens 1 has no decode step: no share (the difference of two prefills is noise).
  j["decode_time_share"] = o.gen_tokens > 1 && p_decode.total_s > 0 ? TimeShares(p_decode) : json(nullptr);
  return j;
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "prefill and decode throughput, with the GEMM and FMA ceilings measured in the same run; "
                                          "with --batch, prefill of a batch sharing a prefix with compaction off or on");
  AddModelOptions(cmd, &o->model);
  cmd->add_option("--prompt-tokens", o->prompt_tokens)->capture_default_str();
  cmd->add_option("--gen-tokens", o->gen_tokens)->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs; medians are reported")->capture_default_str();
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  cmd->add_option("--batch", o->batch, "sequences per batch (enables the prefix-dedup benchmark)");
  cmd->add_option("--shared-prefix", o->shared_prefix, "tokens every sequence of the batch shares")->capture_default_str();
  cmd->add_option("--suffix", o->suffix, "tokens of each sequence after the shared prefix")->capture_default_str();
  cmd->add_option("--compaction", o->compaction,
                  "off | gather (position-wise work on the prefix trie, attention unfolded) | trie (attention on the trie too)")
      ->capture_default_str();
  AddChecked(cmd, "--max-batch-tokens", o->max_batch_tokens,
             "rows computed per forward (compact rows when compacted), also the KV pool of a forward", CLI::Range(1, 1 << 24));
  cmd->add_option("--decode-batch", o->decode_batch,
                  "concurrent requests decoding over a shared prefix (--shared-prefix, --suffix, --gen-tokens) through the engine")
      ->check(CLI::Range(1, 4096));
  AddChecked(cmd, "--cascade", o->cascade, "with --decode-batch: cascade attention on | off", CLI::IsMember({"on", "off"}));
  AddSpeculateOptions(cmd, &o->engine);
  CLI::Option* speculate = cmd->get_option("--speculate");
  cmd->add_option("--prompt,-p", o->prompt, "with --speculate: the prompt text (else --prompt-tokens random ids)");
  cmd->add_option("--prompt-file", o->prompt_file, "with --speculate: read the prompt text from this file");
  cmd->add_option("--temperature", o->sampling.temperature, "with --speculate: 0 = greedy")->capture_default_str();
  cmd->add_option("--seed", o->sampling.seed, "with --speculate and a temperature: run r samples with seed + r");
  AddTokenizerOptions(cmd, &o->model);
  cmd->callback([o, speculate] {
    const auto t_load = std::chrono::steady_clock::now();
    auto m = LoadFromOptions(o->model);
    ExitIfError(m.status());
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    models::Transformer& model = **m;
    core::ThreadPool pool(o->model.threads);
    if (speculate->count() > 0) {
      auto r = runner::BenchSpeculativeDecode(model, pool, SpeculatePrompt(*o, model.config().vocab_size), o->gen_tokens,
                                              o->sampling, o->engine, KvDtypeOf(o->model), o->repeats);
      ExitIfError(r.status());
      std::printf("%s\n", core::JsonText(*r, o->json_out ? -1 : 2).c_str());
      return;
    }
    json j;
    if (o->decode_batch > 0) {
      auto r = runner::BenchCascadeDecode(model, pool, o->decode_batch, o->shared_prefix, o->suffix, o->gen_tokens, o->cascade == "on",
                                          KvDtypeOf(o->model));
      ExitIfError(r.status());
      j = std::move(*r);
    } else if (o->batch > 0) {
      auto r = runner::BenchCompaction(model, pool, o->batch, o->shared_prefix, o->suffix, o->compaction, o->max_batch_tokens,
                                       o->repeats, KvDtypeOf(o->model));
      ExitIfError(r.status());
      j = std::move(*r);
    } else {
      j = BenchThroughput(model, pool, *o, load_s);
    }
    std::printf("%s\n", o->json_out ? core::JsonText(j).c_str() : core::JsonText(j, 2).c_str());
  });
}

void RegisterExport(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string format = "gguf", out, dtype = "f32";
  };
  auto o = std::make_shared<Opts>();
  o->model.model = "random:tiny";
  auto* cmd = app.add_subcommand("export", "write a random preset's weights as GGUF (with its tokenizer, so llama.cpp "
                                           "loads it) or a Hugging Face folder");
  cmd->add_option("--model,-m", o->model.model, "random:NAME")->capture_default_str();
  cmd->add_option("--format", o->format)->check(CLI::IsMember({"gguf", "hf"}))->capture_default_str();
  cmd->add_option("--dtype", o->dtype)->check(CLI::IsMember({"f32", "f16", "bf16"}))->capture_default_str();
  cmd->add_option("--out,-o", o->out, "file (gguf) or folder (hf)")->required();
  AddTokenizerOptions(cmd, &o->model);
  cmd->callback([o] {
    core::DType d;
    core::ParseDType(o->dtype, &d);
    // A GGUF carries its tokenizer (llama.cpp refuses a file without one); one that cannot be
    // written as GGUF metadata (SentencePiece) leaves the file loadable by radixlm only.
    std::vector<std::pair<std::string, formats::GgufValue>> metadata;
    if (o->format == "gguf") {
      auto config = models::LoadConfig(o->model.model);
      ExitIfError(config.status());
      auto tok = LoadTokenizer(o->model, config->vocab_size);
      auto kv = tok.ok() ? (*tok)->GgufMetadata(config->vocab_size) : decltype((*tok)->GgufMetadata(0))(tok.status());
      if (kv.ok()) metadata = std::move(*kv);
      else std::fprintf(stderr, "radixlm export: no tokenizer written: %s\n", kv.status().message().c_str());
    }
    ExitIfError(models::ExportModel(o->model.model, o->format == "gguf" ? models::ExportFormat::kGguf : models::ExportFormat::kHfFolder,
                                    o->out, d, metadata));
  });
}

}  // namespace radixlm::cli
