#include "review/rcp.h"

#include <gtest/gtest.h>

#include <cmath>

#include <stdexcept>

#include "review/ruleset.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

TEST(StudentT, MatchesTabulatedQuantiles) {
  EXPECT_DOUBLE_EQ(student_t_cdf(0, 7), 0.5);
  // Two-sided critical values from standard t tables.
  EXPECT_NEAR(student_t_cdf(-1.761310, 14), 0.05, 1e-6);
  EXPECT_NEAR(student_t_cdf(2.228139, 10), 0.975, 1e-6);
  EXPECT_NEAR(student_t_cdf(-6.313752, 1), 0.05, 1e-6);
  EXPECT_NEAR(student_t_cdf(1.644854, 1e7), 0.95, 1e-5);  // approaches the normal distribution
  EXPECT_NEAR(student_t_cdf(1.0, 1), 0.75, 1e-12);        // Cauchy: 1/2 + atan(1)/pi
}

TEST(OlympicStats, DropsEndsAndUsesPopulationStdev) {
  // resnet BS 3264 RCP (v1.1): 15 runs, drop one at each end.
  const OlympicStats stats = olympic_stats({36, 35, 34, 34, 36, 35, 35, 35, 35, 37, 35, 35, 35, 36, 35}, 1);
  EXPECT_EQ(stats.samples, 13);
  EXPECT_NEAR(stats.mean, 457.0 / 13, 1e-12);  // 34 + 9 * 35 + 3 * 36 = 457
  EXPECT_NEAR(stats.stdev, 0.5329, 1e-4);
  EXPECT_EQ(olympic_stats({1, 2}, 1).samples, 0);
}

TEST(MinAcceptableMean, ReproducesTheReferenceExample) {
  // training-rules.md §2: resnet BS 3264, mean 35.154, stdev 0.533, max speedup 1.0174.
  const double min_mean = min_acceptable_mean(457.0 / 13, 0.532938710021193, 13, 3);
  // By hand: 35.1538 - t(0.95, 14) * 0.53294 * sqrt(1/13 + 1/3) = 35.1538 - 1.76131 * 0.34136 = 34.5526
  EXPECT_NEAR(min_mean, 34.5526, 2e-4);
  EXPECT_NEAR((457.0 / 13) / min_mean, 1.0174, 5e-5);
  EXPECT_EQ(min_acceptable_mean(40, 0, 10, 3), 40);
}

RcpParameters resnet_parameters() {
  RcpParameters parameters;
  parameters.submission_runs = 5;
  parameters.drop_each_side = 1;
  return parameters;
}

const RcpPoint& point_at(const RcpTable& table, double batch_size) {
  for (const auto& point : table.points)
    if (point.batch_size == batch_size) return point;
  throw std::runtime_error("no RCP at batch size " + std::to_string(batch_size));
}

RcpTable resnet_table() {
  const auto text = read_ruleset_file(testing::ruleset_1_1(), "rcps_resnet.json");
  return parse_rcp_table(text.value(), "rcps_resnet.json", resnet_parameters());
}

TEST(RcpTable, OfficialResnetTableGivesThePublishedNumbers) {
  const RcpTable table = resnet_table();
  EXPECT_EQ(table.benchmark, "resnet");
  // The final v1.1 table (logging 7b6e0c1): nine batch sizes from 1632 to 65536.
  ASSERT_EQ(table.points.size(), 9u);
  EXPECT_EQ(table.points.front().batch_size, 1632);
  EXPECT_EQ(table.points.back().batch_size, 65536);
  const RcpPoint& point = point_at(table, 3264);
  EXPECT_EQ(point.name, "resnet_ref_3264");
  EXPECT_NEAR(point.mean, 35.154, 5e-4);
  EXPECT_NEAR(point.stdev, 0.533, 5e-4);
  EXPECT_NEAR(point.max_speedup(), 1.0174, 5e-5);
}

