#pragma once
// Runs medical_reference.py with Debian's /usr/bin/python3 and returns what it printed. Tests skip when that
// python lacks the module a subcommand needs (nibabel, numpy or torch), so the layer still tests elsewhere.
#include <string>

#include <nlohmann/json.hpp>

#include "support/python_script.h"

namespace trainbench::medical::testing {

using trainbench::testing::python_has;

// stdout of `medical_reference.py <arguments>`; fails and stops the test when the script fails.
inline std::string run_reference(const std::string& arguments) {
  const auto run = trainbench::testing::run_python_script(TRAINBENCH_MEDICAL_REFERENCE_SCRIPT, arguments);
  return trainbench::testing::or_throw(run).output;
}

inline nlohmann::json run_reference_json(const std::string& arguments) { return nlohmann::json::parse(run_reference(arguments)); }

}  // namespace trainbench::medical::testing
