// The serving engine's flags (--kv-tokens, --max-running and friends) and the engine built from
// them, shared by serve, replay, chat, batch and generate.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "core/thread_pool.h"
#include "models/transformer.h"
#include "runner/serving_engine.h"

namespace radixlm::cli {

void AddEngineOptions(CLI::App* cmd, EngineOptions* o);
// serve and chat: a chat history comes back as text, so the next turn's tokens can leave the
// cached path inside the previous reply (its text tokenizes otherwise than it was generated, or
// the template rewrites it, as Qwen3.5's drops the reasoning); on a hybrid the deepest exact state
// before that point is the previous prompt's end. So those commands keep every prompt end at
// least 32 tokens past the state its request started from (a user message's worth).
// Call before AddEngineOptions (its help shows the default).
void ChatServingDefaults(EngineOptions* o);
// --speculate, --draft-max, --spec-max-rows (part of AddEngineOptions; for commands that take
// only these).
void AddSpeculateOptions(CLI::App* cmd, EngineOptions* o);

// The serving engine (runner/serving_engine.h) from the command's options; prints the error and
// exits when the options do not fit the model. model_options: where the weights came from, for
// the disk tier's fingerprint (needed with --cache-dir); sampled_vocab: the tokenizer's size.
std::unique_ptr<runner::ServingEngine> MakeServingEngineOrExit(models::Transformer& model, core::ThreadPool& pool,
                                                               const EngineOptions& o, core::DType kv_dtype,
                                                               const ModelOptions* model_options = nullptr,
                                                               int64_t sampled_vocab = 0);

}  // namespace radixlm::cli
