#include "cli/engine_setup.h"

#include "speculate/draft_source.h"

namespace radixlm::cli {

void AddEngineOptions(CLI::App* cmd, EngineOptions* o) {
  cmd->add_option("--kv-tokens", o->kv_tokens, "KV pool size in tokens (all attention layers; the full-attention ones with --swa-cache window)")->capture_default_str();
  cmd->add_option("--block-tokens", o->block_tokens, "tokens per KV block")->capture_default_str();
  cmd->add_flag("--no-prefix-cache", o->no_prefix_cache, "disable the radix prefix cache");
  AddChecked(cmd, "--kv-eviction", o->kv_eviction,
             "which cached KV prefix goes first when the pool is full: lru | lfu", CLI::IsMember(cache::KvEvictionPolicy::Names()));
  cmd->add_option("--step-tokens", o->step_tokens, "tokens computed per engine step (chunked prefill budget)")->capture_default_str();
  cmd->add_option("--max-running", o->max_running, "sequences per batch")->capture_default_str();
  cmd->add_option("--hybrid-policy", o->hybrid_policy, "hybrids (Mamba2, Gated DeltaNet; sliding windows with --swa-cache window): prefix cache policy sglang+|marconi|marconi-static")
      ->capture_default_str();
  AddChecked(cmd, "--checkpoint-slots", o->checkpoint_slots,
             "hybrids and window rings: cached state checkpoints (0 = no prefix reuse; default auto: 32 states, or as many "
             "windows as fit in the bytes --swa-cache full would give the sliding layers, at least 3 x --max-running + 1)",
             CLI::Range(-1, 1 << 20));
  cmd->add_flag("--prompt-end-checkpoints,!--no-prompt-end-checkpoints", o->prompt_end_checkpoints,
                std::string("hybrids: also cache each prompt's end state, so a prompt sent again verbatim (retry, regeneration) "
                            "or a chat's next turn whose history leaves the cached path inside the last reply resumes there "
                            "(default: ") + (o->prompt_end_checkpoints ? "on" : "off") + ")");
  AddChecked(cmd, "--prompt-end-min-gap", o->prompt_end_min_gap,
             "keep a prompt's end state only this many tokens past the state the request starts from or captures",
             CLI::Range(int64_t{0}, int64_t{1} << 40));
  AddChecked(cmd, "--swa-cache", o->swa_cache,
             "sliding-window models (Gemma 3, gpt-oss): window keeps each sequence's sliding-layer KV in a ring of the "
             "window's size, cached as checkpoints like a hybrid's states; full pages it for the whole context; auto "
             "takes rings where they need less memory than paging (long contexts per sequence)",
             CLI::IsMember({"auto", "window", "full"}));
  cmd->add_option("--prefill-compaction-threshold", o->prefill_compaction_threshold,
                  "compute rows shared by a step's prefills once when compact/original < this (0 never, 1 always)")
      ->capture_default_str();
  AddChecked(cmd, "--cascade", o->cascade,
             "cascade attention: decode rows sharing a cached prefix read its KV once per step (same answers on or off)",
             CLI::IsMember({"on", "off"}));
  cmd->add_option("--cache-dir", o->cache_dir,
                  "a disk tier under the KV pool in this folder: evicted prefixes stay on disk, survive restarts and are "
                  "shared by the processes of one host that use the same folder (KV blocks; a hybrid model's recurrent states too)");
  AddChecked(cmd, "--cache-disk-gb", o->cache_disk_gb,
             "the disk tier's bound in GB (least recently used blocks go first)", CLI::PositiveNumber);
  cmd->add_flag("--cache-fsync", o->cache_fsync, "fdatasync each block file before publishing it (survives power loss, slower)");
  cmd->add_option("--cache-remote", o->cache_remote,
                  "a remote tier under the KV pool (and under --cache-dir's): a Redis server, redis://HOST[:PORT][/DB] or "
                  "unix:///PATH, shared by every replica of the same model (blocks evicted by Redis's maxmemory-policy)");
  cmd->add_option("--cache-remote-password-file", o->cache_remote_password_file,
                  "a file whose first line is the Redis password (with redis://USER@HOST: an ACL user's)");
  AddChecked(cmd, "--cache-remote-wait", o->cache_remote_wait,
             "a request whose prefix another replica is computing into the remote tier waits for its blocks, at most as long "
             "as computing them here would take (on), or computes them (off)",
             CLI::IsMember({"on", "off"}));
  cmd->add_option("--cache-namespace", o->cache_namespace,
                  "a name folded into every disk-tier key: processes with different namespaces share no blocks");
  AddSpeculateOptions(cmd, o);
  AddChecked(cmd, "--prefill-compaction", o->prefill_compaction,
             "attention of deduplicated prefill: trie | gather", CLI::IsMember({"trie", "gather"}));
}

void AddSpeculateOptions(CLI::App* cmd, EngineOptions* o) {
  std::vector<std::string> sources = {"off"};
  std::string help = "speculative decoding without a draft model (answers unchanged): off";
  for (const speculate::SourceRow& row : speculate::Sources()) {
    sources.emplace_back(row.name);
    help += " | " + std::string(row.name) + " (" + std::string(row.help) + ")";
  }
  AddChecked(cmd, "--speculate", o->speculate, help, CLI::IsMember(sources));
  AddChecked(cmd, "--draft-max", o->draft_max, "speculative decoding: draft tokens per step at most", CLI::Range(1, 64));
  AddChecked(cmd, "--spec-max-rows", o->spec_max_rows,
             "speculative decoding: no drafts once a step's decode rows reach this (the batch is compute-bound)", CLI::Range(1, 4096));
  cmd->add_flag("--spec-fixed", o->spec_fixed,
                "speculative decoding: every draft as long as its source finds (up to --draft-max), not the length the "
                "measured step costs and acceptance make pay (measurements of the sources themselves)");
}

void ChatServingDefaults(EngineOptions* o) {
  o->prompt_end_checkpoints = true;
  o->prompt_end_min_gap = 32;
}

std::unique_ptr<runner::ServingEngine> MakeServingEngineOrExit(models::Transformer& model, core::ThreadPool& pool,
                                                               const EngineOptions& o, core::DType kv_dtype,
                                                               const ModelOptions* model_options, int64_t sampled_vocab) {
  auto serving = runner::ServingEngine::Make(model, pool, o, kv_dtype, model_options ? model_options->model : "", sampled_vocab);
  ExitIfError(serving.status());
  return std::move(serving).value();
}

}  // namespace radixlm::cli
