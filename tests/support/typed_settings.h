#pragma once
// Holds a benchmark's typed settings struct (harness/typed_settings.h) to the rules of its settings.json: the
// struct reads exactly the top-level settings that have a rule, less those the harness reads for every
// benchmark (the target, the step settings, the summary).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "harness/typed_settings.h"
#include "workloads/registry.h"

namespace trainbench::testing {

template <typename Settings>
void expect_settings_struct_matches_rules(const std::string& benchmark) {
  std::set<std::string> ruled;
  for (const std::string& name : setting_rules(find_workload(benchmark)).names()) ruled.insert(name);
  for (const char* shared : {"summary", "gradient_accumulation_steps", "precision", "target", "target_direction",
                             "target_metric"})
    ruled.erase(shared);
  std::set<std::string> read;
  for (const std::string& name : setting_names<Settings>())
    if (name.find('.') == std::string::npos) read.insert(name);
  EXPECT_EQ(read, ruled) << benchmark << ": the settings struct and settings.json name different settings";
}

}  // namespace trainbench::testing
