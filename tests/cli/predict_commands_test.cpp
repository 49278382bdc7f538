// `trainbench predict` and `predict-check` as a user meets them: clear errors with exit code 2, a prediction
// from a `bench --json` file, and from NVIDIA's published logs in shared/ (skipped when shared/ is absent).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
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

// A refusal with exit code 2 whose message holds `named` (the flag, and what was wrong); `context` says which case.
void expect_refused(const trainbench::testing::BinaryResult& result, const std::string& context,
                    const std::string& named) {
  EXPECT_EQ(result.exit_code, 2) << context << "\n" << result.output;
  EXPECT_NE(result.output.find(named), std::string::npos) << context << "\n" << result.output;
}

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

// --published: the review layer's olympic score of a results folder, printed beside the prediction with the error.
// The folder holds three copies of NVIDIA's n64 log (tests/review/logs_3.0.0), laid out as a submission is.
TEST(PredictGpt3Cli, PublishedResultsGiveTheirOlympicScoreAndTheError) {
  const std::string logs = GPT3_V30_LOGS_DIR;
  const trainbench::data::testing::TempDir temp;
  const fs::path results = temp.path() / "NVIDIA/results/dgxh100_n64_nemo/gpt3";
  fs::create_directories(results);
  fs::create_directories(temp.path() / "NVIDIA/systems");
  fs::copy_file(logs + "/systems/dgxh100_n64_nemo.json", temp.path() / "NVIDIA/systems/dgxh100_n64_nemo.json");
  for (const char* name : {"result_0.txt", "result_1.txt", "result_2.txt"})
    fs::copy_file(logs + "/good_gpt3_nvidia.txt", results / name);
  const std::string layout = kGptLayout + " --tensor-parallel 4 --pipeline-parallel 8 --interleave 12";
  const auto result = predict_from_bench(layout + " --published " + results.string() + " --json", kGptLayerBench);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = nlohmann::json::parse(result.output);
  const double published = (1684043940681.0 - 1684040083376.0) / 60000;  // the log's run_stop - run_start
  EXPECT_NEAR(json["published_minutes"].get<double>(), published, 1e-9);
  EXPECT_NEAR(json["error"].get<double>(), json["minutes"].get<double>() / published - 1, 1e-12);
  const auto text = predict_from_bench(layout + " --published " + results.string(), kGptLayerBench);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("  published: 64.288 minutes (the olympic score of 3 runs), error "), std::string::npos)
      << text.output;

  const auto with_plan = predict_from_bench(kGptLayout + " --plan --published " + results.string(), kGptLayerBench);
  EXPECT_EQ(with_plan.exit_code, 2);
  EXPECT_NE(with_plan.output.find("--published"), std::string::npos) << with_plan.output;
  const fs::path aborted = temp.path() / "aborted/results/x/gpt3";
  fs::create_directories(aborted);
  fs::copy_file(logs + "/aborted_gpt3_not_converged.txt", aborted / "result_0.txt");
  const auto unscored = predict_from_bench(layout + " --published " + aborted.string(), kGptLayerBench);
  EXPECT_EQ(unscored.exit_code, 2);
  EXPECT_NE(unscored.output.find(aborted.string()), std::string::npos) << unscored.output;
  EXPECT_NE(unscored.output.find("no run converged"), std::string::npos) << unscored.output;
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
  for (const auto& [flags, named] : cases)
    expect_refused(predict_from_bench(kGptLayout + flags, kGptLayerBench), flags, named);
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
  EXPECT_NE(other.output.find("gpt3 and bert only"), std::string::npos) << other.output;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A results tree as the published ones are laid out: <org>/results/<system>/gpt3/ with three copies of NVIDIA's n64 log
// (tests/review/logs_3.0.0) and <org>/systems/<system>.json, the description's accelerator replaced when given.
void add_gpt3_results(const fs::path& root, const std::string& organization, const std::string& system,
                      const std::string& accelerator = "") {
  const std::string logs = GPT3_V30_LOGS_DIR;
  const fs::path results = root / organization / "results" / system / "gpt3";
  fs::create_directories(results);
  fs::create_directories(root / organization / "systems");
  for (const char* name : {"result_0.txt", "result_1.txt", "result_2.txt"})
    fs::copy_file(logs + "/good_gpt3_nvidia.txt", results / name);
  auto description = nlohmann::json::parse(std::ifstream(logs + "/systems/dgxh100_n64_nemo.json"));
  if (!accelerator.empty()) description["accelerator_model_name"] = accelerator;
  std::ofstream(root / organization / "systems" / (system + ".json")) << description.dump(2);
}

const std::string kGptCheckCalibration =
    " --calibration-layout tp=4,pp=8,v=12,b=1 --device-memory-gib 80 --distributed-optimizer";
const std::string kGptCheckLayouts = kGptCheckCalibration + " --layout tp=4,pp=8,v=12,b=1";

