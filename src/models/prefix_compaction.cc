#include "models/prefix_compaction.h"

#include "core/status.h"

namespace radixlm::models {

CompactionPlan BuildCompactionPlan(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                   std::span<const int64_t> seq_begin, int pad_multiple) {
  RADIXLM_CHECK(ids.size() == positions.size());
  CompactionPlan plan;
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0) return plan;
  RADIXLM_CHECK(seq_begin.size() >= 2 && seq_begin.front() == 0 && seq_begin.back() == n);
  plan.scatter.reserve(n);
  // Trie arena with intrusive child lists (first child, next sibling): no allocation per node.
  struct Node {
    uint64_t key;
    int32_t first_child, next_sibling, compact;
  };
  std::vector<Node> nodes(n + 1);  // at most one node per row, plus the root
  nodes[0] = {0, -1, -1, -1};
  int32_t used = 1;
  plan.compact_ids.reserve(n);
  plan.compact_positions.reserve(n);
  plan.gather.reserve(n);
  plan.compact_seq.reserve(n);
  for (size_t s = 0; s + 1 < seq_begin.size(); ++s) {
    plan.seq_compact_begin.push_back(static_cast<int64_t>(plan.gather.size()));
    int32_t parent = 0;
    for (int64_t i = seq_begin[s]; i < seq_begin[s + 1]; ++i) {
      const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(positions[i])) << 32) |
                           static_cast<uint32_t>(ids[i]);
      int32_t child = nodes[parent].first_child;
      int32_t last = -1;
      while (child >= 0 && nodes[child].key != key) {
        last = child;
        child = nodes[child].next_sibling;
      }
      if (child < 0) {
        child = used++;
        nodes[child] = {key, -1, -1, static_cast<int32_t>(plan.gather.size())};
        // Append (not prepend) keeps creation order among siblings: deterministic scans.
        if (last < 0) nodes[parent].first_child = child;
        else nodes[last].next_sibling = child;
        plan.compact_ids.push_back(ids[i]);
        plan.compact_positions.push_back(positions[i]);
        plan.gather.push_back(static_cast<int32_t>(i));
        plan.compact_seq.push_back(static_cast<int32_t>(s));
      }
      plan.scatter.push_back(nodes[child].compact);
      parent = child;
    }
  }
  plan.seq_compact_begin.push_back(static_cast<int64_t>(plan.gather.size()));
  if (pad_multiple > 0) {
    while (plan.gather.size() % pad_multiple != 0) {
      plan.compact_ids.push_back(0);
      plan.compact_positions.push_back(0);
      plan.gather.push_back(0);
    }
  }
  return plan;
}

}  // namespace radixlm::models
