#pragma once
// For tests of one layer's commands without the trainbench binary (and so without LibTorch): parses the arguments
// through CLI11 as main() does and captures stdout, except that a trainbench::Error propagates to the test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/commands.h"

namespace trainbench::testing {

struct CommandOutcome {
  int exit_code = 0;
  std::string out;
};

// Runs `trainbench <args>` with the commands that add_commands (e.g. cli::add_review_commands) registers.
inline CommandOutcome run_commands(void (*add_commands)(CLI::App&, cli::CommandContext&),
                                   std::vector<std::string> args) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  cli::CommandContext context;
  add_commands(app, context);
  args.insert(args.begin(), "trainbench");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  ::testing::internal::CaptureStdout();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  return {context.exit_code, ::testing::internal::GetCapturedStdout()};
}

}  // namespace trainbench::testing
