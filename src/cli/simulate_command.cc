// radixlm simulate: replays a request trace through the serving engine with a cost model in place
// of the model (sim/simulator.h: the engine's scheduler, memory and cache policies as served) and
// reports hit rates, FLOPs saved and modelled TTFT; or, with --generate, writes a synthetic
// workload trace.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "cache/marconi_reference.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "models/loader.h"
#include "runner/hybrid_cache_setup.h"
#include "sim/fleet.h"
#include "sim/model_shape.h"
#include "sim/report.h"
#include "sim/setup.h"
#include "sim/simulator.h"
#include "sim/workloads.h"

namespace radixlm::cli {
namespace {

using nlohmann::json;

struct SimulateOptions {
  std::string trace, generate, out, model = "marconi-7b", cache_size = "40GB";
  std::string csv, plot, ttft_table, layers;
  bool json_out = false, checkpoints_only = false;
  int threads = 2, block_tokens = 512;
  int64_t d_state = 0;
  int64_t max_output_tokens = sim::TraceLimits{}.max_output_tokens;
  sim::SetupOptions setup;  // the simulators' (sim/setup.h)
  sim::WorkloadOptions workload;
};

core::StatusOr<double> ParseBytes(const std::string& text) {
  size_t end = 0;
  double value;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    return core::InvalidArgument("cache size '" + text + "' is not a number with a unit");
  }
  std::string unit = text.substr(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::pair<const char*, double> units[] = {{"", 1},       {"B", 1},        {"KB", 1e3},
                                                  {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12},
                                                  {"KIB", 1024}, {"MIB", 1 << 20}, {"GIB", 1 << 30}};
  for (const auto& [name, scale] : units)
    if (unit == name && value > 0) return value * scale;
  return core::InvalidArgument("cache size '" + text + "': use a positive number and B, KB, MB, GB, KiB, MiB or GiB");
}

// --generate KIND --out FILE: the workload's trace, written.
core::Status WriteWorkload(const SimulateOptions& o) {
  std::ofstream out(o.out);
  if (!out) return core::InvalidArgument("cannot write " + o.out);
  int64_t n = 0;
  RADIXLM_RETURN_IF_ERROR(sim::GenerateWorkload(o.workload, [&](const sim::TraceRequest& r) {
    sim::WriteMarconiLine(out, r);
    ++n;
  }));
  std::cerr << "wrote " << n << " requests to " << o.out << "\n";
  return core::Status::Ok();
}

// The modelled shape: a named shape or a model the engine loads (its own layouts; the simulator
// does not link model code), with --d-state, --checkpoints-only and --layers applied.
core::StatusOr<cache::HybridShape> ShapeOf(const SimulateOptions& o, int* model_alignment) {
  RADIXLM_ASSIGN_OR_RETURN(cache::HybridShape shape,
                           sim::ResolveModelShape(o.model, [&](const std::string& spec) -> core::StatusOr<cache::HybridShape> {
                             RADIXLM_ASSIGN_OR_RETURN(models::ModelConfig config, models::LoadConfig(spec));
                             if (config.n_ssm_layers() > 0) *model_alignment = config.ssm_chunk;
                             return runner::ShapeOfModel(config);
                           }));
  if (o.d_state > 0) shape.d_state = o.d_state;
  if (o.checkpoints_only) shape.kv_elem_bytes = 0;  // the engine's setting: KV in its own pool
  if (!o.layers.empty()) {
    int ssm, attn, mlp;
    if (std::sscanf(o.layers.c_str(), "%d:%d:%d", &ssm, &attn, &mlp) != 3 || ssm < 0 || attn < 0 || mlp < 0)
      return core::InvalidArgument("--layers wants SSM:ATTENTION:MLP counts, e.g. 24:4:28");
    shape.n_ssm_layers = ssm, shape.n_attn_layers = attn, shape.n_mlp_layers = mlp;
  }
  return shape;
}

// The trace (or the generated workload) into every simulator.
core::Status FeedAll(const SimulateOptions& o, sim::Simulators& sims) {
  if (o.trace.empty()) {
    core::Status failed = core::Status::Ok();
    RADIXLM_RETURN_IF_ERROR(sim::GenerateWorkload(o.workload, [&](const sim::TraceRequest& r) {
      if (failed.ok()) failed = sims.Feed(r);
    }));
    return failed;
  }
  auto reader = sim::TraceReader::Open(o.trace, sim::TraceFormat::kAuto, o.block_tokens, {.max_output_tokens = o.max_output_tokens});
  if (!reader.ok()) return reader.status();
  // One request per line: the bar's total, counted only for a bar on a terminal and a regular
  // file (a pipe, --trace <(zcat t.gz), can be read once).
  int64_t lines = 0;
  if (isatty(2) && std::filesystem::is_regular_file(o.trace)) {
    std::ifstream count(o.trace, std::ios::binary);
    for (std::string line; std::getline(count, line);) lines += line.find_first_not_of(" \t\r") != std::string::npos;
  }
  core::Progress progress("simulate", lines);
  sim::TraceRequest request;
  int64_t fed = 0;
  for (;;) {
    RADIXLM_ASSIGN_OR_RETURN(const bool more, reader->Next(&request));
    if (!more) break;
    RADIXLM_RETURN_IF_ERROR(sims.Feed(request));
    progress.Update(++fed);
  }
  progress.Done();
  return core::Status::Ok();
}

core::Status Report(const SimulateOptions& o, const std::vector<sim::SimResult>& results, const cache::HybridShape& shape,
                    const cache::CostModel& cost) {
  if (!o.csv.empty()) RADIXLM_RETURN_IF_ERROR(sim::WriteRequestsCsv(o.csv, results));
  if (!o.plot.empty()) RADIXLM_RETURN_IF_ERROR(sim::PlotResults(o.plot, results));
  if (o.json_out && results.size() == 1) {
    std::cout << core::JsonText(sim::ResultJson(results[0], shape, o.setup)) << "\n";
  } else if (o.json_out) {
    json all = json::array();
    for (const auto& r : results) all.push_back(sim::ResultJson(r, shape, o.setup));
    std::cout << core::JsonText(json{{"results", all}}) << "\n";
  } else {
    const sim::TtftModel& ttft = o.setup.ttft;
    std::printf("model %s: %d SSM, %d attention, %d MLP layers; checkpoint %.2f MB, KV %.1f KB/token; TTFT %.2f ms + %.5f ms/token\n",
                shape.name.c_str(), shape.n_ssm_layers, shape.n_attn_layers, shape.n_mlp_layers, cost.CheckpointBytes() / 1e6,
                cost.KvBytes(1) / 1e3, ttft.intercept_ms(), ttft.ms_per_token());
    for (const auto& r : results) std::printf("%s", sim::ResultText(r, o.setup).c_str());
  }
  return core::Status::Ok();
}

int RunSimulate(SimulateOptions& o) {
  auto fail = [](const core::Status& s) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  };
  if (!o.generate.empty()) o.workload.kind = o.generate;
  if (!o.generate.empty() && !o.out.empty()) {
    const core::Status written = WriteWorkload(o);
    return written.ok() ? 0 : fail(written);
  }
  if (o.trace.empty() == o.generate.empty())
    return fail(core::InvalidArgument("give --trace FILE, or --generate KIND (with --out to write it)"));
  int model_alignment = 0;  // an engine model's Mamba2 chunk (what its executor reports)
  auto shape = ShapeOf(o, &model_alignment);
  if (!shape.ok()) return fail(shape.status());
  auto capacity = ParseBytes(o.cache_size);
  if (!capacity.ok()) return fail(capacity.status());
  o.setup.capacity_bytes = *capacity;
  // The built-in line is Marconi's fit of Jamba-1.5-Mini's profiled prefill times; a table
  // refits it.
  if (!o.ttft_table.empty()) {
    auto fitted = sim::TtftModel::FitCsv(o.ttft_table);
    if (!fitted.ok()) return fail(fitted.status());
    o.setup.ttft = *fitted;
  }
  if (!std::isfinite(o.workload.sessions_per_second) || !std::isfinite(o.workload.mean_agent_gap_s))
    return fail(core::InvalidArgument("--sps and --art must be finite numbers"));
  const cache::CostModel cost(*shape, o.setup.reference ? cache::Accounting::kReference : cache::Accounting::kCorrected);
  core::ThreadPool pool(o.threads);
  auto sims = sim::BuildSimulators(o.setup, *shape, cost, model_alignment, &pool);
  if (!sims.ok()) return fail(sims.status());
  if (const core::Status s = FeedAll(o, *sims); !s.ok()) return fail(s);
  std::vector<sim::SimResult> results;
  for (auto& sim : sims->sims) results.push_back(sim->Finish());
  if (!sims->fleets.empty()) {
    const json report = sim::FleetsJson(o.setup, results[0], sims->fleets);
    if (o.json_out) std::cout << core::JsonText(report) << "\n";
    else std::printf("%s", sim::FleetsText(o.setup, report).c_str());
    return 0;
  }
  const core::Status reported = Report(o, results, *shape, cost);
  return reported.ok() ? 0 : fail(reported);
}

}  // namespace

