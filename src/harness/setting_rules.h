#pragma once
// What every setting of a benchmark may be: its type, its range and one line saying what it is, from the
// benchmark's settings.json (src/workloads/<benchmark>/settings.json, over the shared
// src/workloads/settings.json). The harness checks a preset with the user's overrides against them before
// any data is read, any workload is built or any log is opened, so a value the code cannot take is refused by
// name instead of crashing, hanging or ending in a committed log. docs/settings.md describes the format.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/config.h"

namespace trainbench {

class SettingRules {
 public:
  // `documents` are settings.json texts, later ones adding keys to earlier ones; a key given twice is an
  // error, as is a rule the checker does not understand (`source` names the benchmark in the message).
  static SettingRules parse(const std::string& source, const std::vector<std::string>& documents);

  // Throws Error when a value breaks its rule or a key has none. A key the user set is named as
  // "--set key=value", any other as "<benchmark>/<preset>: key".
  void check(const Config& config) const;

  // The settings that have a rule, top level only.
  std::vector<std::string> names() const;

  // --help-settings: each setting with its type, range, the preset's value and what it is.
  std::string help_text(const Config& config) const;

 private:
  nlohmann::json rules_ = nlohmann::json::object();
};

}  // namespace trainbench
