#include "sim/simulator.h"

#include "cache/marconi_reference.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace radixlm::sim {

core::StatusOr<TtftModel> TtftModel::FitCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::NotFound("cannot open latency table " + path);
  std::string line;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::vector<double> xs;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || !(std::isdigit(static_cast<unsigned char>(line[0])))) continue;  // header
    std::istringstream fields(line);
    double x, y;
    char comma;
    if (!(fields >> x >> comma >> y) || comma != ',')
      return core::InvalidArgument(path + ":" + std::to_string(line_no) + ": expected seqlen,value");
    y *= 10.0;  // the table is in units of 10 ms
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    xs.push_back(x);
  }
  if (n < 2) return core::InvalidArgument(path + ": fewer than two rows");
  if (n * sxx - sx * sx <= 0) return core::InvalidArgument(path + ": every row has the same seqlen; no line fits");
  const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double a = (sy - b * sx) / n;
  // Marconi shifts the line up if it predicts a negative time anywhere on the table.
  double lowest = a + b * *std::min_element(xs.begin(), xs.end());
  if (lowest < 0) a -= lowest;
  return TtftModel(a, b);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Simulator::Simulator(const cache::HybridCacheConfig& config, const cache::CostModel& cost,
                     TtftModel ttft)
    : config_(config), cost_(cost), ttft_(ttft) {
  if (cost.accounting() == cache::Accounting::kReference) {
    auto made = cache::MakeMarconiReferenceCache(config, cost);
    RADIXLM_CHECK_MSG(made.ok(), made.status().message());
    cache_ = std::move(made).value();
  } else {
    cache_ = cache::MakeHybridCache(config, cost);
  }
  result_.policy = cache::HybridPolicyName(config.policy);
  result_.capacity_bytes = config.capacity_bytes;
  int64_t lo = 0;
  for (int64_t hi : {int64_t{1024}, int64_t{2048}, int64_t{4096}, int64_t{8192}, int64_t{16384}, int64_t{32768}, int64_t{1} << 62}) {
    result_.bins.push_back({lo, hi});
    lo = hi;
  }
}

void Simulator::Feed(const TraceRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const cache::HybridLookup hit = cache_->Lookup(request.input);
  sequence_.assign(request.input.begin(), request.input.end());
  sequence_.insert(sequence_.end(), request.output.begin(), request.output.end());
  cache_->Admit(sequence_);
  busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t input = static_cast<int64_t>(request.input.size());
  for (LengthBin& bin : result_.bins) {
    if (input >= bin.lo && input < bin.hi) {
      ++bin.requests;
      bin.input_tokens += input;
      bin.hit_tokens += hit.hit_tokens;
    }
  }
  result_.requests.push_back({request.session_id, request.turn_id, input, hit.hit_tokens,
                              ttft_.Ms(input - hit.hit_tokens), ttft_.Ms(input)});
}

SimResult Simulator::Finish() {
  result_.stats = cache_->Stats();
  result_.alpha = cache_->alpha();
  result_.seconds = busy_seconds_;
  std::vector<double> ttft, vanilla;
  for (const RequestRecord& r : result_.requests) {
    ttft.push_back(r.ttft_ms);
    vanilla.push_back(r.vanilla_ttft_ms);
  }
  result_.ttft_p5 = Percentile(ttft, 5);
  result_.ttft_p50 = Percentile(ttft, 50);
  result_.ttft_p95 = Percentile(ttft, 95);
  result_.vanilla_p5 = Percentile(vanilla, 5);
  result_.vanilla_p50 = Percentile(vanilla, 50);
  result_.vanilla_p95 = Percentile(vanilla, 95);
  return result_;
}

}  // namespace radixlm::sim
