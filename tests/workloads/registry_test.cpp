// The registry is the one list of benchmarks: every folder under src/workloads/ is registered, every preset
// of every benchmark describes itself (target from the preset, schedule, hyperparameters) without data, and
// the generated table in docs/benchmarks.md matches it.
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "util/atomic_file.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

TEST(Registry, EveryBenchmarkFolderIsRegisteredAndNothingElse) {
  std::set<std::string> folders, registered;
  for (const auto& item : fs::directory_iterator(TRAINBENCH_WORKLOADS_SOURCE_DIR))
    if (item.is_directory()) folders.insert(item.path().filename().string());
  for (const auto& entry : workload_registry()) {
    registered.insert(entry.name);
    EXPECT_TRUE(entry.make_trainer) << entry.name << ": run, bench, checkpoint export and --save-model build through it";
  }
  EXPECT_EQ(folders, registered);
}

TEST(Registry, EveryPresetDescribesItselfWithATargetFromThePreset) {
  for (const auto& entry : workload_registry()) {
    const std::vector<std::string> presets = Config::preset_names(entry.name, entry.presets_json);
    for (const char* required : {"tiny", "mini", "reference"})
      EXPECT_NE(std::find(presets.begin(), presets.end(), required), presets.end()) << entry.name << " has no " << required;
    for (const std::string& preset : presets) {
      SCOPED_TRACE(entry.name + "/" + preset);
      WorkloadSettings settings;
      settings.config = preset_config(entry, preset, {});  // every preset satisfies its setting rules
      // The reference presets train in fp16, as NVIDIA's v1.1 submissions did (fp16 needs CUDA); GPT-3's in bf16,
      // as NVIDIA's v3.0 ones did.
      EXPECT_EQ(settings.config.string("precision"), preset != "reference"  ? "fp32"
                                                     : entry.name == "gpt3" ? "bf16"
                                                                            : "fp16");
      if (preset == "reference") {
        // Their loaders also take more threads than a small test machine has CPUs, which a run refuses, and
        // GPT-3's layout takes 64 ranks.
        std::vector<std::string> overrides{"precision=fp32"};
        if (settings.config.values().contains("loader_threads")) overrides.push_back("loader_threads=1");
        if (entry.name == "gpt3") overrides.insert(overrides.end(), {"tensor_parallel=1", "pipeline_parallel=1"});
        settings.config = preset_config(entry, preset, overrides);
      }
      settings.device = "cpu";
      const WorkloadDescription description = entry.create(settings)->describe();
      EXPECT_EQ(description.benchmark, entry.name);
      EXPECT_EQ(description.preset, preset);
      EXPECT_EQ(description.target.threshold.to_json(), settings.config.values().at("target"));
      EXPECT_EQ(description.uses_dataset, entry.uses_dataset());
      EXPECT_FALSE(description.schedule.blocks().empty());
      EXPECT_EQ(description.effective_config, settings.config.values());
      // The presets a user can generate data for say how; the reference needs the real dataset.
      if (entry.make_dataset) {
        EXPECT_EQ(settings.config.values().contains("dataset"), preset != "reference");
      }
    }
  }
}

// A rule no preset uses is a setting that was renamed or removed.
TEST(Registry, EverySettingRuleIsASettingOfSomePreset) {
  for (const auto& entry : workload_registry()) {
    std::set<std::string> used;
    for (const std::string& preset : Config::preset_names(entry.name, entry.presets_json)) {
      const Config config = Config::from_presets(entry.name, entry.presets_json, preset, {});  // items() must not outlive it
      for (const auto& [key, value] : config.values().items()) used.insert(key);
    }
    for (const std::string& name : setting_rules(entry).names()) EXPECT_TRUE(used.count(name)) << entry.name << ": " << name;
  }
}

TEST(Registry, ASettingOutsideItsRuleIsRefusedNamingItAndTheRange) {
  EXPECT_EQ(testing::error_message([] { preset_config(find_workload("unet3d"), "tiny", {"batch_size=0"}); })
                .find("--set batch_size=0: expected an integer from 1 to "),
            0u);
  EXPECT_EQ(testing::error_message([] { preset_config(find_workload("resnet"), "tiny", {"precision=fp8"}); }),
            "--set precision=fp8: expected one of fp32, bf16, fp16, got \"fp8\" (" +
                std::string("Training precision: fp32, bf16 autocast (CPU or CUDA), or fp16 autocast with dynamic loss "
                            "scaling (CUDA only); fp32 master weights always)"));
}

TEST(Registry, SettingsHelpListsEverySettingOfThePreset) {
  for (const auto& entry : workload_registry()) {
    const std::string help = settings_help(entry, "tiny");
    const Config tiny = Config::from_presets(entry.name, entry.presets_json, "tiny", {});
    for (const auto& [key, value] : tiny.values().items())
      EXPECT_NE(help.find("\n  " + key + (value.is_object() ? ": " : " = ")), std::string::npos) << entry.name << ": " << key;
  }
}

TEST(Registry, UnknownBenchmarkNamesTheKnownOnes) {
  EXPECT_EQ(testing::error_message([] { find_workload("resnet50"); }),
            "benchmark 'resnet50': unknown (expected one of: " + benchmark_names() + ")");
}

TEST(Registry, DocsBenchmarkTableIsGeneratedFromTheRegistry) {
  const std::string doc = read_file(TRAINBENCH_BENCHMARKS_DOC);
  EXPECT_NE(doc.find(benchmark_table_markdown()), std::string::npos)
      << "docs/benchmarks.md is stale: regenerate its table with `trainbench benchmarks --markdown`";
}

}  // namespace
}  // namespace trainbench
