#include "models/prefix_compaction.h"

#include "core/status.h"

namespace radixlm::models {
namespace {

uint64_t Key(int32_t token, int32_t position) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) | static_cast<uint32_t>(token);
}

}  // namespace

int32_t CompactionPlanBuilder::Root(int64_t group) const {
  for (const auto& [g, node] : roots_)
    if (g == group) return node;
  return -1;
}

int32_t CompactionPlanBuilder::FindChild(int32_t parent, uint64_t key, int32_t* last) const {
  int32_t child = nodes_[parent].first_child;
  *last = -1;
  while (child >= 0 && nodes_[child].key != key) {
    *last = child;
    child = nodes_[child].next_sibling;
  }
  return child;
}

int64_t CompactionPlanBuilder::NewRows(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                       int64_t group) const {
  RADIXLM_CHECK(ids.size() == positions.size());
  int32_t node = Root(group);
  size_t matched = 0;
  while (node >= 0 && matched < ids.size()) {
    int32_t last;
    const int32_t child = FindChild(node, Key(ids[matched], positions[matched]), &last);
    if (child < 0) break;
    node = child;
    ++matched;
  }
  return static_cast<int64_t>(ids.size() - matched);
}

int64_t CompactionPlanBuilder::AddSequence(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                           int64_t group) {
  RADIXLM_CHECK(ids.size() == positions.size());
  if (nodes_.empty()) nodes_.reserve(ids.size() + 1);
  int32_t parent = Root(group);
  if (parent < 0) {
    parent = static_cast<int32_t>(nodes_.size());
    nodes_.push_back({0, -1, -1, -1});
    roots_.push_back({group, parent});
  }
  const int32_t s = static_cast<int32_t>(plan_.seq_compact_begin.size());
  const int64_t before = compact_rows();
  plan_.seq_compact_begin.push_back(before);
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint64_t key = Key(ids[k], positions[k]);
    int32_t last;
    int32_t child = FindChild(parent, key, &last);
    if (child < 0) {
      child = static_cast<int32_t>(nodes_.size());
      nodes_.push_back({key, -1, -1, static_cast<int32_t>(plan_.gather.size())});
      // Append (not prepend) keeps creation order among siblings: deterministic scans.
      if (last < 0) nodes_[parent].first_child = child;
      else nodes_[last].next_sibling = child;
      plan_.compact_ids.push_back(ids[k]);
      plan_.compact_positions.push_back(positions[k]);
      plan_.gather.push_back(static_cast<int32_t>(rows_ + static_cast<int64_t>(k)));
      plan_.compact_seq.push_back(s);
    }
    plan_.scatter.push_back(nodes_[child].compact);
    parent = child;
  }
  rows_ += static_cast<int64_t>(ids.size());
  return compact_rows() - before;
}

CompactionPlan CompactionPlanBuilder::Finish(int pad_multiple) && {
  plan_.seq_compact_begin.push_back(compact_rows());
  if (pad_multiple > 0) {
    while (plan_.gather.size() % pad_multiple != 0) {
      plan_.compact_ids.push_back(0);
      plan_.compact_positions.push_back(0);
      plan_.gather.push_back(0);
    }
  }
  return std::move(plan_);
}

CompactionPlan BuildCompactionPlan(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                   std::span<const int64_t> seq_begin, int pad_multiple,
                                   std::span<const int64_t> seq_group) {
  RADIXLM_CHECK(ids.size() == positions.size());
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0) return {};
  RADIXLM_CHECK(seq_begin.size() >= 2 && seq_begin.front() == 0 && seq_begin.back() == n);
  RADIXLM_CHECK(seq_group.empty() || seq_group.size() + 1 == seq_begin.size());
  CompactionPlanBuilder builder;
  for (size_t s = 0; s + 1 < seq_begin.size(); ++s) {
    const size_t b = static_cast<size_t>(seq_begin[s]), len = static_cast<size_t>(seq_begin[s + 1] - seq_begin[s]);
    builder.AddSequence(ids.subspan(b, len), positions.subspan(b, len), seq_group.empty() ? 0 : seq_group[s]);
  }
  return std::move(builder).Finish(pad_multiple);
}

}  // namespace radixlm::models
