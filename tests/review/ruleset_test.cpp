#include "review/ruleset.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

TEST(Ruleset, EmbeddedV11LoadsWithEveryConfigTheChecksNeed) {
  EXPECT_EQ(embedded_ruleset_versions(),
            (std::vector<std::string>{"1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0", "4.0.0", "4.1.0", "5.0.0",
                                      "5.1.0", "6.0.0", "6.1.0"}));
  const Ruleset& ruleset = testing::ruleset_1_1();
  EXPECT_EQ(ruleset.version, "1.1.0");
  for (const char* config :
       {"common", "closed_common", "open_common", "closed_resnet", "closed_resnet_lars", "closed_resnet_sgd",
        "closed_bert", "closed_dlrm", "closed_ssd", "closed_maskrcnn", "closed_rnnt", "closed_unet3d", "closed_minigo"})
    EXPECT_TRUE(ruleset.configs.count(config)) << config;
  // Every benchmark a division config can pull in exists for both divisions.
  for (const auto& [name, rules] : ruleset.benchmarks) {
    EXPECT_TRUE(ruleset.configs.count("closed_" + name)) << name;
    EXPECT_TRUE(ruleset.configs.count("open_" + name)) << name;
  }
  EXPECT_EQ(ruleset.benchmark("unet3d")->runs, 40);
  EXPECT_EQ(ruleset.benchmark("unet3d")->drop_each_side, 4);
  // The rcp_checker reads BERT's eval epoch_num unless given --bert_train_samples.
  EXPECT_EQ(ruleset.benchmark("bert")->convergence, "epoch_num");
  EXPECT_TRUE(ruleset.benchmark("bert")->train_samples_convergence);
  EXPECT_FALSE(ruleset.benchmark("resnet")->train_samples_convergence);
  EXPECT_EQ(ruleset.rcp.epoch_decimals, 3);
  // The checker allows 30 minutes of initialization, the rules text 20.
  const auto& init_stop = *std::find_if(ruleset.configs.at("common").keys.begin(),
                                        ruleset.configs.at("common").keys.end(),
                                        [](const KeyRule& rule) { return rule.key == "init_stop"; });
  EXPECT_EQ(init_stop.within_ms, 30 * 60000);
  ASSERT_TRUE(init_stop.rules_text.has_value());
  EXPECT_EQ(init_stop.rules_text->within_ms, 20 * 60000);
  EXPECT_EQ(ruleset.benchmark("minigo")->rcp_table, "");
  EXPECT_EQ(ruleset.benchmark("nope"), nullptr);
}

TEST(Ruleset, ResnetTensorPatternsExpandTo161Names) {
  const auto& tensors = testing::ruleset_1_1().configs.at("closed_resnet").tensors;
  ASSERT_TRUE(tensors.has_value());
  EXPECT_EQ(tensors->expected.size(), 161u);  // the NVIDIA log's 161 weights_initialization lines
  EXPECT_EQ(testing::ruleset_1_1().configs.at("closed_bert").tensors->expected.size(), 5u + 24u * 16u + 10u);
  // The END checks of the official closed_ssd, closed_maskrcnn and closed_unet3d YAML files.
  EXPECT_EQ(testing::ruleset_1_1().configs.at("closed_ssd").tensors->expected.size(), 119u);
  EXPECT_EQ(testing::ruleset_1_1().configs.at("closed_maskrcnn").tensors->expected.size(), 21u);
  EXPECT_EQ(testing::ruleset_1_1().configs.at("closed_unet3d").tensors->expected.size(), 50u);
}

TEST(Ruleset, BraceExpansion) {
  EXPECT_EQ(expand_braces("a{1..3}"), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(expand_braces("{x,y}_{1..2}").size(), 4u);
  EXPECT_EQ(expand_braces("plain"), std::vector<std::string>{"plain"});
  EXPECT_EQ(expand_braces("open{only"), std::vector<std::string>{"open{only"});
}

TEST(Ruleset, LoadsFromARulesFolder) {
  const Ruleset ruleset = load_ruleset("1.1.0", REVIEW_RULES_DIR);
  EXPECT_EQ(ruleset.rules_dir, REVIEW_RULES_DIR);
  EXPECT_TRUE(read_ruleset_file(ruleset, "rcps_resnet.json").has_value());
  EXPECT_FALSE(read_ruleset_file(ruleset, "../training_1.1.0/rules.json").has_value());
  EXPECT_THROW(load_ruleset("9.9.9"), Error);
  EXPECT_THROW(load_ruleset("9.9.9", REVIEW_RULES_DIR), Error);
}

TEST(Ruleset, RejectsTyposAndMalformedRules) {
  const auto parse = [](const std::string& configs) {
    return parse_ruleset(
        R"({"ruleset": "t", "native_rules": ["*"], "entry_configs": ["common"], "benchmarks": {}, "configs": )" +
            configs + "}",
        "test");
  };
  EXPECT_NO_THROW(parse(R"({"common": {"keys": {"k": {"req": "exactly_one", "value": {"gt": 0}}}}})"));
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"reqq": "exactly_one"}}}})"), Error);
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"req": "twice"}}}})"), Error);
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"req": "at_least_one_or"}}}})"), Error);
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"value": {"gt": "zero"}}}}})"), Error);
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"value": {"between": [1, 2]}}}}})"), Error);
  EXPECT_THROW(parse(R"({"common": {"target": {"key": "a", "higher_is_better": true}}})"), Error);
  EXPECT_THROW(parse(R"({"other": {}})"), Error);
  const std::string limit = R"("within_ms_of_first": {"key": "a", "ms": 5})";
  EXPECT_NO_THROW(
      parse(R"({"common": {"keys": {"k": {"rules_text": {"source": "s", "quote": "q", )" + limit + "}}}}}"));
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"rules_text": {"source": "s", )" + limit + "}}}}}"), Error);
  EXPECT_THROW(parse(R"({"common": {"keys": {"k": {"rules_text": {"source": "s", "quote": "q"}}}}})"), Error);
  EXPECT_THROW(parse_ruleset("{", "test"), Error);
}

}  // namespace
}  // namespace trainbench::review
