#pragma once
// Runs Debian's /usr/bin/python3 for tests that compare against numpy, nibabel or torch. Tests skip when that
// python lacks a module they need, so each layer still tests elsewhere.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace trainbench::testing {

inline bool python_has(const std::string& module) {
  const std::string command = "/usr/bin/python3 -c 'import " + module + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// stdout of `/usr/bin/python3 <script> <arguments>`; fails the test when the script fails.
inline std::string run_python_script(const std::string& script, const std::string& arguments) {
  const std::string command = "/usr/bin/python3 " + script + " " + arguments;
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buffer[65536];
  size_t read = 0;
  while (pipe && (read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, read);
  const int status = pipe ? ::pclose(pipe) : -1;
  EXPECT_EQ(status, 0) << "reference failed: " << command;
  return out;
}

}  // namespace trainbench::testing
