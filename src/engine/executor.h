// The seam between the engine loop and what computes a step: the runner (a real model) or a
// simulator (a cost model). The engine hands over plain ids: token spans, positions, block
// tables, and block-prefix copies to make first (copy-on-write of partially matched blocks).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>


namespace radixlm::engine {

struct StepSequence {
  std::span<const int32_t> tokens;       // tokens whose KV this step computes
  int32_t start_position = 0;            // position of tokens[0]
  // The tokens before start_position (what the sequence's KV already holds). Two sequences
  // with equal contexts may share this step's rows (intra-step prefix dedup).
  std::span<const int32_t> context;
  int64_t share_group = 0;               // rows are shared only within a group (cache namespace)
  std::span<const int32_t> block_table;  // covers positions [0, start_position + tokens.size())
  int32_t logit_rows = 0;                // logits of the last logit_rows tokens (a draft's: 1 + its length)
  // Models with recurrent (Mamba2) layers: the sequence's working state slot, reset to the
  // empty state first when the sequence starts at position 0.
  int32_t state_slot = -1;
  bool reset_state = false;
  int32_t restore_from = -1;  // copy this checkpoint slot into state_slot first (a cache hit)
  // Copy the state after `after_tokens` of this step's tokens into `slot` (a branch point the
  // hybrid cache asked for).
  struct Checkpoint {
    int32_t after_tokens = 0, slot = -1;
  };
  std::vector<Checkpoint> checkpoints;
};

struct BlockCopy {
  int32_t src = 0, dst = 0, tokens = 0;  // copy KV slots [0, tokens) of block src into dst
};

// A pool block and its content key on the tier under the pool (cache/block_tier.h).
struct BlockTransfer {
  int32_t block = -1;
  std::array<uint8_t, 32> key{};
};
// A recurrent state slot and the pool block of the tokens after the last full block (-1:
// none), as cache::StateTransfer names them on the tier.
struct StateTransfer {
  int32_t slot = -1, block = -1, tail = 0;
  std::array<uint8_t, 32> parent{}, key{};
};

class Executor {
 public:
  virtual ~Executor() = default;
  // logits: [sum of the sequences' logit_rows, vocab], in sequence and row order. A row's logits
  // must not depend on the other rows of the step (batch invariance): speculative decoding
  // relies on k + 1 rows of a sequence giving the bits of k + 1 steps of one row.
  virtual void Execute(std::span<const BlockCopy> copies, std::span<const StepSequence> seqs, std::vector<float>* logits) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_context() const = 0;
  // State slots for sequences of a model with recurrent layers (0: the model has none).
  virtual int32_t state_slots() const { return 0; }
  // Prefill chunks ending on multiples of this keep results bitwise equal to one prefill
  // (a recurrent layer's chunked scan runs on a grid of absolute positions); 0 = any split.
  virtual int32_t prefill_alignment() const { return 0; }
  // Copies a whole recurrent state between slots (a finished request's final state into the
  // cache). REQUIRES: state_slots() > 0.
  virtual void CopyState(int32_t src, int32_t dst) {}
  // Rows this executor did not compute because another sequence of the same step computed
  // them (intra-step prefix dedup); cumulative.
  virtual int64_t deduplicated_rows() const { return 0; }
  // True when rows repeated within a step (same context, same tokens at the same positions)
  // are computed once: the scheduler then charges a prefill chunk only for its new rows.
  virtual bool shares_step_prefixes() const { return false; }
  // The tier under the pool (none by default). LoadBlocks fills the blocks from the tier, in
  // order, before it returns, and stops at the first it cannot (missing, corrupt, I/O error):
  // returns how many arrived. StoreBlocks takes the blocks' bytes now (before it returns) and
  // writes them behind the step loop; it never waits for the tier.
  virtual int32_t LoadBlocks(std::span<const BlockTransfer> loads) { return 0; }
  virtual void StoreBlocks(std::span<const BlockTransfer> stores) {}
  // Hybrid models: the same for a recurrent state (into / out of its slot) with its partial block.
  virtual bool LoadState(const StateTransfer& load) { return false; }
  virtual void StoreStates(std::span<const StateTransfer> stores) {}
};

}  // namespace radixlm::engine