std::vector<std::optional<double>> runs(std::initializer_list<double> epochs) {
  return std::vector<std::optional<double>>(epochs.begin(), epochs.end());
}

TEST(RcpCheck, ExactBatchSize) {
  const RcpTable table = resnet_table();
  // Inspur's v1.1 mean of 35.0 epochs passed (reference §2).
  const RcpVerdict pass = check_rcp(table, 3264, runs({35, 35, 35, 35, 35}), resnet_parameters(), false, false);
  EXPECT_TRUE(pass.passed);
  EXPECT_EQ(pass.outcome, "RCP found");
  EXPECT_EQ(pass.submission_mean, 35.0);
  const RcpVerdict fail = check_rcp(table, 3264, runs({33, 34, 34, 34, 36}), resnet_parameters(), false, false);
  EXPECT_FALSE(fail.passed);
  EXPECT_NE(fail.explanation.find("mean 34.0000 < minimum 34.55"), std::string::npos) << fail.explanation;
  const RcpVerdict bypassed = check_rcp(table, 3264, runs({33, 34, 34, 34, 36}), resnet_parameters(), true, false);
  EXPECT_TRUE(bypassed.passed);
  EXPECT_TRUE(bypassed.bypassed);
  EXPECT_EQ(bypassed.outcome, "RCP found passed using rcp_bypass");
  EXPECT_EQ(bypassed.summary(), "RCP found passed using rcp_bypass, RCP test PASSED");
}

TEST(RcpCheck, InterpolatesBetweenBatchSizes) {
  const RcpTable table = resnet_table();
  const RcpVerdict verdict = check_rcp(table, 6144, runs({41, 41, 41, 41, 41}), resnet_parameters(), false, false);
  EXPECT_EQ(verdict.outcome, "RCP Interpolation");
  ASSERT_TRUE(verdict.reference.has_value());
  const RcpPoint& low = point_at(table, 4096);
  const RcpPoint& high = point_at(table, 8192);
  EXPECT_NEAR(verdict.reference->mean, (low.mean + high.mean) / 2, 1e-12);
  EXPECT_NEAR(verdict.reference->stdev, (low.stdev + high.stdev) / 2, 1e-12);
  // Interpolated points assume 2 x 5 reference runs.
  EXPECT_NEAR(verdict.reference->min_epochs,
              min_acceptable_mean(verdict.reference->mean, verdict.reference->stdev, 10, 3), 1e-12);
  EXPECT_TRUE(verdict.passed);
}

TEST(RcpCheck, AboveEveryRcpIsMissingAndBelowComparesWithTheSmallest) {
  const RcpTable table = resnet_table();
  const RcpVerdict above = check_rcp(table, 100000, runs({90, 90, 90, 90, 90}), resnet_parameters(), false, false);
  EXPECT_FALSE(above.passed);
  EXPECT_EQ(above.outcome, "Missing RCP, please submit RCP with BS = 100000");
  // v1.1: --rcp-bypass does not cover a missing RCP; from 2.0 it does.
  EXPECT_FALSE(check_rcp(table, 100000, runs({90, 90, 90, 90, 90}), resnet_parameters(), true, false).passed);
  EXPECT_TRUE(check_rcp(table, 100000, runs({90, 90, 90, 90, 90}), resnet_parameters(), true, true).passed);

  const RcpVerdict slower = check_rcp(table, 256, runs({40, 40, 40, 40, 40}), resnet_parameters(), false, false);
  EXPECT_TRUE(slower.passed);
  EXPECT_EQ(slower.outcome, "RCP not found but slower convergence on smaller batch size");
  const RcpVerdict faster = check_rcp(table, 256, runs({30, 30, 30, 30, 30}), resnet_parameters(), false, false);
  EXPECT_FALSE(faster.passed);
  EXPECT_EQ(faster.outcome, "Missing RCP, please submit RCP with BS = 256");
}

