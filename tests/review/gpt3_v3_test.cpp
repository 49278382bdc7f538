// GPT-3 under ruleset 3.0.0: the embedded rules (what changed from 1.1.0), the pruned RCP table and its
// numbers against the official 3.0.0-rc2 rcp_checker, a 3-run package with its olympic score and the result
// summarizer's scaling.json, and which round reviews which logs.
#include <gtest/gtest.h>

#include "review/rcp.h"
#include "review/ruleset_choice.h"
#include "review/submission.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

using testing::dump;
using testing::find_finding;

const Ruleset& ruleset_3_0() {
  static const Ruleset ruleset = load_ruleset("3.0.0");
  return ruleset;
}

std::string fixture(const std::string& name) { return testing::test_path("logs_3.0.0/" + name); }

const KeyRule* rule_of(const Ruleset& ruleset, const std::string& config, const std::string& key) {
  for (const KeyRule& rule : ruleset.configs.at(config).keys)
    if (rule.key == key) return &rule;
  return nullptr;
}

TEST(Gpt3Ruleset30, IsTheChangesOfThreePointZeroOnTopOfOnePointOne) {
  const Ruleset& rules = ruleset_3_0();
  EXPECT_EQ(rules.version, "3.0.0");
  EXPECT_EQ(rules.base, "1.1.0");
  EXPECT_EQ(rules.round_name(), "v3.0");
  ASSERT_EQ(rules.benchmarks.size(), 8u);                           // v3.0's: dlrm_dcnv2 for dlrm, gpt3 for minigo
  EXPECT_EQ(rules.native_rules, std::vector<std::string>{"gpt3"});  // the others: the round's checker files
  EXPECT_EQ(rules.benchmark("gpt3")->runs, 3);
  EXPECT_EQ(rules.benchmark("gpt3")->drop_each_side, 1);
  EXPECT_FALSE(rules.configs.count("closed_resnet"));
  EXPECT_TRUE(rules.rcp.prune && rules.rcp.score_normalization && rules.rcp.bypass_covers_missing);
  EXPECT_EQ(rules.scoring.scaling_file, "scaling.json");
  EXPECT_EQ(rules.system_description.fields, testing::ruleset_1_1().system_description.fields);
  // The init limit moved from common to the division configs: 30 minutes closed, 4 hours open.
  EXPECT_TRUE(rule_of(rules, "common", "init_stop")->within_ms_of_first_key.empty());
  EXPECT_FALSE(rule_of(rules, "common", "init_stop")->rules_text.has_value());
  EXPECT_EQ(rule_of(rules, "closed_common", "init_stop")->within_ms, 30 * 60000.0);
  EXPECT_EQ(rule_of(rules, "open_common", "init_stop")->within_ms, 240 * 60000.0);
  const TargetRule& target = *rules.configs.at("closed_gpt3").target;
  EXPECT_FALSE(target.higher_is_better);
  EXPECT_EQ(target.threshold, 2.69);
  EXPECT_EQ(target.bound, 2.6);
  // 1.1.0 itself is unchanged by it.
  EXPECT_EQ(testing::ruleset_1_1().benchmark("gpt3"), nullptr);
  EXPECT_EQ(rule_of(testing::ruleset_1_1(), "common", "init_stop")->within_ms, 30 * 60000.0);
}

TEST(Gpt3Ruleset30, ABaseThatIsMissingOrAChangeOfTheNameIsRefused) {
  EXPECT_THROW(parse_ruleset(R"({"ruleset": "9.0.0", "base": "8.0.0", "changes": {}})", "x.json"), Error);
  EXPECT_THROW(parse_ruleset(R"({"ruleset": "9.0.0", "base": "1.1.0", "changes": {"ruleset": "1"}})", "x.json"), Error);
  EXPECT_THROW(
      parse_ruleset(R"({"ruleset": "9.0.0", "base": "1.1.0", "changes": {"rcp": {"prunne": true}}})", "x.json"), Error);
  const Ruleset removed = parse_ruleset(R"({"ruleset": "9.0.0", "base": "3.0.0", "changes": {"scoring": null}})", "x");
  EXPECT_EQ(removed.scoring.scaling_file, "");
  EXPECT_EQ(removed.base, "3.0.0");
  EXPECT_TRUE(removed.benchmark("gpt3"));
}

RcpParameters gpt3_parameters() {
  RcpParameters parameters;
  parameters.submission_runs = 3;
  return parameters;
}

