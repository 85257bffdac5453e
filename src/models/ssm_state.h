// The memory behind recurrent layers' state (Mamba2 and Gated DeltaNet): slots, each holding
// every recurrent layer's state — a Mamba2 layer's ssm state [n_heads, d_state, head_dim], a
// Gated DeltaNet layer's [v_heads, head_dim, head_dim] — and its conv window [d_conv - 1,
// conv_dim], in f32. A slot is either a running sequence's working state (updated in place by
// Forward) or a checkpoint (a copy taken at an exact token, restored by copying it into a
// working slot). Which slot belongs to whom is decided elsewhere (the engine, the hybrid
// cache), never here.
//
// Window rings (sliding-window models served with `--swa-cache window`): a slot also holds,
// for every sliding attention layer, a ring of RingTokens positions of K and V (KvLayerView's
// block layout, RingBlocks blocks per layer). Position p lives in ring block (p / block_tokens)
// mod RingBlocks, so a sequence's sliding KV takes O(window) memory whatever its length; the
// paged KV pool then holds only the full-attention layers (KvStoreConfig::window_rings). The
// ring is sized for the window plus the most rows one step gives a sequence, so a step never
// overwrites a key one of its rows reads. A ring is a state like an SSM's: a checkpoint at
// token T is the window before T (CopyWindow), and a hit resumes only from one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/attention.h"
#include "models/model_config.h"

namespace radixlm::models {

// The rings' shape; ring_tokens 0 = none (the sliding layers' KV is paged like the others).
struct WindowRings {
  int ring_tokens = 0;  // a multiple of block_tokens (RingTokens)
  int block_tokens = 16;
  core::DType dtype = core::DType::kF32;
};

class SsmStateStore {
 public:
  SsmStateStore(const ModelConfig& model, int n_slots, WindowRings rings = {});
  // Ring positions a model's sliding layers need when one step gives a sequence at most
  // max_step_rows rows: the window before the first row, the rows, one block of slack for
  // alignment; rounded up to blocks. 0 when no layer slides.
  static int RingTokens(const ModelConfig& model, int block_tokens, int max_step_rows);
  bool has_rings() const { return rings_.ring_tokens > 0; }
  int ring_tokens() const { return rings_.ring_tokens; }
  // Rows one step may give a sequence without overwriting what its rows read.
  int max_step_rows() const { return rings_.ring_tokens - rings_.block_tokens - (window_ - 1); }
  // Whether attention layer `kv_index` keeps its KV in the rings, and its view: block ids are
  // those of RingTable.
  bool InRing(int kv_index) const;
  kernels::KvLayerView RingLayer(int kv_index) const;
  // The block table a sequence in `slot` attends through on a ring layer: its logical block i
  // is ring block i mod RingBlocks of the slot.
  void RingTable(int slot, int64_t n_blocks, std::vector<int32_t>* out) const;
  // dst's ring gets src's keys and values of positions [end - window + 1, end): what the next
  // row, at position `end`, attends to. Whole blocks are copied; positions outside the range
  // are ones no later row reads before it writes them.
  void CopyWindow(int src_slot, int dst_slot, int64_t end);
  // layer: index among the model's recurrent layers, in order.
  float* Ssm(int slot, int layer);
  float* Conv(int slot, int layer);
  void Reset(int slot);                // the state before any token: zeros
  void Copy(int src_slot, int dst_slot);
  // A slot's bytes (slot_bytes() of them, contiguous): a disk tier reads and writes them whole.
  void* SlotData(int slot);
  int n_slots() const { return n_slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t nbytes() const { return buffer_.size(); }
  static size_t BytesPerSlot(const ModelConfig& model, const WindowRings& rings = {});

 private:
  size_t RingBlockBytes() const;
  int ring_blocks() const { return rings_.ring_tokens / rings_.block_tokens; }
  // Per recurrent layer: floats of its ssm state and of its conv window.
  static std::vector<std::pair<int64_t, int64_t>> LayerFloats(const ModelConfig& model);
  int n_slots_;
  WindowRings rings_;
  int window_ = 0;                // the largest window
  int n_kv_heads_ = 0, head_dim_ = 0;
  std::vector<int> ring_of_;      // per attention layer: its ring index, or -1 (full attention)
  int n_ring_layers_ = 0;
  size_t slot_bytes_ = 0;         // SSM floats, then rings (2 per ring layer: K, V)
  std::vector<int64_t> offset_;  // per layer: where its state starts in a slot; back(): slot floats
  std::vector<int64_t> ssm_floats_;
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
