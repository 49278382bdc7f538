// src/cli/review_commands.cpp driven through CLI11 as main() does, without the trainbench binary.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/commands.h"
#include "support/cli_runner.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::cli {
namespace {

using Outcome = trainbench::testing::CommandOutcome;

Outcome run(std::vector<std::string> args) {
  return trainbench::testing::run_commands(add_review_commands, std::move(args));
}

TEST(ReviewCommand, ValidSubmissionExitsZero) {
  if (!review::testing::nvidia_fixture_present()) GTEST_SKIP();
  const Outcome outcome = run({"review", review::testing::nvidia_path("")});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.out;
  EXPECT_NE(outcome.out.find("resnet: VALID, 29.147 min (olympic mean of 3 runs, 1 dropped at each end)"),
            std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("bert: VALID, 20.003 min"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("resnet: note: RCP check passed: RCP found (epochs): mean 35.0000 >= minimum 34.5526"),
            std::string::npos);
  EXPECT_NE(outcome.out.find("\nVALID: 2 systems, 2 benchmarks, 15 runs; 0 errors"), std::string::npos) << outcome.out;
}

TEST(ReviewCommand, JsonOutputParses) {
  if (!review::testing::nvidia_fixture_present()) GTEST_SKIP();
  const Outcome outcome = run({"review", review::testing::nvidia_path(""), "--json"});
  const auto json = nlohmann::json::parse(outcome.out);
  EXPECT_EQ(json["valid"], true);
  EXPECT_NEAR(json["systems"][0]["benchmarks"][0]["score_minutes"].get<double>(), 29.147, 0.0005);
}

TEST(ReviewCommand, BrokenLogExitsOneWithFileAndLine) {
  const std::string log = review::testing::test_path("logs/bad_lars_end_learning_rate.txt");
  const Outcome outcome = run({"review", "--log", log});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_NE(outcome.out.find(log + ":19: error: 'lars_opt_end_learning_rate': value 0.001 must be 0.0001"),
            std::string::npos)
      << outcome.out;
  EXPECT_EQ(run({"review", "--log", review::testing::test_path("logs/good_resnet_lars.txt")}).exit_code, 0);
  EXPECT_EQ(run({"review", "--log", review::testing::test_path("logs/aborted_not_converged.txt")}).exit_code, 1);
}

TEST(ReviewCommand, BadInputThrows) {
  EXPECT_THROW(run({"review"}), Error);
  EXPECT_THROW(run({"review", "/nonexistent/folder"}), Error);
  EXPECT_THROW(run({"review", "--ruleset", "0.5.0", "--log", review::testing::test_path("logs/good_resnet_lars.txt")}),
               Error);
}

TEST(SystemCommand, WritesAValidDescriptionWithTheGivenFields) {
  review::testing::ScratchFolder scratch;
  const std::string out = scratch / "systems/my_box.json";
  const Outcome outcome = run({"system", "--out", out, "--submitter", "Example Org", "--division", "closed", "--status",
                               "onprem", "--cooling", "air", "--set", "hw_notes=test box"});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.out;
  const auto description = nlohmann::json::parse(review::testing::read_text(out));
  EXPECT_EQ(description.size(), 33u);
  EXPECT_EQ(description["system_name"], "my_box");
  EXPECT_EQ(description["submitter"], "Example Org");
  EXPECT_EQ(description["cooling"], "air");
  EXPECT_EQ(description["hw_notes"], "test box");
  EXPECT_NE(description["host_processor_vcpu_count"], "");  // detected from /proc/cpuinfo
  EXPECT_NE(outcome.out.find("empty: host_networking_topology (--host-networking-topology)"), std::string::npos)
      << outcome.out;
  EXPECT_THROW(run({"system", "--out", out, "--set", "colour=blue"}), Error);
  EXPECT_THROW(run({"system"}), Error);
  EXPECT_THROW(run({"system", "--print", "--division", "half-open"}), CLI::ValidationError);
}

TEST(ReportCommand, WritesTheReportAndComparison) {
  review::testing::ScratchFolder scratch;
  const Outcome outcome =
      run({"report", review::testing::test_path("report_input/v1"), review::testing::test_path("report_input/v2/"),
           "--compare", "--out", scratch / "report"});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.out;
  for (const char* file : {"report.html", "report.md", "report.csv", "comparison.csv"})
    EXPECT_TRUE(std::filesystem::exists(scratch / ("report/" + std::string(file)))) << file;
  EXPECT_THROW(run({"report", review::testing::test_path("report_input/v1"), "--compare", "--out", scratch / "r"}),
               Error);
}

TEST(RcpTableCommand, MakesATableFromPresetRuns) {
  review::testing::ScratchFolder scratch;
  for (int i = 0; i < 3; ++i) {
    std::string log = review::testing::read_text(review::testing::test_path("logs/mini_preset.txt"));
    log.replace(log.find("\"key\": \"seed\", \"value\": 42"), 26,
                "\"key\": \"seed\", \"value\": " + std::to_string(i + 1));
    if (i == 2) log.replace(log.rfind("\"epoch_num\": 8"), 14, "\"epoch_num\": 9");
    review::testing::write_text(scratch / ("runs/result_" + std::to_string(i) + ".txt"), log);
  }
  const std::string table = scratch / "rcps_resnet_mini.json";
  const Outcome outcome = run({"rcp-table", scratch / "runs", "--out", table, "--preset", "mini"});
  EXPECT_NE(outcome.out.find("3 runs; the rules ask for at least 10"), std::string::npos) << outcome.out;
  const auto json = nlohmann::json::parse(review::testing::read_text(table));
  EXPECT_EQ(json["resnet_mini_ref_3264"]["Epochs to converge"], nlohmann::json({8.0, 8.0, 9.0}));
  EXPECT_EQ(json["resnet_mini_ref_3264"]["BS"], 3264);
  EXPECT_THROW(run({"rcp-table", scratch / "runs", "--out", table, "--preset", "tiny"}), Error);
}

}  // namespace
}  // namespace trainbench::cli
