#pragma once
// Each layer contributes its subcommands to the one CLI11 app. A command reports its verdict through
// CommandContext::exit_code (0 ok, 1 a check failed / a run did not converge); bad input throws
// trainbench::Error, which main() prints and turns into exit code 2.
#include <CLI/CLI.hpp>

namespace trainbench::cli {

struct CommandContext {
  int exit_code = 0;
};

void add_training_commands(CLI::App& app, CommandContext& context);  // run, bench, data
void add_review_commands(CLI::App& app, CommandContext& context);    // review, system, report
void add_launch_command(CLI::App& app, CommandContext& context);     // launch
void add_probe_commands(CLI::App& app, CommandContext& context);     // probe compute, probe comm, probe storage
void add_coco_commands(CLI::App& app, CommandContext& context);      // coco-eval

}  // namespace trainbench::cli