RcpTable gpt3_table() {
  const auto text = read_ruleset_file(ruleset_3_0(), "rcps_gpt3.json");
  return parse_rcp_table(*text, "rcps_gpt3.json", gpt3_parameters());
}

// Numbers printed by mlcommons/logging 3.0.0-rc2's RCP_Checker('training', '3.0.0', 'gpt3').
TEST(Gpt3Rcp30, PrunedTableAndMinimaMatchTheOfficialChecker) {
  const RcpTable table = gpt3_table();
  ASSERT_EQ(table.points.size(), 5u);
  EXPECT_NEAR(table.points[0].min_epochs, 1085571793.3483582, 0.01);
  EXPECT_NEAR(table.points[0].stdev, 41732797.874060445, 1e-6);
  EXPECT_NEAR(table.points[1].min_epochs, 1116578914.0898573, 0.01);
  EXPECT_EQ(table.points[2].min_epochs, 1207959552.0);  // stdev 0: the mean itself
  EXPECT_NEAR(table.points[4].min_epochs, 1565851937.046925, 0.01);
  const RcpTable pruned = prune_rcp_table(table, gpt3_parameters());
  std::vector<double> sizes;
  for (const auto& point : pruned.points) sizes.push_back(point.batch_size);
  EXPECT_EQ(sizes, (std::vector<double>{1536, 2048, 4096, 8192}));  // 3072 converges slower than its neighbours
  const RcpVerdict at_3072 =
      check_rcp(pruned, 3072, {1258291200.0, 1258291200.0, 1258291200.0}, gpt3_parameters(), false, true);
  EXPECT_EQ(at_3072.summary(), "RCP Interpolation, RCP test PASSED");
  EXPECT_NEAR(at_3072.reference->min_epochs, 1193155743.4442487, 0.01);
  EXPECT_FALSE(at_3072.normalization_factor.has_value());
}

TEST(Gpt3Rcp30, AFasterPassIsNormalizedToTheRcpMean) {
  // Intel's HLS-Gaudi2-N32-PT: BS 1536, every run at 1157627904 tokens.
  const RcpVerdict verdict = check_rcp(prune_rcp_table(gpt3_table(), gpt3_parameters()), 1536,
                                       {1157627904.0, 1157627904.0, 1157627904.0}, gpt3_parameters(), false, true);
  EXPECT_TRUE(verdict.passed);
  ASSERT_TRUE(verdict.normalization_factor.has_value());
  EXPECT_DOUBLE_EQ(*verdict.normalization_factor, 1.0326086956521738);
  const RcpVerdict missing =
      check_rcp(gpt3_table(), 16384, {1.0, 1.0, 1.0}, gpt3_parameters(), true, ruleset_3_0().rcp.bypass_covers_missing);
  EXPECT_EQ(missing.summary(),
            "Missing RCP, please submit RCP with BS = 16384 passed using rcp_bypass, RCP test PASSED");
}

// Three runs of the good fixture with their own seeds and run times (64, 66 and 68 minutes; run_stop moves later,
// since a run_stop dated before the passing evaluation is invalid).
std::string gpt3_package(const testing::ScratchFolder& scratch, int runs = 3) {
  const std::string root = scratch / "NVIDIA";
  const std::string folder = root + "/results/dgxh100_n64_nemo/gpt3";
  const std::string log = testing::read_text(fixture("good_gpt3_nvidia.txt"));
  const std::string run_stop = "\"time_ms\": 1684043940681", seed = "\"value\": 5908";
  const long long run_stop_ms[] = {1684043940681, 1684044060681, 1684044180681, 1684044000681};
  for (int run = 0; run < runs; ++run) {
    std::string text = log;
    for (size_t at = text.find(run_stop); at != std::string::npos; at = text.find(run_stop, at + 1))
      text.replace(at, run_stop.size(), "\"time_ms\": " + std::to_string(run_stop_ms[run]));
    text.replace(text.find(seed), seed.size(), "\"value\": " + std::to_string(100 + run));
    testing::write_text(folder + "/result_" + std::to_string(run) + ".txt", text);
  }
  testing::copy_tree(testing::test_path("logs_3.0.0/systems"), root + "/systems");
  std::filesystem::create_directories(root + "/benchmarks/gpt3");
  return root;
}

