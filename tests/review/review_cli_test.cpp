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

// NVIDIA's single-node resnet and bert: the official RCP checker fails this BERT by default (eval epoch_num)
// and passes it with --bert_train_samples (expected-rcp-verdicts.tsv).
std::string nvidia_single_node(const review::testing::ScratchFolder& scratch) {
  const std::string root = scratch / "NVIDIA";
  review::testing::copy_nvidia_results(root,
                                       {{"dgxa100_ngc21.09_mxnet", "resnet"}, {"dgxa100_ngc21.09_pytorch", "bert"}});
  return root;
}

TEST(ReviewCommand, FailedRcpCheckIsItsOwnVerdictAndExitStatus) {
  if (!review::testing::nvidia_fixture_present()) GTEST_SKIP();
  review::testing::ScratchFolder scratch;
  const std::string root = nvidia_single_node(scratch);
  const Outcome outcome = run({"review", root});
  EXPECT_EQ(outcome.exit_code, 3) << outcome.out;
  EXPECT_NE(outcome.out.find("resnet: VALID, 29.147 min (olympic mean of 3 runs, 1 dropped at each end)"),
            std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("RCP check: RCP found, RCP test PASSED (epoch_num): mean 35.0000 >= minimum 34.5526"),
            std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("bert: RCP FAILED, 20.003 min"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("RCP check: RCP found, RCP test FAILED (epoch_num): mean 1.0000 < minimum"),
            std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("\nRCP FAILED: 2 systems, 2 benchmarks, 15 runs; 0 errors, 1 failed RCP check,"),
            std::string::npos)
      << outcome.out;

  const Outcome by_samples = run({"review", root, "--bert-train-samples"});
  EXPECT_EQ(by_samples.exit_code, 0) << by_samples.out;
  EXPECT_NE(by_samples.out.find("bert: VALID, 20.003 min"), std::string::npos) << by_samples.out;
  EXPECT_NE(by_samples.out.find("RCP check: RCP found, RCP test PASSED (train_samples): mean 2775192.0000"),
            std::string::npos)
      << by_samples.out;

  const Outcome bypassed = run({"review", root, "--rcp-bypass"});
  EXPECT_EQ(bypassed.exit_code, 0) << bypassed.out;
  EXPECT_NE(bypassed.out.find("RCP found passed using rcp_bypass, RCP test PASSED"), std::string::npos)
      << bypassed.out;
}

TEST(ReviewCommand, JsonOutputParses) {
  if (!review::testing::nvidia_fixture_present()) GTEST_SKIP();
  review::testing::ScratchFolder scratch;
  const Outcome outcome = run({"review", nvidia_single_node(scratch), "--json"});
  const auto json = nlohmann::json::parse(outcome.out);
  EXPECT_EQ(json["valid"], false);
  EXPECT_EQ(json["verdict"], "RCP FAILED");
  const auto& resnet = json["systems"][0]["benchmarks"][0];
  EXPECT_NEAR(resnet["score_minutes"].get<double>(), 29.147, 0.0005);
  EXPECT_EQ(resnet["verdict"], "VALID");
  EXPECT_EQ(resnet["rcp"]["summary"], "RCP found, RCP test PASSED");
  EXPECT_EQ(json["systems"][1]["benchmarks"][0]["verdict"], "RCP FAILED");
}

TEST(ReviewCommand, StrictFailsWhereTheRulesTextIsStricterThanTheChecker) {
  const std::string log = review::testing::test_path("logs/good_init_between_20_and_30_minutes.txt");
  EXPECT_EQ(run({"review", "--log", log}).exit_code, 0);
  const Outcome strict = run({"review", "--log", log, "--strict"});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.out.find("error: 'init_stop' is 25.02 minutes after the first 'init_start': the rules text says"),
            std::string::npos)
      << strict.out;
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
                               "Available on-premise", "--cooling", "air", "--set", "hw_notes=test box"});
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
  EXPECT_THROW(run({"system", "--print", "--status", "onprem"}), CLI::ValidationError);  // 4.1.0 on: one of four
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

// A gpt3 log picks ruleset 3.0.0 by itself; under 1.1.0, or under a ruleset this build does not have, it is
// refused by name (main() turns the Error into exit status 2).
TEST(ReviewCommand, AGpt3LogIsReviewedUnderItsOwnRound) {
  const std::string gpt3 = review::testing::test_path("logs_3.0.0/good_gpt3_nvidia.txt");
  const Outcome outcome = run({"review", "--log", gpt3});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.out;
  EXPECT_NE(outcome.out.find("gpt3 (closed division)"), std::string::npos) << outcome.out;
  EXPECT_EQ(run({"review", "--log", gpt3, "--ruleset", "3.0.0"}).exit_code, 0);
  try {
    run({"review", "--log", gpt3, "--ruleset", "1.1.0"});
    FAIL() << "a 3.0.0 log was reviewed under 1.1.0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("good_gpt3_nvidia.txt: submission_benchmark 'gpt3' has no rules in "
                        "ruleset 1.1.0; it is a benchmark of ruleset 3.0.0"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(run({"review", "--log", gpt3, "--ruleset", "2.5.0"}), Error);
  const std::string resnet = review::testing::test_path("logs/good_resnet_lars.txt");
  EXPECT_THROW(run({"review", "--log", resnet, "--log", gpt3}), Error);
  EXPECT_EQ(run({"review", "--log", resnet}).exit_code, 0);
  // Its clock is synthetic, so the log does not date itself: any round with resnet may review it.
  EXPECT_NO_THROW(run({"review", "--log", resnet, "--ruleset", "3.0.0"}));
}

// A published log dates itself: NVIDIA's v1.1 resnet ran in 2021 after v1.0 was published, so 1.0.0's rules
// are refused for it by name; every later round with resnet may review it, as a resubmitted result.
TEST(ReviewCommand, APublishedLogIsNotReviewedUnderARoundPublishedBeforeItRan) {
  if (!review::testing::nvidia_fixture_present()) GTEST_SKIP();
  const std::string log = review::testing::nvidia_path("results/dgxa100_ngc21.09_mxnet/resnet/result_0.txt");
  EXPECT_EQ(run({"review", "--log", log}).exit_code, 0);
  try {
    run({"review", "--log", log, "--ruleset", "1.0.0"});
    FAIL() << "a log that ran in 2021-10 was reviewed under 1.0.0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("ran after round 1.0.0's results were published (2021-06-30)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(run({"review", "--log", log, "--ruleset", "2.0.0"}).exit_code, 0);
}

}  // namespace
}  // namespace trainbench::cli
