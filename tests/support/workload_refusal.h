#pragma once
// For tests of the settings a workload refuses when it is built, before a run opens its log: the message of
// the Error that checking `benchmark`'s `preset` with `overrides` against its rules, then building it on the
// CPU, throws.
#include <string>
#include <vector>

#include "support/error_message.h"
#include "workloads/registry.h"

namespace trainbench::testing {

inline std::string construction_error(const std::string& benchmark, const std::string& preset,
                                      const std::vector<std::string>& overrides) {
  const WorkloadEntry& entry = find_workload(benchmark);
  return error_message([&] {
    WorkloadSettings settings;
    settings.config = preset_config(entry, preset, overrides);
    settings.device = "cpu";
    entry.create(settings);
  });
}

}  // namespace trainbench::testing
