// radixlm: the command-line program. Composition root only: subcommands live in commands.cc.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"radixlm: an LLM inference engine where a shared prefix is computed once"};
  app.require_subcommand(1);
  radixlm::cli::RegisterInfo(app);
  radixlm::cli::RegisterGenerate(app);
  radixlm::cli::RegisterLogits(app);
  radixlm::cli::RegisterPerplexity(app);
  radixlm::cli::RegisterBench(app);
  radixlm::cli::RegisterExport(app);
  radixlm::cli::RegisterTokenize(app);
  radixlm::cli::RegisterChat(app);
  radixlm::cli::RegisterServe(app);
  radixlm::cli::RegisterReplay(app);
  radixlm::cli::RegisterSimulate(app);
  radixlm::cli::RegisterRerank(app);
  radixlm::cli::RegisterEmbed(app);
  radixlm::cli::RegisterBatch(app);
  radixlm::cli::RegisterGrammar(app);
  radixlm::cli::RegisterTemplate(app);
  // Errors a user can cause come back as Status; this is the last line for anything that
  // still escapes (memory refused, say): one clear message and exit 1, not std::terminate.
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "radixlm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
