// `trainbench predict` and `predict-check` as a user meets them: clear errors with exit code 2, a prediction
// from a `bench --json` file, and from NVIDIA's published logs in shared/ (skipped when shared/ is absent).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/test_files.h"
#include "support/trainbench_binary.h"

namespace {

namespace fs = std::filesystem;
using trainbench::testing::run_trainbench;

const std::string kNvidia = PREDICT_NVIDIA_DIR;

// Runs `predict <arguments> --bench FILE` with FILE holding `bench_json`.
trainbench::testing::BinaryResult predict_from_bench(const std::string& arguments, const std::string& bench_json) {
  const trainbench::data::testing::TempDir temp;
  const fs::path bench = temp.path() / "bench.json";
  std::ofstream(bench) << bench_json;
  return run_trainbench("predict " + arguments + " --bench " + bench.string());
}

TEST(PredictCli, NeedsExactlyOneCalibration) {
  const auto result = run_trainbench("predict resnet --nodes 8 --devices-per-node 8");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--calibrate PATH"), std::string::npos) << result.output;
}

TEST(PredictCli, NamesTheBadFieldOfABenchFile) {
  const auto result = predict_from_bench("bert --nodes 2 --devices-per-node 8",
                                         R"({"benchmark": "bert", "global_batch": 64, "ranks": 2, "step_seconds": -1})");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("step_seconds"), std::string::npos) << result.output;
}

// Issue 45: numbers that are in no range a system has are refused by name, and no NaN or infinite minutes print.
TEST(PredictCli, NumbersOutOfAnyRangeAreRefusedByName) {
  const std::string bench = R"({"benchmark": "bert", "global_batch": 448, "ranks": 8, "step_seconds": 0.2})";
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--samples-per-epoch 1e308", "--samples-per-epoch: expected a number above 0 and at most"},
      {"--converge-at 1e308", "--converge-at: expected a number above 0 and at most"}};
  for (const auto& [flag, message] : flags) {
    const auto result = predict_from_bench("bert --nodes 1 --devices-per-node 8 " + flag, bench);
    EXPECT_EQ(result.exit_code, 2) << flag << "\n" << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << result.output;
  }
  for (const auto& [ranks, message] :
       std::vector<std::pair<std::string, std::string>>{{"0.5", "got 0.5"}, {"1e300", "got 1e+300"}}) {
    const auto result = predict_from_bench(
        "bert --nodes 1 --devices-per-node 8",
        R"({"benchmark": "bert", "global_batch": 448, "ranks": )" + ranks + R"(, "step_seconds": 0.2})");
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("field 'ranks' must be a whole number of ranks from 1 to 1000000, " + message),
              std::string::npos)
        << result.output;
  }
  const trainbench::data::testing::TempDir temp;
  std::ofstream(temp.path() / "storage.json") << R"({"dataset_read": {"files_per_second": 1e-320}})";
  const auto slow = predict_from_bench(
      "bert --nodes 1 --devices-per-node 8 --storage " + (temp.path() / "storage.json").string(), bench);
  EXPECT_EQ(slow.exit_code, 2) << slow.output;
  EXPECT_NE(slow.output.find("field 'files_per_second' must be a number above 0.001"), std::string::npos)
      << slow.output;
}

TEST(PredictCli, FromABenchFileTheRcpGivesTheSamples) {
  const auto result = predict_from_bench("bert --nodes 1 --devices-per-node 8 --json",
                                         R"({"benchmark": "bert", "global_batch": 448, "ranks": 8, "step_seconds": 0.2})");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = nlohmann::json::parse(result.output);
  // RCP mean at batch 448 (2,621,696 samples) / 448 a step, rounded up: 5852 steps of 0.2 s.
  EXPECT_DOUBLE_EQ(json["steps"].get<double>(), 5852);
  EXPECT_NEAR(json["minutes"].get<double>(), 5852 * 0.2 / 60, 1e-9);
  EXPECT_TRUE(json["parts"].contains("training_compute_seconds"));
}

