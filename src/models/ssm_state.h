// The memory behind recurrent layers' state (Mamba2 and Gated DeltaNet): slots, each holding
// every recurrent layer's state — a Mamba2 layer's ssm state [n_heads, d_state, head_dim], a
// Gated DeltaNet layer's [v_heads, head_dim, head_dim] — and its conv window [d_conv - 1,
// conv_dim], in f32. A slot is either a running sequence's working state (updated in place by
// Forward) or a checkpoint (a copy taken at an exact token, restored by copying it into a
// working slot). Which slot belongs to whom is decided elsewhere (the engine, the hybrid
// cache), never here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/model_config.h"

namespace radixlm::models {

class SsmStateStore {
 public:
  SsmStateStore(const ModelConfig& model, int n_slots);
  // layer: index among the model's recurrent layers, in order.
  float* Ssm(int slot, int layer);
  float* Conv(int slot, int layer);
  void Reset(int slot);                // the state before any token: zeros
  void Copy(int src_slot, int dst_slot);
  // A slot's bytes (BytesPerSlot of them, contiguous): a disk tier reads and writes them whole.
  void* SlotData(int slot);
  int n_slots() const { return n_slots_; }
  size_t nbytes() const { return buffer_.size(); }
  static size_t BytesPerSlot(const ModelConfig& model);

 private:
  // Per recurrent layer: floats of its ssm state and of its conv window.
  static std::vector<std::pair<int64_t, int64_t>> LayerFloats(const ModelConfig& model);
  int n_slots_;
  std::vector<int64_t> offset_;  // per layer: where its state starts in a slot; back(): slot floats
  std::vector<int64_t> ssm_floats_;
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
