#pragma once
// The tensor names the embedded v1.1 rules expect in a benchmark's weights_initialization lines (the END
// checks of the official closed_<benchmark>.yaml), for the tests that hold a reference model to them.
#include <set>
#include <string>

#include "review/ruleset.h"

namespace trainbench::testing {

inline std::set<std::string> rules_tensor_names(const std::string& config) {
  const review::Ruleset rules = review::load_ruleset("1.1.0");
  const auto& tensors = rules.configs.at(config).tensors;
  return tensors ? std::set<std::string>(tensors->expected.begin(), tensors->expected.end()) : std::set<std::string>{};
}

}  // namespace trainbench::testing
