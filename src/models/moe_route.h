// A mixture of experts' choice for one row (ModelConfig::MoeConfig's routing rule): the experts
// a token runs and their weights, from its router logits. A pure function of the row, in a
// fixed order of operations, so a row's choice never depends on the rows beside it.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_config.h"

namespace radixlm::models {

// Scratch reused across rows (sized on first use).
struct RouteScratch {
  std::vector<float> probs, rank, group_score;
  std::vector<int32_t> order, groups;
};

// ids[0, used) = the chosen experts, best first (ties: the lower id); weights[0, used) = theirs.
// selection_bias: [experts] or null.
void RouteRow(const MoeConfig& m, const float* logits, const float* selection_bias, int32_t* ids, float* weights,
              RouteScratch* s);

}  // namespace radixlm::models
