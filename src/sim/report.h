// What a simulation run reports: per policy a JSON object (the engine's metrics, the policy's
// counters, modelled TTFT percentiles, the disk tier's figures) and a line for a person; the
// requests as CSV; gnuplot charts (hit rate by input length, TTFT CDF); and for --replicas the
// fleets against one cache of the same total memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cost_model.h"
#include "core/status.h"
#include "sim/fleet.h"
#include "sim/setup.h"
#include "sim/simulator.h"

namespace radixlm::sim {

using json = nlohmann::json;

json ResultJson(const SimResult& r, const cache::HybridShape& shape, const SetupOptions& o);
std::string ResultText(const SimResult& r, const SetupOptions& o);
// policy, index, session_id, turn_id, input_tokens, hit_tokens, ttft_ms, vanilla_ttft_ms per request.
core::Status WriteRequestsCsv(const std::string& path, const std::vector<SimResult>& results);
// PREFIX_hit_rate.png and PREFIX_ttft_cdf.png through gnuplot (PREFIX.dat and PREFIX.gp beside them).
core::Status PlotResults(const std::string& prefix, const std::vector<SimResult>& results);
// Finishes each fleet and compares it with `single`, the one cache of the same total size.
json FleetsJson(const SetupOptions& o, const SimResult& single, std::vector<std::unique_ptr<FleetSimulator>>& fleets);
std::string FleetsText(const SetupOptions& o, const json& report);

}  // namespace radixlm::sim
