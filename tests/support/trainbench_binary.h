#pragma once
// For end-to-end tests: runs the trainbench binary (TRAINBENCH_BINARY, set by CMake) with arguments through
// the shell and returns its exit code and its stdout and stderr together.
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace trainbench::testing {

struct BinaryResult {
  int exit_code = -1;
  std::string output;
};

// `environment`: variable assignments for the shell to put before the command ("RANK=3 WORLD_SIZE=2").
inline BinaryResult run_trainbench(const std::string& arguments, const std::string& environment = "") {
  BinaryResult result;
  FILE* pipe = ::popen((environment + " " + TRAINBENCH_BINARY + " " + arguments + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace trainbench::testing
