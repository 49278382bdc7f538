#include "harness/runner.h"

#include <csignal>
#include <filesystem>

#include <gtest/gtest.h>

#include "harness/interrupt.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

// A workload that returns scripted metrics and records what the harness asked of it.
class ScriptedWorkload : public Workload {
 public:
  std::vector<double> metrics;
  std::vector<std::string> calls;
  int interrupt_in_block = -1;
  bool fail_in_train = false;

  WorkloadDescription describe() const override {
    WorkloadDescription description;
    description.benchmark = "resnet";
    description.preset = "test";
    description.schedule = {3, 4, 20};
    description.target = {"eval_accuracy", 0.75, true};
    description.hyperparameters = {{"global_batch_size", 32}, {"opt_name", "lars"}};
    return description;
  }
  std::vector<std::string> build() override {
    calls.push_back("build");
    return {"conv0_weight", "fc1_bias"};
  }
  DataSummary open_data() override {
    calls.push_back("open_data");
    return {100, 10, {{"lars_opt_learning_rate_decay_steps", 50}}};
  }
  BlockReport train(const Block& block, RunControl& control) override {
    calls.push_back("train " + std::to_string(static_cast<int>(block.first_epoch_num)) + "+" +
                    std::to_string(static_cast<int>(block.epoch_count)));
    if (fail_in_train) throw Error("data/train/x.JPEG: truncated file");
    if (interrupt_in_block == blocks_++) request_interrupt(SIGTERM);
    control.step(100, 1.0);
    return {100, 1.0, 0};
  }
  double evaluate(const Block&, RunControl&) override {
    calls.push_back("evaluate");
    return metrics.at(evaluations_++);
  }

 private:
  int blocks_ = 0;
  size_t evaluations_ = 0;
};

std::vector<nlohmann::json> read_log(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.rfind(":::MLLOG {", 0), 0u) << line;
    records.push_back(nlohmann::json::parse(line.substr(9)));
  }
  return records;
}

std::vector<std::string> keys_of(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> keys;
  for (const auto& record : records) keys.push_back(record["key"]);
  return keys;
}

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_interrupt();
    dir_ = fs::temp_directory_path() / ("trainbench_runner_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    options_.result_path = (dir_ / "result_0.txt").string();
    options_.seed = 42;
    options_.submission.platform = "test-box";
    options_.show_progress = false;
  }
  void TearDown() override {
    clear_interrupt();
    fs::remove_all(dir_);
  }
  // A clock that advances one second per log line, so minutes are predictable.
  MlLogger::Clock ticking_clock() {
    return [this] { return time_ms_ += 1000; };
  }
  fs::path dir_;
  RunOptions options_;
  int64_t time_ms_ = 0;
};

TEST(EvalSchedule, FirstBlockOffsetThenFixedInterval) {
  const auto blocks = EvalSchedule{3, 4, 20}.blocks();
  ASSERT_EQ(blocks.size(), 6u);
  EXPECT_EQ(blocks[0].first_epoch_num, 1);
  EXPECT_EQ(blocks[0].epoch_count, 3);
  EXPECT_EQ(blocks[1].first_epoch_num, 4);
  EXPECT_EQ(blocks[1].last_epoch_num(), 7);
  EXPECT_EQ(blocks[4].last_epoch_num(), 19);
  EXPECT_EQ(blocks[5].first_epoch_num, 20);  // the last block is cut at max_epochs
  EXPECT_EQ(blocks[5].epoch_count, 1);
}

TEST(EvalSchedule, PositionalTwentiethsOfAnEpochNumberEvaluationsLikeDlrm) {
  const auto blocks = EvalSchedule{0.05, 0.05, 2, true}.blocks();
  ASSERT_EQ(blocks.size(), 40u);
  EXPECT_EQ(blocks[0].first_epoch_num, 1);
  EXPECT_EQ(blocks[0].last_epoch_num(), 1.05);
  EXPECT_EQ(blocks[1].first_epoch_num, 1.05);
  EXPECT_EQ(blocks[1].last_epoch_num(), 1.1);  // exactly the double 1.1, so the log shows 1.1
  EXPECT_EQ(blocks[19].last_epoch_num(), 2);
  EXPECT_EQ(blocks[39].last_epoch_num(), 3);
  double total = 0;
  for (const Block& block : blocks) total += block.epoch_count;
  EXPECT_NEAR(total, 2, 1e-9);
}

