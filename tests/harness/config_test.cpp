#include "harness/config.h"

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "support/fuzz_replay.h"

namespace trainbench {
namespace {

const char* const kPresets = R"({"mini": {"batch_size": 8, "base_learning_rate": 0.1, "optimizer": "sgd",
                                          "widths": [1, 2]},
                                 "reference": {"batch_size": 3264, "base_learning_rate": 10.5, "optimizer": "lars",
                                               "widths": [64]}})";

using trainbench::testing::error_message;

TEST(Config, AppliesOverridesOfTheSameType) {
  const Config config = Config::from_presets("resnet", kPresets, "mini", {"batch_size=16", "base_learning_rate=1", "optimizer=lars"});
  EXPECT_EQ(config.name(), "resnet/mini");
  EXPECT_EQ(config.integer("batch_size"), 16);
  EXPECT_DOUBLE_EQ(config.number("base_learning_rate"), 1.0);
  EXPECT_EQ(config.string("optimizer"), "lars");
  EXPECT_EQ(config.integers("widths"), (std::vector<int64_t>{1, 2}));
}

TEST(Config, RejectsUnknownPresetKeyAndType) {
  EXPECT_NE(error_message([] { Config::from_presets("resnet", kPresets, "huge", {}); }).find("'huge' is not a preset of resnet (expected one of: mini, reference)"),
            std::string::npos);
  EXPECT_NE(error_message([] { Config::from_presets("resnet", kPresets, "mini", {"batch=3"}); }).find("--set batch: not a setting of resnet/mini"),
            std::string::npos);
  EXPECT_NE(error_message([] { Config::from_presets("resnet", kPresets, "mini", {"batch_size=1.5"}); }).find("expected an integer, got a number"),
            std::string::npos);
  EXPECT_NE(error_message([] { Config::from_presets("resnet", kPresets, "mini", {"batch_size"}); }).find("expected key=value"),
            std::string::npos);
}

TEST(Config, LookupErrorsNameTheSetting) {
  const Config config = Config::from_presets("resnet", kPresets, "mini", {});
  EXPECT_NE(error_message([&] { config.integer("optimizer"); }).find("resnet/mini: optimizer: expected an integer, got a string"),
            std::string::npos);
  EXPECT_NE(error_message([&] { config.number("missing"); }).find("missing setting 'missing'"), std::string::npos);
}

}  // namespace
}  // namespace trainbench

// The config fuzz target's kept corpus (fuzz/corpus/config/): presets and --set lines.
extern "C" int fuzz_config(const uint8_t* data, size_t size);

namespace trainbench {
namespace {

TEST(ConfigFuzzCorpus, EveryInputIsAConfigOrANamedError) {
  EXPECT_GT(testing::replay_fuzz_corpus(FUZZ_CORPUS_DIR "/config", fuzz_config), 10u);
}

}  // namespace
}  // namespace trainbench