TEST(Gpt3Package30, ThreeRunsScoreTheirMedianAndPassTheRcp) {
  testing::ScratchFolder scratch;
  const SubmissionReview review = review_submission(gpt3_package(scratch), ruleset_3_0());
  ASSERT_EQ(review.systems.size(), 1u);
  const BenchmarkReview& gpt3 = review.systems[0].benchmarks.at(0);
  EXPECT_EQ(review.verdict(), Verdict::kValid) << dump(gpt3.findings) << dump(review.systems[0].findings);
  ASSERT_TRUE(gpt3.score.mean_minutes.has_value());
  EXPECT_NEAR(*gpt3.score.mean_minutes, (1684044060681 - 1684040083376) / 60000.0, 1e-9);
  EXPECT_EQ(gpt3.rcp->summary(), "RCP found, RCP test PASSED");
  EXPECT_EQ(gpt3.rcp->reference->name, "gpt3_ref_2048");
}

TEST(Gpt3Package30, TheSummarizerMultipliesTheScoreByScalingJson) {
  testing::ScratchFolder scratch;
  const std::string root = gpt3_package(scratch);
  testing::write_text(root + "/results/dgxh100_n64_nemo/gpt3/scaling.json", R"({"scaling_factor": 1.5})");
  const SubmissionReview scaled = review_submission(root, ruleset_3_0());
  const BenchmarkReview& gpt3 = scaled.systems[0].benchmarks.at(0);
  EXPECT_NEAR(*gpt3.score.mean_minutes, 1.5 * (1684044060681 - 1684040083376) / 60000.0, 1e-9);
  EXPECT_EQ(gpt3.score.scaling_factor, 1.5);
  EXPECT_NE(find_finding(gpt3.findings, Severity::kNote, "x scaling_factor 1.500000 from scaling.json"), nullptr);
  EXPECT_EQ(find_finding(gpt3.findings, Severity::kWarning, "not a result_*.txt"), nullptr) << dump(gpt3.findings);
  // The summarizer cannot read a scaling file without the factor: an error, not a silent unscaled score.
  testing::write_text(root + "/results/dgxh100_n64_nemo/gpt3/scaling.json", R"({"factor": 1.5})");
  const SubmissionReview broken = review_submission(root, ruleset_3_0());
  EXPECT_NE(
      find_finding(broken.systems[0].benchmarks.at(0).findings, Severity::kError, "needs a number 'scaling_factor'"),
      nullptr);
}

TEST(Gpt3Package30, ThePackageCheckerWantsExactlyThreeRuns) {
  testing::ScratchFolder scratch;
  const SubmissionReview review = review_submission(gpt3_package(scratch, 4), ruleset_3_0());
  const BenchmarkReview& gpt3 = review.systems[0].benchmarks.at(0);
  EXPECT_EQ(review.verdict(), Verdict::kInvalid);
  EXPECT_NE(find_finding(gpt3.findings, Severity::kError, "4 runs found; the v3.0 package checker requires exactly 3"),
            nullptr)
      << dump(gpt3.findings);
}

TEST(Gpt3RulesetChoice, TheLogsBenchmarkPicksTheRound) {
  const std::string gpt3 = fixture("good_gpt3_nvidia.txt");
  const std::string resnet = testing::test_path("logs/good_resnet_lars.txt");
  EXPECT_EQ(logged_benchmark(gpt3), "gpt3");
  EXPECT_EQ(choose_ruleset_version(logged_benchmarks({gpt3})), "3.0.0");
  EXPECT_EQ(choose_ruleset_version(logged_benchmarks({resnet})), "1.1.0");
  EXPECT_EQ(rounds_with_benchmark("gpt3"), (std::vector<std::string>{"3.0.0", "3.1.0", "4.0.0", "4.1.0"}));
  try {
    choose_ruleset_version(logged_benchmarks({gpt3, resnet}));
    FAIL() << "logs of two rounds were not refused";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("the logs mix rounds"), std::string::npos) << error.what();
  }
  try {
    refuse_logs_of_other_rounds(testing::ruleset_1_1(), logged_benchmarks({gpt3}));
    FAIL() << "a 3.0.0 log was reviewed under 1.1.0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("has no rules in ruleset 1.1.0; it is a benchmark of ruleset 3.0.0"),
              std::string::npos)
        << error.what();
  }
  // A log with a synthetic clock does not date itself: another round with its benchmark may review it.
  EXPECT_NO_THROW(refuse_logs_of_other_rounds(ruleset_3_0(), logged_benchmarks({resnet})));
  EXPECT_NO_THROW(refuse_logs_of_other_rounds(ruleset_3_0(), logged_benchmarks({gpt3})));
}

}  // namespace
}  // namespace trainbench::review