TEST_F(RunnerTest, LifecycleIsInMlperfOrderAndStopsAtTheTarget) {
  ScriptedWorkload workload;
  workload.metrics = {0.2, 0.5, 0.76, 0.9};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());

  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(outcome.convergence_epoch, 11);
  EXPECT_EQ(workload.calls, (std::vector<std::string>{"build", "open_data", "train 1+3", "evaluate", "train 4+4", "evaluate",
                                                      "train 8+4", "evaluate"}));
  EXPECT_FALSE(fs::exists(options_.result_path + ".partial"));
  const auto records = read_log(options_.result_path);
  const auto keys = keys_of(records);
  const std::vector<std::string> expected_prefix = {
      "submission_benchmark", "submission_org", "submission_division", "submission_status", "submission_platform",
      "cache_clear", "init_start", "trainbench_version", "trainbench_preset", "trainbench_target", "trainbench_threads",
      "trainbench_device", "trainbench_ranks", "seed", "global_batch_size", "opt_name", "weights_initialization",
      "weights_initialization", "init_stop", "run_start", "train_samples", "eval_samples",
      "lars_opt_learning_rate_decay_steps", "block_start", "throughput", "trainbench_train_loss", "eval_start", "eval_stop", "eval_accuracy",
      "block_stop"};
  ASSERT_GE(keys.size(), expected_prefix.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + expected_prefix.size()), expected_prefix);
  EXPECT_EQ(keys.back(), "run_stop");
  EXPECT_EQ(records.back()["metadata"]["status"], "success");
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "eval_accuracy"), 3);

  const auto& first_block = records[std::find(keys.begin(), keys.end(), "block_start") - keys.begin()];
  EXPECT_EQ(first_block["event_type"], "INTERVAL_START");
  EXPECT_EQ(first_block["metadata"]["first_epoch_num"], 1);
  EXPECT_EQ(first_block["metadata"]["epoch_count"], 3);
  const auto& last_accuracy = records[keys.size() - 3];
  EXPECT_EQ(last_accuracy["key"], "eval_accuracy");
  EXPECT_EQ(last_accuracy["metadata"]["epoch_num"], 11);
  EXPECT_EQ(records[std::find(keys.begin(), keys.end(), "seed") - keys.begin()]["value"], 42);
  const auto& first_tensor = records[std::find(keys.begin(), keys.end(), "weights_initialization") - keys.begin()];
  EXPECT_EQ(first_tensor["metadata"]["tensor"], "conv0_weight");
  EXPECT_TRUE(first_tensor["value"].is_null());

  // minutes = (run_stop - run_start) / 60000 with the log's own timestamps
  const auto run_start = records[std::find(keys.begin(), keys.end(), "run_start") - keys.begin()]["time_ms"].get<int64_t>();
  const auto run_stop = records.back()["time_ms"].get<int64_t>();
  EXPECT_DOUBLE_EQ(outcome.minutes, (run_stop - run_start) / 60000.0);
}

TEST_F(RunnerTest, NotReachingTheTargetByMaxEpochsIsAborted) {
  ScriptedWorkload workload;
  workload.metrics = std::vector<double>(6, 0.5);
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_FALSE(outcome.converged);
  EXPECT_EQ(outcome.convergence_epoch, 20);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records.back()["key"], "run_stop");
  EXPECT_EQ(records.back()["metadata"]["status"], "aborted");
}

TEST_F(RunnerTest, SignalEndsTheLogWithAbortedAndCommitsIt) {
  ScriptedWorkload workload;
  workload.metrics = {0.1, 0.2, 0.3};
  workload.interrupt_in_block = 1;
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_EQ(outcome.interrupted_by, SIGTERM);
  EXPECT_FALSE(outcome.converged);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records.back()["key"], "run_stop");
  EXPECT_EQ(records.back()["metadata"]["status"], "aborted");
  EXPECT_NE(records.back()["metadata"]["error"].get<std::string>().find("signal 15"), std::string::npos);
  EXPECT_FALSE(fs::exists(options_.result_path + ".partial"));
}

TEST_F(RunnerTest, WorkloadErrorIsLoggedAsAbortedThenRethrown) {
  ScriptedWorkload workload;
  workload.fail_in_train = true;
  EXPECT_THROW(run_benchmark(workload, options_, ticking_clock()), Error);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records.back()["metadata"]["status"], "aborted");
  EXPECT_EQ(records.back()["metadata"]["error"], "data/train/x.JPEG: truncated file");
}

}  // namespace
}  // namespace trainbench
