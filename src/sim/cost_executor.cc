#include "sim/cost_executor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

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
  const double lowest = a + b * *std::min_element(xs.begin(), xs.end());
  if (lowest < 0) a -= lowest;
  return TtftModel(a, b);
}

CostModelExecutor::CostModelExecutor(CostExecutorConfig config, SimClock& clock, ModelledStack* tiers)
    : config_(config), clock_(clock), tiers_(tiers) {}

int32_t CostModelExecutor::LoadBlocks(std::span<const engine::BlockTransfer> loads) {
  if (tiers_ == nullptr) return 0;
  int32_t n = 0;
  double seconds = 0;
  for (const engine::BlockTransfer& t : loads) {
    const std::optional<double> read = tiers_->Load(t.key);
    if (!read) break;
    seconds += *read;
    ++n;
  }
  clock_.Advance(seconds);
  tier_read_seconds_ += seconds;
  return n;
}

void CostModelExecutor::StoreBlocks(std::span<const engine::BlockTransfer> stores) {
  if (tiers_ == nullptr) return;
  for (const engine::BlockTransfer& t : stores) tiers_->Store(t.key);
}

void CostModelExecutor::Execute(std::span<const engine::BlockCopy>, std::span<const engine::StepSequence> seqs,
                                std::vector<float>* logits) {
  int64_t tokens = 0;
  for (const engine::StepSequence& s : seqs) {
    RADIXLM_CHECK_MSG(s.logit_rows == 0, "the simulator replays recorded outputs; it computes no logits");
    tokens += static_cast<int64_t>(s.tokens.size());
  }
  logits->clear();
  clock_.Advance(config_.step_cost.Ms(tokens) / 1000.0);
  ++steps_;
}

}  // namespace radixlm::sim
