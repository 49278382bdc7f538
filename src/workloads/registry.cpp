#include "workloads/registry.h"

#include <map>

#include "harness/setting_rules.h"
#include "util/error.h"

// The benchmarks, in the order the rules list them. Each name is a folder under src/workloads/ that
// defines trainbench::<name>::registry_entry().
#define TRAINBENCH_BENCHMARKS(X) X(resnet) X(ssd) X(maskrcnn) X(unet3d) X(rnnt) X(bert) X(dlrm) X(minigo) X(gpt3)

// Each folder's settings.json is embedded as trainbench_settings_<name> (src/workloads/CMakeLists.txt).
#define TRAINBENCH_DECLARE_ENTRY(name)                 \
  extern const char* const trainbench_settings_##name; \
  namespace trainbench::name {                         \
  WorkloadEntry registry_entry();                      \
  }
TRAINBENCH_BENCHMARKS(TRAINBENCH_DECLARE_ENTRY)
#undef TRAINBENCH_DECLARE_ENTRY
extern const char* const trainbench_settings_shared;  // src/workloads/settings.json: the keys every benchmark has

namespace trainbench {

const std::vector<WorkloadEntry>& workload_registry() {
#define TRAINBENCH_ENTRY(name) name::registry_entry(),
  static const std::vector<WorkloadEntry> entries = {TRAINBENCH_BENCHMARKS(TRAINBENCH_ENTRY)};
#undef TRAINBENCH_ENTRY
  return entries;
}

const WorkloadEntry& find_workload(const std::string& name) {
  for (const auto& entry : workload_registry())
    if (entry.name == name) return entry;
  fail("benchmark '" + name + "'", "unknown (expected one of: " + benchmark_names() + ")");
}

SettingRules setting_rules(const WorkloadEntry& entry) {
#define TRAINBENCH_SETTINGS(name) {#name, trainbench_settings_##name},
  static const std::map<std::string, const char*> documents = {TRAINBENCH_BENCHMARKS(TRAINBENCH_SETTINGS)};
#undef TRAINBENCH_SETTINGS
  return SettingRules::parse(entry.name, {trainbench_settings_shared, documents.at(entry.name)});
}

Config preset_config(const WorkloadEntry& entry, const std::string& preset, const std::vector<std::string>& overrides) {
  Config config = Config::from_presets(entry.name, entry.presets_json, preset, overrides);
  setting_rules(entry).check(config);
  return config;
}

std::string settings_help(const WorkloadEntry& entry, const std::string& preset) {
  return setting_rules(entry).help_text(Config::from_presets(entry.name, entry.presets_json, preset, {}));
}

std::string benchmark_names(const std::function<bool(const WorkloadEntry&)>& filter) {
  std::string names;
  for (const auto& entry : workload_registry())
    if (!filter || filter(entry)) names += (names.empty() ? "" : ", ") + entry.name;
  return names;
}

std::string preset_list(const WorkloadEntry& entry, const std::string& quote) {
  std::string list;
  for (const std::string& preset : Config::preset_names(entry.name, entry.presets_json))
    list += (list.empty() ? "" : ", ") + quote + preset + quote;
  return list;
}

std::string benchmark_table_markdown() {
  std::string table = "| benchmark | what it trains | presets | dataset (`--data`) |\n|---|---|---|---|\n";
  for (const auto& entry : workload_registry()) {
    const std::string presets = preset_list(entry, "`");
    std::string dataset = entry.uses_dataset() ? entry.dataset : "none (self-play)";
    if (entry.make_dataset) dataset += "; `data make " + entry.name + "` generates the tiny and mini sets";
    if (entry.prepare_dataset) dataset += "; `data prepare " + entry.name + "` converts the real one";
    table += "| `" + entry.name + "` | " + entry.summary + " | " + presets + " | " + dataset + " |\n";
  }
  return table;
}

}  // namespace trainbench
