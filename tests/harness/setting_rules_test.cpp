#include "harness/setting_rules.h"

#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench {
namespace {

using testing::error_message;

constexpr const char* kPresets = R"({
  "mini": {"batch_size": 32, "max_epochs": 8, "eval_first_epoch": 2, "learning_rate": 0.5, "optimizer": "sgd",
           "widths": [8, 16], "boundaries": [2, 4], "rates": [1.0, 0.1], "shuffle": true, "note": "",
           "dataset": {"images": 100, "noise": 0.1}}
})";

constexpr const char* kShared = R"({
  "note": {"type": "string", "about": "Free text"}
})";

constexpr const char* kRules = R"({
  "batch_size": {"type": "integer", "min": 1, "max": 1024, "about": "Global batch"},
  "max_epochs": {"type": "integer", "min": 1, "max": 1000, "about": "Epochs before the run gives up"},
  "eval_first_epoch": {"type": "integer", "min": 1, "max": "max_epochs", "about": "First evaluation"},
  "learning_rate": {"type": "number", "above": 0, "below": 10, "about": "Peak learning rate"},
  "optimizer": {"type": "string", "one_of": ["sgd", "lars"], "about": "Optimizer"},
  "widths": {"type": "list", "items": {"type": "integer", "min": 1, "max": 64}, "min_length": 1, "max_length": 3, "about": "Stage widths"},
  "boundaries": {"type": "list", "items": {"type": "integer", "min": 0, "max": "max_epochs"}, "increasing": true, "about": "Decay epochs"},
  "rates": {"type": "list", "items": {"type": "number", "min": 0, "max": 10}, "length": "boundaries", "about": "Rates"},
  "shuffle": {"type": "boolean", "about": "Shuffle each epoch"},
  "dataset": {"type": "object", "about": "The generated dataset", "settings": {
    "images": {"type": "integer", "min": 1, "max": 100000, "about": "Images to generate"},
    "noise": {"type": "number", "min": 0, "max": "images", "about": "Noise"}}}
})";

SettingRules rules() { return SettingRules::parse("toy", {kShared, kRules}); }

Config config(const std::vector<std::string>& overrides) { return Config::from_presets("toy", kPresets, "mini", overrides); }

// The message of the refusal, or "accepted".
std::string refusal(const std::vector<std::string>& overrides) {
  const std::string message = error_message([&] { rules().check(config(overrides)); });
  return message == "(no Error thrown)" ? "accepted" : message;
}

TEST(SettingRules, AcceptsThePresetAndValuesInsideTheirRules) {
  EXPECT_EQ(refusal({}), "accepted");
  EXPECT_EQ(refusal({"batch_size=1024", "learning_rate=9.5", "optimizer=lars", "eval_first_epoch=8", "widths=[64]",
                     "boundaries=[1,8]", "dataset.noise=0"}),
            "accepted");
  EXPECT_EQ(refusal({"learning_rate=2"}), "accepted");  // an integer is a fine number
}

TEST(SettingRules, RefusesAValueOutsideItsRangeNamingTheSettingTheRangeAndWhatItIs) {
  EXPECT_EQ(refusal({"batch_size=0"}), "--set batch_size=0: expected an integer from 1 to 1024, got 0 (Global batch)");
  EXPECT_EQ(refusal({"learning_rate=0"}),
            "--set learning_rate=0: expected a number above 0 and below 10, got 0 (Peak learning rate)");
  EXPECT_EQ(refusal({"learning_rate=1e400"}), "--set learning_rate: expected a number, got a string");  // beyond a double
  EXPECT_EQ(refusal({"optimizer=adam"}), "--set optimizer=adam: expected one of sgd, lars, got \"adam\" (Optimizer)");
  EXPECT_EQ(refusal({"dataset.images=0"}).find("--set dataset.images=0: expected an integer from 1 to 100000"), 0u);
}

