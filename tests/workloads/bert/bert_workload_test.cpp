// What the BERT workload refuses when it is made, before a run's log opens: the settings whose bounds are
// other settings; and its typed settings struct, held to settings.json.
#include <gtest/gtest.h>

#include "support/error_message.h"
#include "support/typed_settings.h"
#include "workloads/bert/settings.h"
#include "workloads/registry.h"

namespace trainbench::bert {
namespace {

TEST(BertSettings, BoundsThatAreOtherSettingsAreRefusedByNameWhenTheWorkloadIsMade) {
  const WorkloadEntry& entry = find_workload("bert");
  const auto refusal = [&](const std::vector<std::string>& overrides) {
    WorkloadSettings settings;
    settings.config = Config::from_presets("bert", entry.presets_json, "tiny", overrides);
    settings.device = "cpu";
    return testing::error_message([&] { entry.create(settings); });
  };
  EXPECT_EQ(refusal({"max_predictions=33"}),
            "bert/tiny: max_predictions: 33 is more than seq_length 32: a sequence has no more tokens to mask");
  EXPECT_EQ(refusal({"eval_interval_samples=24001"}),
            "bert/tiny: eval_interval_samples: 24001 is more than max_samples 24000: the run would end before its first "
            "evaluation");
  EXPECT_EQ(refusal({"max_predictions=32", "eval_interval_samples=24000"}), "(no Error thrown)");
}

TEST(BertSettings, TheStructReadsEverySettingThatHasARule) {
  testing::expect_settings_struct_matches_rules<Settings>("bert");
}

}  // namespace
}  // namespace trainbench::bert
