#pragma once
// Runs medical_reference.py with Debian's /usr/bin/python3 and returns what it printed. Tests skip when that
// python lacks the module a subcommand needs (nibabel, numpy or torch), so the layer still tests elsewhere.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainbench::medical::testing {

inline bool python_has(const std::string& module) {
  const std::string command = "/usr/bin/python3 -c 'import " + module + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// stdout of `medical_reference.py <arguments>`; fails the test when the script fails.
inline std::string run_reference(const std::string& arguments) {
  const std::string command = std::string("/usr/bin/python3 ") + TRAINBENCH_MEDICAL_REFERENCE_SCRIPT + " " + arguments;
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buffer[65536];
  size_t read = 0;
  while (pipe && (read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, read);
  const int status = pipe ? ::pclose(pipe) : -1;
  EXPECT_EQ(status, 0) << "reference failed: " << command;
  return out;
}

inline nlohmann::json run_reference_json(const std::string& arguments) { return nlohmann::json::parse(run_reference(arguments)); }

}  // namespace trainbench::medical::testing
