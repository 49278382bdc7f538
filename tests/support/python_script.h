#pragma once
// Runs Debian's /usr/bin/python3 for tests that compare against numpy, nibabel, torch or the MLPerf reference
// code. Tests skip when that python lacks a module they need, so each layer still tests elsewhere. Usage:
//
//   const PythonRun reference = run_python_script(SCRIPT, arguments);
//   ASSERT_TRUE(succeeded(reference)) << "is python3-torch installed?";  // EXPECT_TRUE where the test goes on
//
// A helper that returns what the reference computed cannot ASSERT; it takes or_throw(run_python_script(...)),
// which stops the test as an ASSERT would, with the same message.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace trainbench::testing {

// Whether /usr/bin/python3 has the top-level `module` installed. Found, not imported: importing torch costs 2 s
// of CPU, and tests ask this before every reference run; a broken install fails the reference script that imports it.
inline bool python_has(const std::string& module) {
  const std::string command = "/usr/bin/python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(\"" +
                              module + "\") is None)' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// One run of /usr/bin/python3: the command line, its exit code (128 + the signal that ended it), its stdout and
// the end of its stderr (which a failure message shows instead of the test's terminal).
struct PythonRun {
  std::string command;
  int exit_code = -1;
  std::string output;
  std::string errors;

  bool ok() const { return exit_code == 0; }
  // The reference scripts exit 77 where the MLPerf reference code they import is absent: a skip, not a failure.
  bool missing_reference_code() const { return exit_code == 77; }
  std::string failure() const {
    return "reference failed (exit " + std::to_string(exit_code) + "): " + command +
           (errors.empty() ? "" : "\n... its stderr ends:\n" + errors);
  }
};

// `/usr/bin/python3 <arguments>` (arguments as the shell reads them).
inline PythonRun run_python(const std::string& arguments) {
  constexpr size_t kErrorTail = 4000;  // a traceback's last frames and its message
  PythonRun run;
  run.command = "/usr/bin/python3 " + arguments;
  std::string errors_path = (std::filesystem::temp_directory_path() / "trainbench_python_stderr_XXXXXX").string();
  const int errors_file = ::mkstemp(errors_path.data());
  if (errors_file >= 0) ::close(errors_file);
  FILE* pipe = ::popen((run.command + (errors_file >= 0 ? " 2>" + errors_path : "")).c_str(), "r");
  char buffer[65536];
  size_t read = 0;
  while (pipe && (read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, read);
  const int status = pipe ? ::pclose(pipe) : -1;
  if (status != -1) run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (errors_file >= 0) {
    std::ifstream errors(errors_path, std::ios::binary);
    run.errors.assign(std::istreambuf_iterator<char>(errors), std::istreambuf_iterator<char>());
    if (run.errors.size() > kErrorTail) run.errors.erase(0, run.errors.size() - kErrorTail);
    std::remove(errors_path.c_str());
  }
  return run;
}

// `/usr/bin/python3 <script> <arguments>`.
inline PythonRun run_python_script(const std::string& script, const std::string& arguments) {
  return run_python(script + " " + arguments);
}

// For ASSERT_TRUE and EXPECT_TRUE: on failure the message names the command and shows its stderr's end.
inline ::testing::AssertionResult succeeded(const PythonRun& run) {
  if (run.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << run.failure();
}

// `run`, or an exception with its failure (gtest fails the test with it) where it failed.
inline PythonRun or_throw(PythonRun run) {
  if (!run.ok()) throw std::runtime_error(run.failure());
  return run;
}

}  // namespace trainbench::testing
