// trainbench: time-to-train benchmarks under the MLPerf Training rules. Subcommands come from each layer
// (cli/commands.h); main only parses, dispatches and turns errors into exit codes: 0 ok, 1 a check failed or
// a run did not converge, 2 bad input (a flag, a file, a setting: the message names it), 3 an unexpected
// failure (the message says what; a run it hit ends its log with run_stop "aborted").
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/provenance.h"

namespace {

constexpr int kBadInput = 2;
constexpr int kUnexpectedFailure = 3;

// The first line of an exception's message (LibTorch's c10::Error appends a stack trace), printable: a message
// may quote a file name, and a name with a newline must not start a line of its own (a forged `:::MLLOG` line).
std::string first_line(const char* message) {
  const std::string text(message);
  return trainbench::printable(text.substr(0, text.find('\n')), 4096);
}

// The last resort, for an exception that escapes a thread: a message and an exit code, not "terminate called".
[[noreturn]] void on_terminate() {
  std::string reason = "terminated without an exception";
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      reason = first_line(error.what());
    } catch (...) {
      reason = "an exception of unknown type";
    }
  }
  const std::string line = "trainbench: unexpected failure: " + reason + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  std::_Exit(kUnexpectedFailure);
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  trainbench::keep_freed_memory_for_reuse();
  CLI::App app{"trainbench: measures how fast a system trains neural networks to a target quality, under the "
               "rules of MLPerf Training v1.1, and checks and reports the results."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainbench ") + trainbench::provenance::kVersion + " (" +
                                        trainbench::provenance::kGitRevision + ", LibTorch " +
                                        trainbench::provenance::kTorchVersion + ")");
  trainbench::cli::CommandContext context;
  try {
    // Inside the try: defaults read the environment (--threads divides the cores among the ranks RANK and
    // LOCAL_WORLD_SIZE name), and a bad variable is bad input.
    trainbench::cli::add_training_commands(app, context);
    trainbench::cli::add_review_commands(app, context);
    trainbench::cli::add_launch_command(app, context);
    trainbench::cli::add_probe_commands(app, context);
    trainbench::cli::add_coco_commands(app, context);
    trainbench::cli::add_predict_commands(app, context);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    // CLI11's own message quotes the value (a file name), so it goes through printable() too.
    std::cerr << trainbench::printable(error.what(), 4096) << "\nRun with --help for more information.\n";
    return kBadInput;
  } catch (const trainbench::Error& error) {
    std::cerr << "trainbench: " << trainbench::printable(error.what(), 4096) << "\n";
    return kBadInput;
  } catch (const std::filesystem::filesystem_error& error) {
    // A path the user gave that the file system refuses (too long, not a directory, no permission).
    std::cerr << "trainbench: " << trainbench::printable(error.path1().string(), 4096) << ": " << error.code().message()
              << "\n";
    return kBadInput;
  } catch (const std::exception& error) {
    std::cerr << "trainbench: unexpected failure: " << first_line(error.what()) << "\n";
    return kUnexpectedFailure;
  }
  return context.exit_code;
}
