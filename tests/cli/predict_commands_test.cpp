// `trainbench predict` and `predict-check` as a user meets them: clear errors with exit code 2, a prediction
// from a `bench --json` file, and from NVIDIA's published logs in shared/ (skipped when shared/ is absent).
#include <filesystem>
#include <fstream>

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
}

}  // namespace