TEST(RcpCheck, NonConvergedRunsCountAsInfinitelySlow) {
  const RcpTable table = resnet_table();
  const RcpVerdict one =
      check_rcp(table, 3264, {35.0, 35.0, std::nullopt, 35.0, 35.0}, resnet_parameters(), false, false);
  EXPECT_TRUE(one.passed);
  EXPECT_EQ(one.submission_mean, 35.0);  // 35, 35, 35, [35, 1e9 dropped with the fastest 35]
  const RcpVerdict two =
      check_rcp(table, 3264, {35.0, std::nullopt, std::nullopt, 35.0, 35.0}, resnet_parameters(), true, true);
  EXPECT_FALSE(two.passed);  // not even --rcp-bypass covers this
  EXPECT_EQ(two.outcome, "Insufficient convergence");
}

// With stdev 0 the minimum acceptable mean is the RCP mean itself (DLRM BS 71680: 22 of its 24 runs at 2.0
// epochs, the others dropped), and a submission exactly at it passes.
TEST(RcpCheck, ZeroStdevNeedsTheMeanAndAMeanOnItPasses) {
  const Ruleset& ruleset = testing::ruleset_1_1();
  RcpParameters parameters;
  const RcpTable dlrm = parse_rcp_table(read_ruleset_file(ruleset, "rcps_dlrm.json").value(), "dlrm", parameters);
  const RcpPoint& point = point_at(dlrm, 71680);
  EXPECT_EQ(point.stdev, 0);
  EXPECT_EQ(point.min_epochs, 2.0);
  EXPECT_TRUE(check_rcp(dlrm, 71680, runs({2.0, 2.0, 2.0, 2.0, 2.0}), parameters, false, false).passed);
  EXPECT_FALSE(check_rcp(dlrm, 71680, runs({1.9999, 1.9999, 1.9999, 1.9999, 1.9999}), parameters, false, false).passed);
}

TEST(RcpCheck, WithoutATableThereIsNoRcp) {
  const RcpVerdict verdict = check_rcp(RcpTable(), 4096, runs({1, 1, 1, 1, 1}), resnet_parameters(), true, true);
  EXPECT_FALSE(verdict.passed);
  EXPECT_EQ(verdict.summary(), "Cannot find any RCPs, RCP test FAILED");
}

TEST(RcpTable, EveryShippedTableParses) {
  const Ruleset& ruleset = testing::ruleset_1_1();
  for (const auto& [name, rules] : ruleset.benchmarks) {
    if (rules.rcp_table.empty()) continue;
    RcpParameters parameters;
    parameters.submission_runs = rules.runs;
    parameters.drop_each_side = rules.drop_each_side;
    const auto text = read_ruleset_file(ruleset, rules.rcp_table);
    ASSERT_TRUE(text.has_value()) << rules.rcp_table;
    const RcpTable table = parse_rcp_table(*text, rules.rcp_table, parameters);
    EXPECT_EQ(table.benchmark, name);
    for (const auto& point : table.points) {
      EXPECT_GT(point.max_speedup(), 1.0 - 1e-12) << point.name;
      EXPECT_LT(point.max_speedup(), 1.2) << point.name;
    }
  }
}

TEST(RcpTable, RejectsBrokenTables) {
  const RcpParameters parameters = resnet_parameters();
  EXPECT_THROW(parse_rcp_table("[]", "t", parameters), Error);
  EXPECT_THROW(parse_rcp_table("{\"a\": {\"Benchmark\": \"resnet\", \"BS\": 0, \"Epochs to converge\": [1,2,3]}}", "t",
                               parameters),
               Error);
  EXPECT_THROW(parse_rcp_table("{\"a\": {\"Benchmark\": \"resnet\", \"BS\": 8, \"Epochs to converge\": [1,2]}}", "t",
                               parameters),
               Error);
  EXPECT_THROW(parse_rcp_table("{\"a\": {\"Benchmark\": \"resnet\", \"BS\": 8, \"Epochs to converge\": [1,2,\"3\"]}}",
                               "t", parameters),
               Error);
  EXPECT_THROW(parse_rcp_table("{\"note\": \"only a note\"}", "t", parameters), Error);
}