// predict-check --calibrate: every gpt3 folder under the root predicted at its system's nodes and its logs' batch, the
// table and the chart written; another accelerator's folder named, not predicted.
TEST(PredictCheckCli, Gpt3PublishedResultsGiveTheTableAndChart) {
  const trainbench::data::testing::TempDir temp;
  add_gpt3_results(temp.path(), "NVIDIA", "dgxh100_n64_nemo");
  add_gpt3_results(temp.path(), "Other", "copy_n64");
  add_gpt3_results(temp.path(), "Gaudi", "gaudi_n64", "Gaudi2");
  const fs::path svg = temp.path() / "gpt3.svg", table = temp.path() / "gpt3.md";
  const std::string calibrate = (temp.path() / "NVIDIA/results/dgxh100_n64_nemo/gpt3").string();
  const std::string check = "predict-check " + temp.path().string() + " --calibrate " + calibrate + kGptCheckLayouts;
  const auto result = run_trainbench(check + " --markdown " + table.string() + " --svg " + svg.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(read_text(table), result.output);
  EXPECT_NE(result.output.find("| NVIDIA `dgxh100_n64_nemo` (calibration) | 64 | 2048 | 128 | "), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("| Other `copy_n64` | 64 | 2048 | 128 | "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("| 64.288 | "), std::string::npos) << result.output;  // the olympic score
  EXPECT_NE(result.output.find("Not predicted, another accelerator than the calibration's: Gaudi `gaudi_n64` (Gaudi2)"),
            std::string::npos)
      << result.output;
  const std::string chart = read_text(svg);
  EXPECT_NE(chart.find("<title>gpt3 NVIDIA published</title>"), std::string::npos) << chart;
  EXPECT_NE(chart.find("<title>gpt3 Other predicted</title>"), std::string::npos) << chart;
  EXPECT_EQ(chart.find("Gaudi"), std::string::npos) << chart;

  const auto json = run_trainbench(check + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto rows = nlohmann::json::parse(json.output)["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0]["calibration"].get<bool>());
  const double published = (1684043940681.0 - 1684040083376.0) / 60000;  // the log's run_stop - run_start
  EXPECT_NEAR(rows[1]["published_minutes"].get<double>(), published, 1e-9);
  // The calibration predicts itself but for the last step's rounding up.
  EXPECT_NEAR(rows[1]["prediction"]["minutes"].get<double>(), published, 0.01 * published);
}

TEST(PredictCheckCli, Gpt3CheckRefusesBadFlagsByName) {
  const trainbench::data::testing::TempDir temp;
  add_gpt3_results(temp.path(), "NVIDIA", "dgxh100_n64_nemo");
  const std::string root = temp.path().string();
  const std::string calibrate = " --calibrate " + (temp.path() / "NVIDIA/results/dgxh100_n64_nemo/gpt3").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {calibrate + " --layout tp=4,pp=8,v=12,b=1 --device-memory-gib 80", "--calibration-layout"},
      {calibrate + " --calibration-layout tp=4,pp=8,v=12,b=1 --device-memory-gib 80", "--layout"},
      {calibrate + " --calibration-layout tp=4,pp=8,v=12,b=1 --layout tp=4,pp=8,v=12,b=1", "--device-memory-gib"},
      {calibrate + kGptCheckCalibration + " --layout tp=3,pp=8", "--layout: " + root},
      {calibrate + kGptCheckCalibration + " --layout tp=4", "--layout: needs tp=N and pp=N"},
      {calibrate + kGptCheckLayouts + " --gradient-bytes 1G", "--gradient-bytes"},
      {kGptCheckLayouts, "give --calibrate"},
  };
  for (const auto& [flags, named] : cases)
    expect_refused(run_trainbench("predict-check " + root + flags), flags, named);
}

// BERT under tp/pp: the 3-D model with BERT-Large's shape, from a bench of the whole model on one node.
constexpr const char* kBertBench = R"({"benchmark": "bert", "global_batch": 448, "ranks": 8, "step_seconds": 0.2})";
const std::string kBertLayout =
    "bert --nodes 2 --devices-per-node 8 --global-batch 256 --device-memory-gib 80 --bench-layers 24 "
    "--inter-bandwidth 200 --intra-bandwidth 300";

TEST(PredictBertCli, ALayoutFromABenchCountsSamples) {
  const auto result =
      predict_from_bench(kBertLayout + " --tensor-parallel 2 --pipeline-parallel 2 --micro-batch 4 --json", kBertBench);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = nlohmann::json::parse(result.output);
  double parts = 0;
  for (const auto& [name, seconds] : json["parts"].items()) parts += seconds.get<double>();
  EXPECT_NEAR(json["minutes"].get<double>() * 60, parts, 1e-6);
  EXPECT_EQ(json["layout"]["data_parallel"], 4);
  EXPECT_EQ(json["layout"]["micro_batches"], 16);  // 256 sequences over 4 replicas in micro-batches of 4
  EXPECT_GT(json["parts"]["pipeline_bubble_seconds"].get<double>(), 0);
  EXPECT_GT(json["parts"]["tensor_parallel_seconds"].get<double>(), 0);
  // The v1.1 RCP's samples at batch 256, 256 of them a step.
  EXPECT_DOUBLE_EQ(json["steps"].get<double>(), std::ceil(json["samples_to_converge"].get<double>() / 256));
  EXPECT_FALSE(json.contains("tokens_to_converge"));
  const auto plan = predict_from_bench(kBertLayout + " --plan --json", kBertBench);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_GT(nlohmann::json::parse(plan.output)["layouts_that_fit"].get<int>(), 1);
}

TEST(PredictBertCli, LayoutsThatDoNotDivideBertAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --tensor-parallel 32 --pipeline-parallel 1", "--tensor-parallel: 32 does not divide the 16 heads"},
      {" --tensor-parallel 1 --pipeline-parallel 16", "--pipeline-parallel: 24 layers do not divide into 16 stages"},
      {" --tensor-parallel 1 --pipeline-parallel 8 --interleave 2", "--interleave: 24 layers"},
      {" --tensor-parallel 2 --pipeline-parallel 2 --per-device-batch 8", "--per-device-batch"},
  };
  for (const auto& [flags, named] : cases)
    expect_refused(predict_from_bench(kBertLayout + flags, kBertBench), flags, named);
  // Without a layout, --plan or --sweep, bert is the data-parallel model, which takes no 3-D flag.
  const auto data_parallel = predict_from_bench("bert --nodes 2 --devices-per-node 8 --global-batch 256", kBertBench);
  expect_refused(data_parallel, "--global-batch without a layout", "--tensor-parallel");
}

}  // namespace
