#pragma once
// The rule files under rules/ compiled into the binary (src/review/CMakeLists.txt generates the list from
// the folder, so a new ruleset needs no code change).
#include <string>
#include <vector>

namespace trainbench::review {

struct EmbeddedRuleFile {
  std::string path;  // relative to rules/, e.g. "training_1.1.0/rules.json"
  const char* text;
};

std::vector<EmbeddedRuleFile> embedded_rule_files();

}  // namespace trainbench::review
