// Intra-batch prefix deduplication (RadixMLP, Feil & Lipp 2026): a batch's sequences mapped
// onto a prefix trie so position-wise work (embedding, norms, projections, RoPE, MLP) runs once
// per unique (prefix path, token) row. Planned once per batch on the CPU; the forward consumes
// the maps (ForwardBatch::compaction).
//
//   compact_ids / compact_positions [M]   the unique rows, in creation order
//   gather  [M]   compact row j  <- original row gather[j] (its first occurrence)
//   scatter [N]   original row i <- compact row scatter[i]
//
// A trie node is keyed by (token, position) under its parent: a *prefix* dedup, never a global
// one — the same token at the same position after a different prefix stays separate. With no
// sharing the maps are the identity. Valid only for causal models (a row's hidden state
// depends on its prefix alone). Build: one pass, O(N x children per node) with a linear scan of
// each node's children (faster than hashing for the small fan-outs batches have).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace radixlm::models {

struct CompactionPlan {
  std::vector<int32_t> compact_ids, compact_positions, gather, scatter;
  // Compact rows are created sequence by sequence: sequence s created rows
  // [seq_compact_begin[s], seq_compact_begin[s + 1]) (its suffix past what earlier ones share).
  std::vector<int64_t> seq_compact_begin;
  std::vector<int32_t> compact_seq;  // [M] the sequence that created each (real) compact row
  int64_t original_rows() const { return static_cast<int64_t>(scatter.size()); }
  int64_t compact_rows() const { return static_cast<int64_t>(gather.size()); }
  double ratio() const { return original_rows() ? double(compact_rows()) / double(original_rows()) : 1.0; }
};

// Builds a plan sequence by sequence. A sequence joins a context group: sequences of different
// groups never share a row (an engine step whose sequences continue from different cached
// prefixes; 0 for a batch that starts every sequence at position 0). Callers that pack
// batches ask NewRows first (read-only) to fill a forward up to a computed-rows budget.
class CompactionPlanBuilder {
 public:
  // Rows this sequence would add (its length minus what the trie already holds).
  int64_t NewRows(std::span<const int32_t> ids, std::span<const int32_t> positions, int64_t group = 0) const;
  // Appends a sequence as the next one of the batch; returns the rows it added.
  int64_t AddSequence(std::span<const int32_t> ids, std::span<const int32_t> positions, int64_t group = 0);
  int64_t compact_rows() const { return static_cast<int64_t>(plan_.gather.size()); }
  // pad_multiple > 0 pads the compact arrays (token 0, position 0, gather 0) to a multiple.
  CompactionPlan Finish(int pad_multiple = 0) &&;

 private:
  // Trie arena with intrusive child lists (first child, next sibling): no allocation per node.
  struct Node {
    uint64_t key;
    int32_t first_child, next_sibling, compact;
  };
  int32_t Root(int64_t group) const;  // -1 if the group has no root yet
  // The child of `parent` with this key, or -1; *last = the last child scanned (append point).
  int32_t FindChild(int32_t parent, uint64_t key, int32_t* last) const;
  std::vector<Node> nodes_;
  std::vector<std::pair<int64_t, int32_t>> roots_;  // (group, node); few groups per batch
  CompactionPlan plan_;
  int64_t rows_ = 0;
};

// ids, positions: [N]; seq_begin: [B + 1] row offsets (seq_begin[0] = 0, seq_begin[B] = N);
// seq_group: [B] context groups (empty: one group).
CompactionPlan BuildCompactionPlan(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                   std::span<const int64_t> seq_begin, int pad_multiple = 0,
                                   std::span<const int64_t> seq_group = {});

}  // namespace radixlm::models
