#include "sim/report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace radixlm::sim {
namespace {

std::string Format(const char* fmt, ...) {
  va_list args, copy;
  va_start(args, fmt);
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, args);
  va_end(args);
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

}  // namespace

json ResultJson(const SimResult& r, const cache::HybridShape& shape, const SetupOptions& o) {
  json j;
  j["policy"] = r.policy;
  j["model"] = shape.name;
  j["memory"] = o.memory;
  j["arrivals"] = o.arrivals;
  j["cache_size_bytes"] = r.capacity_bytes;
  j["accounting"] = o.reference ? "reference" : "corrected";
  // The engine's metrics: the figures a served run reports.
  const engine::EngineMetrics& m = r.metrics;
  j["requests"] = m.requests_finished;
  j["requests_rejected"] = m.requests_rejected;
  j["input_tokens"] = m.prompt_tokens;
  j["hit_tokens"] = m.cached_prompt_tokens;
  j["token_hit_rate"] = m.TokenHitRate();
  j["request_hit_rate"] = m.RequestHitRate();
  j["computed_tokens"] = m.computed_tokens;
  j["preemptions"] = m.preemptions;
  j["engine_steps"] = r.steps;
  j["simulated_seconds"] = r.simulated_seconds;
  if (r.flops_saved >= 0 && r.flops_saved < (cache::Flops{1} << 64))
    j["flops_saved"] = static_cast<uint64_t>(r.flops_saved);
  else
    j["flops_saved"] = static_cast<double>(r.flops_saved);
  if (r.policy == "marconi" || r.policy == "marconi-static") {
    j["alpha"] = r.alpha;
  } else {
    j["alpha"] = nullptr;
  }
  if (r.policy == "marconi") {
    j["alpha_tuned"] = r.cache.alpha_tuned;
    j["bootstrap_window"] = r.cache.bootstrap_window;
    j["tuning_window_tokens"] = r.cache.tuning_window_tokens;
  }
  // The policy's own counters; engine memory's block tree reports evicted tokens.
  j["evictions"] = r.cache.evictions;
  j["prompt_end_checkpoints"] = r.cache.prompt_end_checkpoints;
  j["cache_nodes"] = r.cache_nodes;
  j["cache_bytes"] = r.cache_bytes;
  j["evicted_tokens"] = m.evicted_tokens;
  j["checkpoints_admitted"] = r.cache.checkpoints_admitted;
  j["victim_searches"] = r.cache.victim_searches;
  j["victim_candidates_scored"] = r.cache.victim_scored;
  j["victim_candidate_set"] = r.cache.victim_candidates;
  j["seconds"] = r.seconds;
  j["requests_per_second"] = r.seconds > 0 ? m.requests_finished / r.seconds : 0;
  j["computed_prompt_tokens"] = m.prompt_tokens - m.cached_prompt_tokens;
  j["ttft_ms"] = {{"p5", r.ttft_p5}, {"p50", r.ttft_p50}, {"p90", r.ttft_p90}, {"p95", r.ttft_p95}};
  j["vanilla_ttft_ms"] = {{"p5", r.vanilla_p5}, {"p50", r.vanilla_p50}, {"p95", r.vanilla_p95}};
  json bins = json::array();
  for (const LengthBin& b : r.bins) {
    if (!b.requests) continue;
    bins.push_back({{"min_input_tokens", b.lo}, {"max_input_tokens", b.hi - 1}, {"requests", b.requests},
                    {"token_hit_rate", double(b.hit_tokens) / std::max<int64_t>(1, b.input_tokens)}});
  }
  j["hit_rate_by_input_length"] = bins;
  j["disk"] = nullptr;
  if (r.disk_bytes > 0) {
    // The modelled disk tier (sim/disk_model.h): of hit_tokens, those it served.
    const DiskModelStats& d = r.disk;
    j["disk"] = {{"capacity_bytes", r.disk_bytes}, {"gbps", o.disk_gbps}, {"block_bytes", d.block_bytes},
                 {"capacity_blocks", d.capacity_blocks}, {"blocks_held", d.blocks},
                 {"hit_tokens", m.tier_hit_tokens}, {"loaded_blocks", m.tier_loaded_blocks},
                 {"failed_loads", m.tier_failed_loads}, {"offered_blocks", m.tier_offered_blocks},
                 {"written_blocks", d.written_blocks}, {"evicted_blocks", d.evicted_blocks},
                 {"bytes_read", d.bytes_read}, {"bytes_written", d.bytes_written},
                 {"read_seconds", r.tier_read_seconds}};
  }
  return j;
}

