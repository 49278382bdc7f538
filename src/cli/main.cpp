// trainbench: time-to-train benchmarks under the MLPerf Training rules. Subcommands come from each layer
// (cli/commands.h); main only parses, dispatches and turns errors into exit codes.
#include <iostream>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/provenance.h"

int main(int argc, char** argv) {
  trainbench::keep_freed_memory_for_reuse();
  CLI::App app{"trainbench: measures how fast a system trains neural networks to a target quality, under the "
               "rules of MLPerf Training v1.1, and checks and reports the results."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainbench ") + trainbench::provenance::kVersion + " (" +
                                        trainbench::provenance::kGitRevision + ", LibTorch " +
                                        trainbench::provenance::kTorchVersion + ")");
  trainbench::cli::CommandContext context;
  trainbench::cli::add_training_commands(app, context);
  trainbench::cli::add_review_commands(app, context);
  trainbench::cli::add_launch_command(app, context);
  trainbench::cli::add_probe_commands(app, context);
  trainbench::cli::add_coco_commands(app, context);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const trainbench::Error& error) {
    std::cerr << "trainbench: " << error.what() << "\n";
    return 2;
  }
  return context.exit_code;
}
