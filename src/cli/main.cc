// radixlm: the command-line program. Composition root only: subcommands live in commands.cc.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"radixlm: an LLM inference engine where a shared prefix is computed once"};
  app.require_subcommand(1);
  radixlm::cli::RegisterInfo(app);
  radixlm::cli::RegisterGenerate(app);
  radixlm::cli::RegisterLogits(app);
  radixlm::cli::RegisterBench(app);
  radixlm::cli::RegisterExport(app);
  radixlm::cli::RegisterTokenize(app);
  radixlm::cli::RegisterChat(app);
  radixlm::cli::RegisterServe(app);
  radixlm::cli::RegisterReplay(app);
  radixlm::cli::RegisterSimulate(app);
  radixlm::cli::RegisterRerank(app);
  radixlm::cli::RegisterEmbed(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
