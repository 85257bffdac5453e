// The serving engine's options: the pool, the scheduler, the prefix caches, the disk tier,
// prefill compaction, cascade attention and speculation, as `serve`, `chat`, `replay`, `batch`
// and `generate` take them from the command line (cli/engine_setup.h registers the flags).
#pragma once

#include <cstdint>
#include <string>

namespace radixlm::runner {

struct ServingOptions {
  int64_t kv_tokens = 32768;
  int32_t block_tokens = 16;
  bool no_prefix_cache = false;
  std::string kv_eviction = "lru";
  int step_tokens = 256;
  int max_running = 16;
  // Models with recurrent layers (Mamba2, Gated DeltaNet): the hybrid cache policy and its checkpoint slots.
  std::string hybrid_policy = "marconi";
  int checkpoint_slots = -1;  // -1: auto (runner::CheckpointSlots)
  bool prompt_end_checkpoints = false;  // keep each prompt's end state (exact repeats hit)
  int64_t prompt_end_min_gap = 256;     // ... where it lies this far past the state the request has
  // Commands whose prompts are chat histories re-rendered from text (serve, chat) keep prompt
  // ends by default: see cli::ChatServingDefaults.
  // Sliding-window models: "window" keeps each sequence's sliding-layer KV in a ring of
  // O(window) (a state the hybrid cache checkpoints; the pool holds the full-attention layers);
  // "full" pages it for the whole context like the other layers (llama.cpp's --swa-full);
  // "auto" picks the one taking less memory (runner::WindowRingsFor).
  std::string swa_cache = "auto";
  // Intra-step prefix dedup of prefill rows (RadixMLP in the engine).
  double prefill_compaction_threshold = 0.92;
  std::string prefill_compaction = "trie";
  // Cascade attention for decode rows sharing prefix blocks (answers are the same either way).
  std::string cascade = "on";
  // The disk tier under the KV pool (runner/tier_setup.h): off without a folder.
  std::string cache_dir;
  double cache_disk_gb = 10;
  bool cache_fsync = false;
  std::string cache_namespace;
  std::string cache_remote;                // redis://HOST[:PORT][/DB]: the remote tier ("" none)
  std::string cache_remote_password_file;
  std::string cache_remote_wait = "on";    // wait for a prefix another replica is computing (engine::EngineConfig)
  // Speculative decoding (engine::SpeculateConfig): off | ngram | tree, drafts of at most draft_max.
  std::string speculate = "off";
  int draft_max = 8;
  int spec_max_rows = 16;
  bool spec_fixed = false;  // drafts as long as found (no cost model)
};

}  // namespace radixlm::runner
