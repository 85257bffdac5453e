// Options and helpers shared by the CLI subcommands.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/loader.h"
#include "models/presets.h"

namespace radixlm::cli {

struct ModelOptions {
  std::string model = models::kDefaultModel;
  std::string dtype;   // empty = the file's own (f32 stays f32, f16/bf16 -> bf16)
  int threads = 0;     // 0 = one per core
};

void AddModelOptions(CLI::App* cmd, ModelOptions* o, bool positional_model = false);
core::StatusOr<std::unique_ptr<models::Transformer>> LoadFromOptions(const ModelOptions& o);
core::StatusOr<std::vector<int32_t>> ParseIds(const std::string& csv);
// Prints the status to stderr and exits with code 1 when not OK.
void ExitIfError(const core::Status& st);

}  // namespace radixlm::cli
