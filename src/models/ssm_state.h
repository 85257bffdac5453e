// The memory behind Mamba2 layers' recurrent state: slots, each holding every SSM layer's
// ssm state [n_heads, d_state, head_dim] and conv window [d_conv - 1, conv_dim], in f32. A slot
// is either a running sequence's working state (updated in place by Forward) or a checkpoint
// (a copy taken at an exact token, restored by copying it into a working slot). Which slot
// belongs to whom is decided elsewhere (the engine, the hybrid cache), never here.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "models/model_config.h"

namespace radixlm::models {

class SsmStateStore {
 public:
  SsmStateStore(const ModelConfig& model, int n_slots);
  // layer: index among the model's Mamba2 layers.
  float* Ssm(int slot, int layer);
  float* Conv(int slot, int layer);
  void Reset(int slot);                // the state before any token: zeros
  void Copy(int src_slot, int dst_slot);
  int n_slots() const { return n_slots_; }
  size_t nbytes() const { return buffer_.size(); }
  static size_t BytesPerSlot(const ModelConfig& model);

 private:
  int n_slots_, n_layers_;
  int64_t ssm_floats_, conv_floats_;
  core::AlignedBuffer buffer_;
};

}  // namespace radixlm::models
