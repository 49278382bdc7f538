#pragma once
// For tests of the settings a workload refuses when it is built, before a run opens its log: the message of
// the Error that building `benchmark`'s `preset` with `overrides` on the CPU throws.
#include <string>
#include <vector>

#include "support/error_message.h"
#include "workloads/registry.h"

namespace trainbench::testing {

inline std::string construction_error(const std::string& benchmark, const std::string& preset,
                                      const std::vector<std::string>& overrides) {
  const WorkloadEntry& entry = find_workload(benchmark);
  WorkloadSettings settings;
  settings.config = Config::from_presets(entry.name, entry.presets_json, preset, overrides);
  settings.device = "cpu";
  return error_message([&] { entry.create(settings); });
}

}  // namespace trainbench::testing