// Two rounds changed how a table is read: 4.0.0 prunes on the RCP mean (a noisy fast point no longer hides
// a steadier, slower-on-average neighbour), 4.1.0 takes a point's stdev over all its runs.
TEST(RcpRounds, PruningOnTheMeanAndTheStdevOfAllRuns) {
  const std::string text = R"({
    "a": {"Benchmark": "llama2_70b_lora", "BS": 100, "samples to converge": [2, 6, 10, 14, 18]},
    "b": {"Benchmark": "llama2_70b_lora", "BS": 200, "samples to converge": [9, 9, 9, 9, 9]}})";
  RcpParameters parameters;
  const RcpTable table = parse_rcp_table(text, "t", parameters);
  EXPECT_NEAR(table.points[0].mean, 10.0, 1e-12);  // olympic: 6, 10, 14
  EXPECT_NEAR(table.points[0].stdev, std::sqrt(32.0 / 3.0), 1e-12);
  EXPECT_LT(table.points[0].min_epochs, table.points[1].min_epochs);  // a is the "fastest" by minimum mean
  EXPECT_EQ(prune_rcp_table(table, parameters).points.size(), 2u);
  parameters.prune_on_mean = true;  // b has the lower mean: a, at a smaller batch, is pruned
  const RcpTable pruned = prune_rcp_table(table, parameters);
  ASSERT_EQ(pruned.points.size(), 1u);
  EXPECT_EQ(pruned.points[0].name, "b");
  parameters.stdev_of_all_runs = true;
  EXPECT_NEAR(parse_rcp_table(text, "t", parameters).points[0].stdev, std::sqrt(160.0 / 5.0), 1e-12);
}

// 5.0.0 and 5.1.0 compare llama31_405b with the minimum acceptable mean less 46080 samples
// (rcp_checker.py@5.0.0-rc3:443-444): a mean just under the table's minimum passes there.
TEST(RcpRounds, Llama405bMinimumIsLoweredByTheRulesetsOffset) {
  for (const std::string version : {"5.0.0", "5.1.0"}) {
    const Ruleset ruleset = load_ruleset(version);
    const BenchmarkRules& rules = *ruleset.benchmark("llama31_405b");
    EXPECT_EQ(rules.rcp_minimum_offset, 46080) << version;
    RcpParameters parameters;
    parameters.submission_runs = rules.runs;
    parameters.drop_each_side = rules.drop_each_side;
    parameters.prune_on_mean = ruleset.rcp.prune_on_mean;
    parameters.stdev_of_all_runs = ruleset.rcp.stdev_of_all_runs;
    const RcpTable table =
        parse_rcp_table(read_ruleset_file(ruleset, rules.rcp_table).value(), rules.rcp_table, parameters);
    const RcpPoint& point = table.points.front();
    const double mean = point.min_epochs - 40000;
    const auto three = runs({mean - 1, mean, mean + 1});
    EXPECT_FALSE(check_rcp(table, point.batch_size, three, parameters, false, false).passed) << version;
    parameters.minimum_offset = rules.rcp_minimum_offset;
    const RcpVerdict lowered = check_rcp(table, point.batch_size, three, parameters, false, false);
    EXPECT_TRUE(lowered.passed) << version;
    EXPECT_NE(lowered.explanation.find(" - 46080 (the ruleset's offset)"), std::string::npos) << lowered.explanation;
  }
  EXPECT_EQ(load_ruleset("4.1.0").benchmark("llama31_405b"), nullptr);
}

}  // namespace
}  // namespace trainbench::review
