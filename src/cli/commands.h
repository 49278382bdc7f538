#pragma once
// Each layer contributes its subcommands to the one CLI11 app. A command reports its verdict through
// CommandContext::exit_code (0 ok, 1 a check failed / a run did not converge); bad input throws
// trainbench::Error, which main() prints and turns into exit code 2.
#include <CLI/CLI.hpp>

namespace trainbench::cli {

struct CommandContext {
  int exit_code = 0;
};

// Checks for numeric flags whose messages read "expected a whole number of at least 1, got '0'" (CLI11's own
// range checks print the type's whole range). Every numeric flag of every command uses one.
CLI::Validator whole_number(int64_t minimum, int64_t maximum = INT64_MAX);
CLI::Validator number_above(double minimum);     // seconds, factors: > minimum
CLI::Validator number_at_least(double minimum);  // >= minimum
CLI::Validator number_between(double above, double at_most);  // counts and rates: > above, <= at_most

// A string flag whose value goes into a JSON log or file must be valid UTF-8; the error names the flag.
void require_utf8(const std::string& flag, const std::string& value);

// 1 .. the CPUs this process may run on (harness/cpu_contention.h's usable_cpu_count): every --threads.
CLI::Validator thread_count();

// Where a command writes, checked when the flags are read, before any work (AtomicFile checks again when it
// opens): an output file's path holds nothing yet or a regular file to replace, never a directory, device, FIFO or
// socket; an output folder's holds nothing yet or a directory.
CLI::Validator output_file();
CLI::Validator output_folder();

void add_training_commands(CLI::App& app, CommandContext& context);  // run, bench, data
void add_review_commands(CLI::App& app, CommandContext& context);    // review, system, report
void add_launch_command(CLI::App& app, CommandContext& context);     // launch
void add_probe_commands(CLI::App& app, CommandContext& context);     // probe compute, probe comm, probe storage
void add_coco_commands(CLI::App& app, CommandContext& context);      // coco-eval
void add_predict_commands(CLI::App& app, CommandContext& context);   // predict, predict-check

}  // namespace trainbench::cli