TEST(SettingRules, BoundsNamingAnotherSettingUseItsValue) {
  EXPECT_EQ(refusal({"eval_first_epoch=9"}),
            "--set eval_first_epoch=9: expected an integer from 1 to max_epochs (8), got 9 (First evaluation)");
  // The user set max_epochs, so their setting is named, with the one it rules out.
  EXPECT_EQ(refusal({"max_epochs=1", "boundaries=[]", "rates=[]"}),
            "--set max_epochs=1: eval_first_epoch: expected an integer from 1 to max_epochs (1), got 2 (First evaluation)");
  EXPECT_EQ(refusal({"max_epochs=3"}),
            "--set max_epochs=3: boundaries element 2: expected an integer from 0 to max_epochs (3), got 4 (Decay epochs)");
  EXPECT_EQ(refusal({"max_epochs=3", "boundaries=[2,5]"}),  // both set: the one out of range is named
            "--set boundaries=[2,5]: element 2: expected an integer from 0 to max_epochs (3), got 5 (Decay epochs)");
  // A value outside its own rule is named as itself, before any bound it gives others.
  EXPECT_EQ(refusal({"max_epochs=0"}), "--set max_epochs=0: expected an integer from 1 to 1000, got 0 (Epochs before the run gives up)");
  EXPECT_EQ(refusal({"dataset.noise=101"}).find("--set dataset.noise=101: expected a number from 0 to images (100)"), 0u);
}

TEST(SettingRules, ListsCheckTheirLengthOrderAndEveryElement) {
  EXPECT_EQ(refusal({"widths=[]"}).find("--set widths=[]: expected a list of 1 to 3 values, each an integer from 1 to 64, got []"), 0u);
  EXPECT_EQ(refusal({"widths=[8,0]"}).find("--set widths=[8,0]: element 2: expected an integer from 1 to 64, got 0"), 0u);
  EXPECT_EQ(refusal({"boundaries=[4,2]"}).find("--set boundaries=[4,2]: element 2: expected a value above the one before it"), 0u);
  EXPECT_EQ(refusal({"rates=[1.0]"}).find("--set rates=[1.0]: expected a list of values, as many as boundaries has, each a number from 0 to 10, got [1.0]"), 0u);
  EXPECT_EQ(refusal({"boundaries=[2,4,6]", "rates=[1,0.5,0.1]"}), "accepted");
}

TEST(SettingRules, APresetKeyWithoutARuleIsRefused) {
  const Config unruled("toy/mini", {{"batch_size", 8}, {"colour", "red"}});
  EXPECT_EQ(error_message([&] { rules().check(unruled); }), "toy/mini: colour: has no rule in the benchmark's settings.json");
}

TEST(SettingRules, MalformedRulesAreRefusedWhenRead) {
  const auto parse_error = [](const std::string& document) {
    return error_message([&] { SettingRules::parse("toy", {document}); });
  };
  EXPECT_EQ(parse_error(R"({"a": {"type": "integer", "min": 0, "about": "x"}})"), "(no Error thrown)");
  EXPECT_NE(parse_error(R"({"a": {"type": "integer", "min": 0}})").find("toy settings.json: a: needs an \"about\" line"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"type": "integer", "minimum": 0, "about": "x"}})").find("\"minimum\" is not a field of a integer rule"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"type": "float", "about": "x"}})").find("\"type\" must be"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"type": "integer", "max": "b", "about": "x"}})").find("\"max\" names 'b'"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"type": "integer", "max": 1.5, "about": "x"}})").find("\"max\" must be a integer"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"type": "list", "about": "x"}})").find("needs \"items\""), std::string::npos);
  EXPECT_NE(parse_error("[" + std::string(100, '[') + std::string(101, ']')).find("nested deeper than 64"), std::string::npos);
  EXPECT_EQ(error_message([] { SettingRules::parse("toy", {kShared, kShared}); }),
            "toy settings.json: note: has a rule in the shared settings.json already");
}

TEST(SettingRules, HelpTextGivesEachSettingItsValueRangeAndMeaning) {
  const std::string help = rules().help_text(config({}));
  EXPECT_NE(help.find("Settings of toy/mini"), std::string::npos) << help;
  EXPECT_NE(help.find("  batch_size = 32\n      an integer from 1 to 1024. Global batch\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  eval_first_epoch = 2\n      an integer from 1 to max_epochs (8). First evaluation\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  dataset: The generated dataset\n  dataset.images = 100\n"), std::string::npos) << help;
}

}  // namespace
}  // namespace trainbench