TEST(PredictCli, FromPublishedLogs) {
  const std::string folder = kNvidia + "/results/dgxa100_ngc21.09_mxnet/resnet";
  if (!fs::is_directory(folder)) GTEST_SKIP() << folder << " is absent";
  const auto result = run_trainbench("predict resnet --nodes 8 --devices-per-node 8 --per-device-batch 51 --calibrate " +
                                     folder + " --gradient-bytes 50M --json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = nlohmann::json::parse(result.output);
  EXPECT_DOUBLE_EQ(json["global_batch"].get<double>(), 3264);
  EXPECT_GT(json["minutes"].get<double>(), 0);
  EXPECT_EQ(json["calibration"]["system"], "dgxa100_ngc21.09_mxnet");
}

TEST(PredictCli, CheckWritesTheTableAndChart) {
  if (!fs::is_directory(kNvidia + "/results")) GTEST_SKIP() << kNvidia << " is absent";
  const trainbench::data::testing::TempDir temp;
  const fs::path svg = temp.path() / "scaling.svg", table = temp.path() / "scaling.md";
  const auto result =
      run_trainbench("predict-check " + kNvidia + " --svg " + svg.string() + " --markdown " + table.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::is_regular_file(svg));
  EXPECT_TRUE(fs::is_regular_file(table));
  EXPECT_NE(result.output.find("| resnet | 540 |"), std::string::npos) << result.output;
  // Issue 45: a directory at --markdown is refused when the flags are read, and nothing is left beside it.
  fs::create_directories(temp.path() / "table-dir");
  const auto refused =
      run_trainbench("predict-check " + kNvidia + " --markdown " + (temp.path() / "table-dir").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("table-dir is a directory; give the path of a file to write"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(temp.path() / "table-dir.partial"));
}

// A bench of one GPT-3 layer: 8 sequences on one device in 2 s.
constexpr const char* kGptLayerBench = R"({"benchmark": "gpt3", "global_batch": 8, "ranks": 1, "step_seconds": 2})";
const std::string kGptLayout =
    "gpt3 --nodes 64 --devices-per-node 8 --global-batch 2048 --device-memory-gib 80 --distributed-optimizer "
    "--bench-layers 1 --inter-bandwidth 400 --intra-bandwidth 450";

TEST(PredictGpt3Cli, ALayoutFromABenchOfOneLayer) {
  const auto result = predict_from_bench(
      kGptLayout + " --tensor-parallel 4 --pipeline-parallel 8 --interleave 12 --micro-batch 1 --json", kGptLayerBench);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = nlohmann::json::parse(result.output);
  double parts = 0;
  for (const auto& [name, seconds] : json["parts"].items()) parts += seconds.get<double>();
  EXPECT_NEAR(json["minutes"].get<double>() * 60, parts, 1e-6);
  EXPECT_EQ(json["layout"]["data_parallel"], 16);
  EXPECT_EQ(json["layout"]["micro_batches"], 128);
  EXPECT_DOUBLE_EQ(json["bubble_fraction"].get<double>(), 7.0 / 1536);
  EXPECT_GT(json["calibration"]["flops_per_second_per_device"].get<double>(), 0);
}

TEST(PredictGpt3Cli, PlanAndSweep) {
  const auto plan = predict_from_bench(kGptLayout + " --plan --json", kGptLayerBench);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto json = nlohmann::json::parse(plan.output);
  EXPECT_LE(json["best"]["minutes"].get<double>(), json["runners_up"][0]["minutes"].get<double>());
  const auto sweep = predict_from_bench(kGptLayout + " --sweep inter-bandwidth=25,400", kGptLayerBench);
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_NE(sweep.output.find("| 25 | tp="), std::string::npos) << sweep.output;
  EXPECT_NE(sweep.output.find("| 400 | tp="), std::string::npos) << sweep.output;
}

// Each refusal of the model by its flag is predict.ThreeD.LayoutsThatDoNotDivideAreRefusedByFlag; here, that the CLI
// passes them on with exit code 2, and its own.
TEST(PredictGpt3Cli, BadInputIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --tensor-parallel 5 --pipeline-parallel 8", "--tensor-parallel"},
      {" --tensor-parallel 1 --pipeline-parallel 8", "does not fit"},
      {" --tensor-parallel 4 --pipeline-parallel 8 --global-batch nan", "--global-batch"},
      {" --tensor-parallel 4 --pipeline-parallel 8 --inter-bandwidth -5", "--inter-bandwidth"},
      {" --tensor-parallel 4 --pipeline-parallel 8 --device-memory-gib inf", "--device-memory-gib"},
      {" --sweep inter-bandwidth=25,-1", "--sweep"},
      {"", "--tensor-parallel"},
  };
  for (const auto& [flags, named] : cases) {
    const auto result = predict_from_bench(kGptLayout + flags, kGptLayerBench);
    EXPECT_EQ(result.exit_code, 2) << flags << "\n" << result.output;
    EXPECT_NE(result.output.find(named), std::string::npos) << flags << "\n" << result.output;
  }
  const auto no_layers =
      predict_from_bench("gpt3 --nodes 8 --devices-per-node 8 --device-memory-gib 80 --plan", kGptLayerBench);
  EXPECT_EQ(no_layers.exit_code, 2);
  EXPECT_NE(no_layers.output.find("--bench-layers"), std::string::npos) << no_layers.output;
  const auto no_step =
      predict_from_bench(kGptLayout + " --plan", R"({"benchmark": "gpt3", "global_batch": 8, "ranks": 1})");
  EXPECT_EQ(no_step.exit_code, 2);
  EXPECT_NE(no_step.output.find("step_seconds"), std::string::npos) << no_step.output;
  const trainbench::data::testing::TempDir temp;
  const auto no_layout = run_trainbench(
      "predict gpt3 --nodes 96 --devices-per-node 8 --device-memory-gib 80 "
      "--tensor-parallel 4 --pipeline-parallel 8 --calibrate " +
      temp.path().string());
  EXPECT_EQ(no_layout.exit_code, 2);
  EXPECT_NE(no_layout.output.find("--calibration-layout"), std::string::npos) << no_layout.output;
  const auto other = run_trainbench("predict resnet --nodes 8 --devices-per-node 8 --tensor-parallel 2 --calibrate " +
                                    temp.path().string());
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.output.find("gpt3 only"), std::string::npos) << other.output;
}

}  // namespace
