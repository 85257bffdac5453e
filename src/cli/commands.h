// Subcommands of the radixlm program. Each Register* adds one CLI11 subcommand whose
// callback builds what it needs (model, pools) and runs; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

namespace radixlm::cli {

void RegisterInfo(CLI::App& app);
void RegisterGenerate(CLI::App& app);
void RegisterLogits(CLI::App& app);
void RegisterPerplexity(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterExport(CLI::App& app);
void RegisterTokenize(CLI::App& app);
void RegisterChat(CLI::App& app);
void RegisterServe(CLI::App& app);
void RegisterReplay(CLI::App& app);
void RegisterSimulate(CLI::App& app);
void RegisterRerank(CLI::App& app);
void RegisterEmbed(CLI::App& app);
void RegisterBatch(CLI::App& app);
void RegisterGrammar(CLI::App& app);
void RegisterTemplate(CLI::App& app);

}  // namespace radixlm::cli