namespace {

// --memory, the engine's pool and steps, the modelled disk.
void AddMemoryOptions(CLI::App* cmd, SimulateOptions* o) {
  AddChecked(cmd, "--memory", o->setup.memory,
             "budget: Marconi's model, one byte budget (--cache-size) for KV and checkpoints; "
             "engine: the engine's serving memory (--kv-tokens, --kv-block-tokens, --checkpoint-slots)",
             CLI::IsMember({"budget", "engine"}));
  AddChecked(cmd, "--arrivals", o->setup.arrivals,
             "sequential: each request after the previous finished (Marconi); trace: at its timestamp, with the engine's concurrency",
             CLI::IsMember({"sequential", "trace"}));
  cmd->add_option("--cache-size", o->cache_size, "--memory budget: cache capacity, e.g. 2GB, 40GB, 512MiB");
  cmd->add_option("--kv-tokens", o->setup.kv_tokens, "--memory engine: KV pool size in tokens")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--kv-block-tokens", o->setup.kv_block_tokens, "--memory engine: tokens per KV block")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--checkpoint-slots", o->setup.checkpoint_slots, "--memory engine, hybrid models: cached SSM checkpoints")->check(CLI::Range(1, 1 << 20));
  AddChecked(cmd, "--disk-gb", o->setup.disk_gb,
             "--memory engine, attention-only models: a modelled disk tier of this many GB under the KV pool "
             "(LRU; 0: none; not with --replicas)",
             CLI::Range(0.0, 1e9));
  AddChecked(cmd, "--disk-gbps", o->setup.disk_gbps,
             "the disk tier's read bandwidth in GB/s (a load's time is charged to the simulated clock)", CLI::Range(1e-6, 1e6));
  cmd->add_option("--max-running", o->setup.max_running, "sequences per engine batch")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--step-tokens", o->setup.step_tokens, "tokens per engine step (chunked prefill; default: a prefill in one step)")->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--prompt-end-checkpoints", o->setup.prompt_end_checkpoints,
                "hybrid policies: also keep each prompt's end state (a verbatim repeat hits; a checkpoint per request)");
  AddChecked(cmd, "--prompt-end-min-gap", o->setup.prompt_end_min_gap,
             "keep a prompt's end state only this many tokens past the state the request starts from or captures",
             CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--prefill-alignment", o->setup.prefill_alignment, "prefill chunk grid (default: the engine model's Mamba2 chunk)")->check(CLI::Range(0, 1 << 20));
}

// The policies, the cost model's shape and the outputs.
void AddPolicyOptions(CLI::App* cmd, SimulateOptions* o) {
  cmd->add_option("--policy", o->setup.policy, "lru, vllm+, sglang+, marconi, marconi-static; a comma list; or all");
  cmd->add_option_function<double>("--alpha", [o](double a) { o->setup.alpha = a, o->setup.alpha_set = true; },
                                   "FLOP-efficiency weight (marconi-static; marconi's starting value)");
  cmd->add_option("--bootstrap-multiplier", o->setup.bootstrap_multiplier, "marconi: tuning window = this x requests before the first eviction (15 for LMSys)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--reference-accounting", o->setup.reference, "reproduce the Marconi artifact's accounting, quirks included");
  cmd->add_option("--d-state", o->d_state, "override the model's SSM state size");
  cmd->add_flag("--checkpoints-only", o->checkpoints_only,
                "count only SSM checkpoints against the capacity (as the engine's checkpoint pool does)");
  cmd->add_option("--layers", o->layers, "override layer counts SSM:ATTENTION:MLP");
  cmd->add_option("--ttft-table", o->ttft_table, "seqlen,value(10 ms) CSV to fit the TTFT line (default: 17.81 ms + 0.05296 ms/token, Marconi's fit of Jamba-1.5-Mini's table)");
  cmd->add_option("--block-tokens", o->block_tokens, "tokens per hash id of a Mooncake trace");
  AddChecked(cmd, "--max-output-tokens", o->max_output_tokens,
             "refuse trace lines with longer outputs (each output token is one replayed decode step)",
             CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--threads", o->threads, "threads for marconi's alpha-tuning replays")->check(CLI::Range(1, 1024));
  cmd->add_option("--csv", o->csv, "write one row per request and policy");
  cmd->add_option("--plot", o->plot, "write PREFIX_hit_rate.png and PREFIX_ttft_cdf.png (gnuplot)");
  cmd->add_flag("--json", o->json_out, "print JSON");
}

// --replicas and the router.
void AddFleetOptions(CLI::App* cmd, SimulateOptions* o) {
  cmd->add_option("--replicas", o->setup.replicas,
                  "simulate a fleet: N engines with 1/N of the memory (--kv-tokens, --checkpoint-slots) each, behind a router, "
                  "next to one engine with all of it (--memory engine)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--routing", o->setup.routing, "round-robin, least-loaded, prefix-aware (on the replicas' KV events), a comma list, or all")
      ->capture_default_str();
  AddChecked(cmd, "--match-threshold", o->setup.match_threshold,
             "prefix-aware: a cached prefix covering more than this share of the request is always followed (SGLang's cache_threshold)",
             CLI::Range(0.0, 1.0));
  AddChecked(cmd, "--pressure-slack", o->setup.pressure_slack,
             "prefix-aware: a shorter match is followed while its replica's recent new tokens stay within (1 + this) x the mean",
             CLI::Range(0.0, 1000.0));
  AddChecked(cmd, "--pressure-window", o->setup.pressure_window,
             "prefix-aware: the pressure decays over this many x replicas requests", CLI::Range(0.01, 1e6));
  AddChecked(cmd, "--remote-gbps", o->setup.remote_gbps,
             "a remote store the fleet's replicas share under their pools (--cache-remote), read at this many GB/s "
             "(0: none; attention-only models)",
             CLI::Range(0.0, 1e6));
  AddChecked(cmd, "--remote-gb", o->setup.remote_gb, "the remote store's size in GB (least recently used blocks go first)",
             CLI::PositiveNumber);
}

// --generate: the workload generators.
void AddGenerateOptions(CLI::App* cmd, SimulateOptions* o) {
  cmd->add_option("--generate", o->generate, "generate a workload: swebench, lmsys or sharegpt");
  cmd->add_option("--out", o->out, "with --generate: write the trace here instead of simulating it");
  cmd->add_option("--sessions", o->workload.sessions, "generated sessions");
  cmd->add_option("--sps", o->workload.sessions_per_second, "generated sessions per second");
  cmd->add_option("--art", o->workload.mean_agent_gap_s, "swebench: mean seconds between agent turns");
  cmd->add_option("--seed", o->workload.seed, "generator seed");
  cmd->add_option("--regenerate", o->workload.regenerate, "generated: chance a turn is sent again verbatim (regenerate / retry)")
      ->check(CLI::Range(0.0, 0.99));
}
}  // namespace

void RegisterSimulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Replay a request trace through the engine with a cost model (no model weights), or generate a workload trace");
  cmd->add_option("--trace", o->trace, "JSONL trace: Marconi schema (token ids) or Mooncake (hash_ids), detected");
  cmd->add_option("--model", o->model, "marconi-7b[-n16|-n128], nemotron-h-8b, a config.json, or a model the engine loads");
  AddMemoryOptions(cmd, o.get());
  AddPolicyOptions(cmd, o.get());
  AddFleetOptions(cmd, o.get());
  AddGenerateOptions(cmd, o.get());
  cmd->callback([o]() { std::exit(RunSimulate(*o)); });
}

}  // namespace radixlm::cli