std::string ResultText(const SimResult& r, const SetupOptions& o) {
  std::string out = Format("%-15s cache %.3g GB  token hit %.4f  request hit %.4f  FLOPs saved %s  alpha %.1f  "
              "TTFT p50/p95 %.0f/%.0f ms (no cache %.0f/%.0f)  %.2f s\n",
              r.policy.c_str(), r.capacity_bytes / 1e9, r.metrics.TokenHitRate(), r.metrics.RequestHitRate(),
              cache::FlopsToString(r.flops_saved).c_str(), r.alpha, r.ttft_p50, r.ttft_p95, r.vanilla_p50,
              r.vanilla_p95, r.seconds);
  if (r.disk_bytes <= 0) return out;
  const engine::EngineMetrics& m = r.metrics;
  return out + Format("  disk %.4g GB at %.4g GB/s: hit %lld tokens (%.4f of input), %lld blocks loaded (%.2f s), "
              "%lld/%lld blocks held, %lld evicted, read %.4g GB, written %.4g GB; prompt tokens computed %lld\n",
              r.disk_bytes / 1e9, o.disk_gbps, static_cast<long long>(m.tier_hit_tokens),
              m.prompt_tokens ? double(m.tier_hit_tokens) / m.prompt_tokens : 0.0, static_cast<long long>(m.tier_loaded_blocks),
              r.tier_read_seconds, static_cast<long long>(r.disk.blocks), static_cast<long long>(r.disk.capacity_blocks),
              static_cast<long long>(r.disk.evicted_blocks), r.disk.bytes_read / 1e9, r.disk.bytes_written / 1e9,
              static_cast<long long>(m.prompt_tokens - m.cached_prompt_tokens));
}

core::Status WriteRequestsCsv(const std::string& path, const std::vector<SimResult>& results) {
  std::ofstream out(path);
  if (!out) return core::InvalidArgument("cannot write " + path);
  out << "policy,index,session_id,turn_id,input_tokens,hit_tokens,ttft_ms,vanilla_ttft_ms\n";
  for (const auto& r : results)
    for (size_t i = 0; i < r.requests.size(); ++i) {
      const auto& q = r.requests[i];
      out << r.policy << ',' << i << ',' << q.session_id << ',' << q.turn_id << ',' << q.input_tokens
          << ',' << q.hit_tokens << ',' << q.ttft_ms << ',' << q.vanilla_ttft_ms << '\n';
    }
  return core::Status::Ok();
}

// Two PNGs through gnuplot: token hit rate by input-length bin per policy, and the TTFT CDF.
core::Status PlotResults(const std::string& prefix, const std::vector<SimResult>& results) {
  const std::string data = prefix + ".dat";
  std::ofstream d(data);
  for (size_t b = 0; b < results[0].bins.size(); ++b) {
    if (!results[0].bins[b].requests) continue;
    d << '"' << results[0].bins[b].lo / 1024 << "K-\"";
    for (const auto& r : results)
      d << ' ' << double(r.bins[b].hit_tokens) / std::max<int64_t>(1, r.bins[b].input_tokens);
    d << '\n';
  }
  d << "\n\n";
  for (const auto& r : results) {  // one CDF block per policy
    std::vector<double> t;
    for (const auto& q : r.requests) t.push_back(q.ttft_ms);
    std::sort(t.begin(), t.end());
    for (size_t i = 0; i < t.size(); ++i) d << t[i] << ' ' << double(i + 1) / t.size() << '\n';
    d << "\n\n";
  }
  d.close();
  std::ostringstream g;
  g << "set terminal pngcairo size 900,500; set output '" << prefix << "_hit_rate.png';"
    << "set style data histograms; set style fill solid 0.8; set yrange [0:1];"
    << "set ylabel 'token hit rate'; set xlabel 'input length'; set key top left;"
    << "plot ";
  for (size_t i = 0; i < results.size(); ++i)
    g << (i ? ", " : "") << "'" << data << "' index 0 using " << i + 2 << ":xtic(1) title '" << results[i].policy << "'";
  g << "; set output '" << prefix << "_ttft_cdf.png'; set style data lines; set yrange [0:1];"
    << "set xlabel 'modelled TTFT (ms)'; set ylabel 'fraction of requests'; plot ";
  for (size_t i = 0; i < results.size(); ++i)
    g << (i ? ", " : "") << "'" << data << "' index " << i + 1 << " using 1:2 title '" << results[i].policy << "'";
  const std::string script = prefix + ".gp";
  std::ofstream(script) << g.str() << '\n';
  if (std::system(("gnuplot '" + script + "' 2>/dev/null").c_str()) != 0)
    return core::InvalidArgument("gnuplot failed (is gnuplot-nox installed? scripts/setup.sh installs it)");
  return core::Status::Ok();
}

// --replicas: each fleet against the one cache of the same total size (`single`).
json FleetsJson(const SetupOptions& o, const SimResult& single, std::vector<std::unique_ptr<FleetSimulator>>& fleets) {
  const engine::EngineMetrics& one = single.metrics;
  json out = {{"replicas", o.replicas},
              {"policy", single.policy},
              {"arrivals", o.arrivals},
              {"kv_tokens_total", o.kv_tokens},
              {"single_cache", {{"token_hit_rate", one.TokenHitRate()},
                                {"requests_rejected", one.requests_rejected},
                                {"computed_prompt_tokens", one.prompt_tokens - one.cached_prompt_tokens},
                                {"ttft_ms_p50", single.ttft_p50}, {"ttft_ms_p95", single.ttft_p95}}}};
  json list = json::array();
  for (auto& fleet : fleets) {
    const FleetResult f = fleet->Finish();
    std::vector<double> ttft;
    for (const SimResult& r : f.replicas)
      for (const RequestRecord& q : r.requests) ttft.push_back(q.ttft_ms);
    json per = json::array();
    int64_t rejected = 0;  // longer than a replica's memory (1/N of the pool)
    for (const SimResult& r : f.replicas) {
      per.push_back(r.metrics.TokenHitRate());
      rejected += r.metrics.requests_rejected;
    }
    const int64_t single_computed = one.prompt_tokens - one.cached_prompt_tokens;
    list.push_back({{"routing", f.routing},
                    {"token_hit_rate", f.token_hit_rate},
                    {"hit_rate_vs_single_cache", one.TokenHitRate() > 0 ? f.token_hit_rate / one.TokenHitRate() : 0.0},
                    {"requests_rejected", rejected},
                    {"computed_prompt_tokens", f.computed_prompt_tokens},
                    // Prefill the split costs over one cache: prompt tokens computed again.
                    {"duplicate_prefill_tokens", f.computed_prompt_tokens - single_computed},
                    {"duplicate_blocks_at_end", f.duplicate_blocks_at_end},
                    {"requests_per_replica", f.requests_per_replica},
                    {"replica_token_hit_rates", per},
                    {"routed_by_prefix", f.routed_by_prefix},
                    {"routed_by_load", f.routed_by_load},
                    {"ttft_ms_p50", Percentile(ttft, 50)},
                    {"ttft_ms_p95", Percentile(ttft, 95)},
                    {"remote", f.remote ? json{{"capacity_bytes", o.remote_gb * 1e9}, {"gbps", o.remote_gbps},
                                               {"hit_tokens", f.remote_hit_tokens},
                                               {"loaded_blocks", f.remote_stats.loaded_blocks},
                                               {"written_blocks", f.remote_stats.written_blocks},
                                               {"blocks_held", f.remote_stats.blocks},
                                               {"evicted_blocks", f.remote_stats.evicted_blocks},
                                               {"read_seconds", f.remote_read_seconds}}
                                        : json(nullptr)}});
  }
  out["fleets"] = list;
  return out;
}

std::string FleetsText(const SetupOptions& o, const json& report) {
  const json& one = report["single_cache"];
  std::string text = Format("one cache of %lld KV tokens: token hit %.4f, prompt tokens computed %lld\n",
                            static_cast<long long>(o.kv_tokens), one["token_hit_rate"].get<double>(),
                            static_cast<long long>(one["computed_prompt_tokens"].get<int64_t>()));
  for (const json& f : report["fleets"])
    text += Format("%d replicas, %-13s token hit %.4f (%.3fx one cache)  duplicate prefill %lld tokens  duplicate blocks %lld  "
                   "TTFT p50/p95 %.0f/%.0f ms%s%s\n",
                   o.replicas, f["routing"].get<std::string>().c_str(), f["token_hit_rate"].get<double>(),
                   f["hit_rate_vs_single_cache"].get<double>(), static_cast<long long>(f["duplicate_prefill_tokens"].get<int64_t>()),
                   static_cast<long long>(f["duplicate_blocks_at_end"].get<int64_t>()), f["ttft_ms_p50"].get<double>(),
                   f["ttft_ms_p95"].get<double>(),
                   f["requests_rejected"].get<int64_t>() > one["requests_rejected"].get<int64_t>()
                       ? ("  (" + std::to_string(f["requests_rejected"].get<int64_t>()) +
                          " requests longer than a replica's memory refused)").c_str()
                       : "",
                   f["remote"].is_null() ? ""
                                         : Format("  remote store %.4g GB/s: hit %lld tokens, read %.2f s", o.remote_gbps,
                                                  static_cast<long long>(f["remote"]["hit_tokens"].get<int64_t>()),
                                                  f["remote"]["read_seconds"].get<double>()).c_str());
  return text;
}

}  // namespace radixlm::sim
