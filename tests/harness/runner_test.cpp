#include "harness/runner.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "harness/interrupt.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

// A workload that returns scripted metrics and records what the harness asked of it. Its description and
// data summary are fields, so each test shapes it like the benchmark it stands for.
class ScriptedWorkload : public Workload {
 public:
  std::vector<Metric> metrics;
  std::vector<std::string> calls;
  int interrupt_in_block = -1;
  bool fail_in_train = false;
  std::function<void()> on_build, on_open_data;  // e.g. throw, as a workload refusing bad input does
  WorkloadDescription description = [] {
    WorkloadDescription description;
    description.benchmark = "resnet";
    description.preset = "test";
    description.schedule = {3, 4, 20};
    description.target.threshold = 0.75;
    description.hyperparameters = {{"global_batch_size", 32}, {"opt_name", "lars"}};
    description.effective_config = {{"batch_size", 32}};
    description.overrides = {"batch_size=32"};
    return description;
  }();
  DataSummary data{100, 10, {{"lars_opt_learning_rate_decay_steps", 50}}, std::nullopt};
  int64_t samples_per_step = 100;
  int steps_per_block = 1;
  // Known time per block: waiting for input, computing, and per evaluation (for the time split).
  std::chrono::milliseconds input_wait{0}, compute{0}, evaluation{0};
  // Of `evaluation`, reported as input wait (evaluate() reading its data): the harness counts it as evaluation.
  std::chrono::milliseconds evaluation_input_wait{0};
  std::vector<HyperParameter> logged_per_block;

  WorkloadDescription describe() const override { return description; }
  std::vector<std::string> build() override {
    calls.push_back("build");
    if (on_build) on_build();
    return {"conv0_weight", "fc1_bias"};
  }
  DataSummary open_data() override {
    calls.push_back("open_data");
    if (on_open_data) on_open_data();
    return data;
  }
  BlockReport train(const Block& block, RunControl& control) override {
    calls.push_back("train " + std::to_string(static_cast<int>(block.first_epoch_num)) + "+" +
                    std::to_string(static_cast<int>(block.epoch_count)));
    if (fail_in_train) throw Error("data/train/x.JPEG: truncated file");
    if (interrupt_in_block == blocks_++) request_interrupt(SIGTERM);
    std::this_thread::sleep_for(input_wait);
    control.add_input_wait(std::chrono::duration<double>(input_wait).count());
    std::this_thread::sleep_for(compute);
    for (int step = 0; step < steps_per_block; ++step) control.step(samples_per_step, 1.0);
    return {samples_per_step * steps_per_block, 1.0, 0, logged_per_block};
  }
  Metric evaluate(const Block& block, RunControl& control) override {
    calls.push_back("evaluate " + std::to_string(static_cast<int>(block.last_epoch_num())));
    std::this_thread::sleep_for(evaluation);
    control.add_input_wait(std::chrono::duration<double>(evaluation_input_wait).count());
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
  EXPECT_EQ(workload.calls, (std::vector<std::string>{"build", "open_data", "train 1+3", "evaluate 3", "train 4+4",
                                                      "evaluate 7", "train 8+4", "evaluate 11"}));
  EXPECT_FALSE(fs::exists(options_.result_path + ".partial"));
  const auto records = read_log(options_.result_path);
  const auto keys = keys_of(records);
  const std::vector<std::string> expected_prefix = {
      "submission_benchmark", "submission_org", "submission_division", "submission_status", "submission_platform",
      "cache_clear", "init_start", "trainbench_version", "trainbench_libtorch", "trainbench_preset", "trainbench_target",
      "trainbench_overrides", "trainbench_config", "trainbench_threads", "trainbench_device", "trainbench_ranks", "seed", "global_batch_size", "opt_name", "weights_initialization",
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
  // The last evaluation, then block_stop, trainbench_time_split, trainbench_cpu_contention (and
  // trainbench_warning on a busy machine) and run_stop.
  const size_t last_eval = keys.size() - 1 - (std::find(keys.rbegin(), keys.rend(), "eval_accuracy") - keys.rbegin());
  ASSERT_LE(last_eval + 4, keys.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin() + last_eval + 1, keys.begin() + last_eval + 4),
            (std::vector<std::string>{"block_stop", "trainbench_time_split", "trainbench_cpu_contention"}));
  const auto& last_accuracy = records[last_eval];
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
  workload.metrics = std::vector<Metric>(6, 0.5);
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

const nlohmann::json& first_record(const std::vector<nlohmann::json>& records, const std::string& key) {
  const auto keys = keys_of(records);
  const auto found = std::find(keys.begin(), keys.end(), key);
  EXPECT_NE(found, keys.end()) << "no " << key;
  return records.at(static_cast<size_t>(found - keys.begin()));
}

std::vector<nlohmann::json> records_of(const std::vector<nlohmann::json>& records, const std::string& key) {
  std::vector<nlohmann::json> found;
  for (const auto& record : records)
    if (record["key"] == key) found.push_back(record);
  return found;
}

// Issue 18: a run refused for bad input (a setting the workload rejects, a missing dataset) is no run;
// review would count a committed log as one.
TEST_F(RunnerTest, BadInputWhileBuildingOrOpeningTheDataCommitsNoResult) {
  for (const bool in_build : {true, false}) {
    ScriptedWorkload workload;
    const auto refuse = [] { fail("resnet/test: batch_size", "expected at least 1, got -5"); };
    (in_build ? workload.on_build : workload.on_open_data) = refuse;
    EXPECT_THROW(run_benchmark(workload, options_, ticking_clock()), Error);
    EXPECT_FALSE(fs::exists(dir_)) << (in_build ? "build" : "open_data");
  }
}

// Anything that is not a trainbench::Error (a LibTorch c10::Error, bad_alloc) still ends the log as
// aborted, even during init, and reaches the caller.
TEST_F(RunnerTest, AnUnexpectedFailureDuringInitStillCommitsAnAbortedLog) {
  ScriptedWorkload workload;
  workload.on_build = [] { throw std::runtime_error("Expected a non-empty list of stage widths"); };
  EXPECT_THROW(run_benchmark(workload, options_, ticking_clock()), std::runtime_error);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records.back()["metadata"]["status"], "aborted");
  EXPECT_EQ(records.back()["metadata"]["error"], "Expected a non-empty list of stage widths");
}

TEST_F(RunnerTest, TextThatIsNotUtf8IsLoggedWithReplacementCharacters) {
  ScriptedWorkload workload;
  workload.on_open_data = [] { throw std::runtime_error("/data/\xff\xfe: cannot list"); };
  EXPECT_THROW(run_benchmark(workload, options_, ticking_clock()), std::runtime_error);
  EXPECT_EQ(read_log(options_.result_path).back()["metadata"]["error"], "/data/\uFFFD\uFFFD: cannot list");
}

// Any number of runs sharing one results folder each reserve their own result_N.txt and end with their own
// complete log (issue 18: two runs took result_0 and wrote into the same partial file).
TEST_F(RunnerTest, ConcurrentRunsIntoOneFolderEachCommitTheirOwnLog) {
  for (const int runs : {2, 4, 8}) {
    RunOptions options = options_;
    options.result_dir = (dir_ / std::to_string(runs)).string();
    std::vector<pid_t> children;
    for (int run = 0; run < runs; ++run) {
      const pid_t child = ::fork();
      if (child == 0) {
        ScriptedWorkload workload;
        workload.metrics = {0.2, 0.5, 0.76};
        workload.compute = std::chrono::milliseconds(5);
        options.seed = run;
        const RunOutcome outcome = run_benchmark(workload, options);
        ::_exit(outcome.converged ? 0 : 1);
      }
      children.push_back(child);
    }
    for (const pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    std::set<int64_t> seeds;
    for (int index = 0; index < runs; ++index) {
      const auto records = read_log((fs::path(options.result_dir) / ("result_" + std::to_string(index) + ".txt")).string());
      EXPECT_EQ(records.front()["key"], "submission_benchmark");
      EXPECT_EQ(records.back()["key"], "run_stop");
      EXPECT_EQ(records.back()["metadata"]["status"], "success");
      EXPECT_EQ(records_of(records, "seed").size(), 1u);
      seeds.insert(records_of(records, "seed").at(0)["value"].get<int64_t>());
    }
    EXPECT_EQ(seeds.size(), static_cast<size_t>(runs)) << "a log holds another run's lines";
    EXPECT_EQ(std::distance(fs::directory_iterator(options.result_dir), fs::directory_iterator()), runs);
  }
}

TEST_F(RunnerTest, LogRecordsTheOverridesTheEffectiveConfigAndTheLibTorchBuild) {
  ScriptedWorkload workload;
  workload.metrics = {0.9};
  run_benchmark(workload, options_, ticking_clock());
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(first_record(records, "trainbench_overrides")["value"], nlohmann::json::array({"batch_size=32"}));
  EXPECT_EQ(first_record(records, "trainbench_config")["value"], nlohmann::json({{"batch_size", 32}}));
  const std::string libtorch = first_record(records, "trainbench_libtorch")["value"];
  EXPECT_TRUE(libtorch.find("(CPU)") != std::string::npos || libtorch.find("(CUDA") != std::string::npos) << libtorch;
}

// Mask R-CNN: eval_accuracy is {"BBOX": x, "SEGM": y}, and the target is reached only when both parts
// reach their own thresholds in the same evaluation.
TEST_F(RunnerTest, NamedPartMetricReachesTheTargetOnlyWhenEveryPartDoes) {
  ScriptedWorkload workload;
  workload.description.benchmark = "maskrcnn";
  workload.description.schedule = {1, 1, 10};
  workload.description.target.threshold = Metric::named({{"BBOX", 0.377}, {"SEGM", 0.339}});
  workload.metrics = {Metric::named({{"BBOX", 0.30}, {"SEGM", 0.20}}), Metric::named({{"BBOX", 0.39}, {"SEGM", 0.33}}),
                      Metric::named({{"BBOX", 0.38}, {"SEGM", 0.34}})};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(outcome.convergence_epoch, 3);
  EXPECT_EQ(outcome.last_metric.text(), "BBOX 0.3800, SEGM 0.3400");
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(first_record(records, "trainbench_target")["value"], nlohmann::json({{"BBOX", 0.377}, {"SEGM", 0.339}}));
  const auto accuracies = records_of(records, "eval_accuracy");
  ASSERT_EQ(accuracies.size(), 3u);
  EXPECT_EQ(accuracies[1]["value"], nlohmann::json({{"BBOX", 0.39}, {"SEGM", 0.33}}));
  EXPECT_EQ(records.back()["metadata"]["status"], "success");
}

TEST(QualityTarget, ComesFromThePresetAsNumberOrNamedPartsWithADirection) {
  const QualityTarget wer = QualityTarget::from_config(
      Config("rnnt/mini", {{"target", 0.058}, {"target_direction", "lower"}}));
  EXPECT_FALSE(wer.higher_is_better);
  EXPECT_TRUE(wer.reached(0.05));
  EXPECT_FALSE(wer.reached(10.43));
  EXPECT_FALSE(wer.reached(NAN));
  EXPECT_EQ(wer.text(), "eval_accuracy <= 0.058");
  const QualityTarget map = QualityTarget::from_config(Config("maskrcnn/mini", {{"target", {{"BBOX", 0.377}, {"SEGM", 0.339}}}}));
  EXPECT_TRUE(map.reached(Metric::named({{"BBOX", 0.377}, {"SEGM", 0.339}})));
  EXPECT_FALSE(map.reached(Metric::named({{"BBOX", 0.5}, {"SEGM", 0.3}})));
  EXPECT_THROW(map.reached(0.5), Error);  // a plain number where parts were promised
  EXPECT_THROW(QualityTarget::from_config(Config("x/mini", {{"target", "high"}})), Error);
  EXPECT_THROW(QualityTarget::from_config(Config("x/mini", {{"target", 1}, {"target_direction", "up"}})), Error);
}

// RNN-T: the word error rate is lower-is-better and above 1 early on.
TEST_F(RunnerTest, LowerIsBetterMetricConvergesWhenItFallsToTheTarget) {
  ScriptedWorkload workload;
  workload.description.benchmark = "rnnt";
  workload.description.schedule = {1, 1, 10};
  workload.description.target.threshold = 0.058;
  workload.description.target.higher_is_better = false;
  workload.metrics = {10.43, 0.2, 0.057};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(outcome.convergence_epoch, 3);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records_of(records, "eval_accuracy")[0]["value"], 10.43);
  EXPECT_EQ(first_record(records, "trainbench_target")["metadata"]["higher_is_better"], false);
}

// U-Net3D: the first evaluation at CEILING(1000*168/samples_per_epoch) epochs, then every
// CEILING(20*168/samples_per_epoch), known only once open_data() has seen the dataset.
TEST_F(RunnerTest, ScheduleFromTheDataReplacesTheDescribedOne) {
  ScriptedWorkload workload;
  workload.description.benchmark = "unet3d";
  const int64_t samples_per_epoch = 168 * 50;  // -> first at epoch 20, then every 1 epoch
  workload.data.train_samples = samples_per_epoch;
  EvalSchedule from_data;
  from_data.first_block = std::ceil(1000.0 * 168 / samples_per_epoch);
  from_data.interval = std::ceil(20.0 * 168 / samples_per_epoch);
  from_data.max_epochs = std::ceil(10000.0 * 168 / samples_per_epoch);
  workload.data.schedule = from_data;
  workload.metrics = {0.5, 0.6, 0.91};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(workload.calls, (std::vector<std::string>{"build", "open_data", "train 1+20", "evaluate 20", "train 21+1",
                                                      "evaluate 21", "train 22+1", "evaluate 22"}));
  const auto blocks = records_of(read_log(options_.result_path), "block_start");
  EXPECT_EQ(blocks[0]["metadata"]["epoch_count"], 20);
  EXPECT_EQ(blocks[1]["metadata"]["first_epoch_num"], 21);
}

// MiniGo: no dataset, per-generation values in the log, and the quality of each saved generation judged
// after training; run_stop is dated when the first passing generation was saved.
TEST_F(RunnerTest, DatasetlessWorkloadEvaluatesSavedGenerationsAfterTraining) {
  ScriptedWorkload workload;
  workload.description.benchmark = "minigo";
  workload.description.uses_dataset = false;
  workload.description.schedule.first_block = 1;
  workload.description.schedule.interval = 1;
  workload.description.schedule.max_epochs = 4;
  workload.description.schedule.unit = ScheduleUnit::kGenerations;
  workload.description.schedule.evaluation = Evaluation::kAfterTraining;
  workload.description.target.threshold = 0.5;
  workload.data = {};
  workload.logged_per_block = {{"actual_selfplay_games_per_generation", 8200}};
  workload.metrics = {0.3, 0.5, 0.9};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());

  EXPECT_TRUE(outcome.converged);
  EXPECT_EQ(outcome.convergence_epoch, 2);
  EXPECT_EQ(outcome.unit, ScheduleUnit::kGenerations);
  EXPECT_EQ(workload.calls, (std::vector<std::string>{"build", "open_data", "train 1+1", "train 2+1", "train 3+1",
                                                      "train 4+1", "evaluate 1", "evaluate 2"}));
  const auto records = read_log(options_.result_path);
  const auto keys = keys_of(records);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "train_samples"), 0);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "eval_samples"), 0);
  const auto games = records_of(records, "actual_selfplay_games_per_generation");
  ASSERT_EQ(games.size(), 4u);
  EXPECT_EQ(games[1]["metadata"]["epoch_num"], 2);
  // Generation 2 was saved at its block_stop; run_stop carries that time although its evaluation came later.
  const auto block_stops = records_of(records, "block_stop");
  ASSERT_EQ(block_stops.size(), 4u);
  const auto& run_stop = records.back();
  EXPECT_EQ(run_stop["key"], "run_stop");
  EXPECT_EQ(run_stop["metadata"]["status"], "success");
  EXPECT_LT(run_stop["time_ms"].get<int64_t>(), records_of(records, "eval_accuracy")[0]["time_ms"].get<int64_t>());
  EXPECT_EQ(run_stop["time_ms"].get<int64_t>(), block_stops[1]["time_ms"].get<int64_t>());
  const int64_t run_start = first_record(records, "run_start")["time_ms"];
  EXPECT_DOUBLE_EQ(outcome.minutes, (run_stop["time_ms"].get<int64_t>() - run_start) / 60000.0);
}

TEST_F(RunnerTest, DatasetlessWorkloadThatNeverPassesIsAbortedAfterEvaluatingEveryGeneration) {
  ScriptedWorkload workload;
  workload.description.uses_dataset = false;
  workload.description.schedule = {1, 1, 2};
  workload.description.schedule.evaluation = Evaluation::kAfterTraining;
  workload.metrics = {0.1, 0.2};
  const RunOutcome outcome = run_benchmark(workload, options_, ticking_clock());
  EXPECT_FALSE(outcome.converged);
  const auto records = read_log(options_.result_path);
  EXPECT_EQ(records.back()["metadata"]["status"], "aborted");
  EXPECT_GT(records.back()["time_ms"].get<int64_t>(), records_of(records, "eval_accuracy")[1]["time_ms"].get<int64_t>());
}

std::string progress_output(ScriptedWorkload& workload, RunOptions options) {
  std::FILE* stream = std::tmpfile();
  options.show_progress = true;
  options.progress_stream = stream;
  run_benchmark(workload, options);
  std::rewind(stream);
  std::string text;
  for (int c; (c = std::fgetc(stream)) != EOF;) text += static_cast<char>(c);
  std::fclose(stream);
  return text;
}

// BERT counts samples: the progress line and the evaluations it shows stay in samples in every block
// (the second block once showed the block's first sample number as an "epoch").
TEST_F(RunnerTest, ProgressLineShowsSamplesForASampleSchedule) {
  ScriptedWorkload workload;
  workload.description.benchmark = "bert";
  workload.description.schedule = {8000, 8000, 24000};
  workload.description.schedule.unit = ScheduleUnit::kSamples;
  workload.description.target.threshold = 0.72;
  workload.data.train_samples = 200000;
  workload.samples_per_step = 2000;
  workload.steps_per_block = 4;
  workload.metrics = {0.1, 0.2, 0.3};
  const std::string text = progress_output(workload, options_);
  EXPECT_NE(text.find("| 16000 samples |"), std::string::npos) << text;
  EXPECT_NE(text.find("eval 0.2000 @16000 samples"), std::string::npos) << text;
  EXPECT_EQ(text.find("epoch"), std::string::npos) << text;
}

// GPT-3 counts tokens: the progress line and epoch_num are samples trained times the sequence length.
TEST_F(RunnerTest, ATokenScheduleCountsSamplesTimesTheSequenceLength) {
  ScriptedWorkload workload;
  workload.description.benchmark = "gpt3";
  workload.description.schedule = {8192, 8192, 16384};
  workload.description.schedule.unit = ScheduleUnit::kTokens;
  workload.description.schedule.units_per_sample = 128;
  workload.description.target.threshold = 0.72;
  workload.data.train_samples = 1000;
  workload.samples_per_step = 16;
  workload.steps_per_block = 4;
  workload.metrics = {0.1, 0.2};
  const std::string text = progress_output(workload, options_);
  EXPECT_NE(text.find("| 16384 tokens |"), std::string::npos) << text;
  EXPECT_NE(text.find("eval 0.2000 @16384 tokens"), std::string::npos) << text;
}

TEST_F(RunnerTest, ProgressLineShowsFractionalEpochsForAnEpochSchedule) {
  ScriptedWorkload workload;
  workload.description.schedule = {1, 1, 2};
  workload.data.train_samples = 400;
  workload.samples_per_step = 100;
  workload.steps_per_block = 4;
  workload.metrics = {0.5, 0.9};
  const std::string text = progress_output(workload, options_);
  EXPECT_NE(text.find("| epoch   2.00 |"), std::string::npos) << text;
  EXPECT_NE(text.find("eval 0.9000 @epoch 2"), std::string::npos) << text;
}

// Rounding to 3 or 4 decimals moves a figure by up to half a step; a half step that is exact in decimal can
// come out a few ulps over it in binary (0.213 - 0.2125), so the tolerances carry a little slack.
constexpr double kHalfStep3 = 5e-4 + 1e-12;
constexpr double kHalfStep4 = 5e-5 + 1e-12;

// The timed region splits into training compute, input wait, evaluation, rank wait and the rest, and the
// parts add up to run_stop - run_start: in the outcome, the summary line and the log.
TEST_F(RunnerTest, TimeSplitAccountsForKnownSleepsAndAddsUpToTheTimedRegion) {
  ScriptedWorkload workload;
  workload.description.schedule = {1, 1, 2};
  workload.input_wait = std::chrono::milliseconds(200);
  workload.compute = std::chrono::milliseconds(300);
  workload.evaluation = std::chrono::milliseconds(100);
  workload.evaluation_input_wait = std::chrono::milliseconds(50);  // inside evaluate(): evaluation, not input wait
  workload.metrics = {0.1, 0.9};
  const RunOutcome outcome = run_benchmark(workload, options_);  // the real clock
  const TimeSplit& split = outcome.time_split;
  EXPECT_NEAR(split.input_wait, 0.4, 0.01);  // reported, so exact up to the millisecond
  EXPECT_NEAR(split.training_compute, 0.6, 0.15);  // sleeps overrun on a loaded machine
  EXPECT_NEAR(split.evaluation, 0.2, 0.1);
  EXPECT_LT(split.rank_wait, 0.01);
  EXPECT_LT(split.other, 0.1);
  EXPECT_NEAR(split.total(), outcome.minutes * 60, 1e-9);
  EXPECT_NEAR(split.share(split.training_compute) + split.share(split.input_wait) + split.share(split.evaluation) +
                  split.share(split.rank_wait) + split.share(split.other),
              1, 1e-12);

  // The log: seconds as the value, adding up to run_start..run_stop on the log's own clock; shares in the metadata.
  const auto records = read_log(options_.result_path);
  const auto& logged = first_record(records, "trainbench_time_split");
  EXPECT_EQ(logged["metadata"]["unit"], "seconds");
  const double wall = (first_record(records, "run_stop")["time_ms"].get<int64_t>() -
                       first_record(records, "run_start")["time_ms"].get<int64_t>()) / 1000.0;
  double seconds = 0, shares = 0;
  for (const auto& [part, value] : split.parts()) {
    EXPECT_EQ(logged["value"][part].get<double>(), value) << part;
    seconds += logged["value"][part].get<double>();
    shares += logged["metadata"]["shares"][part].get<double>();
  }
  EXPECT_NEAR(seconds, wall, 1e-9);
  EXPECT_NEAR(shares, 1, 3e-4);  // five shares rounded to 4 decimals
  EXPECT_NEAR(logged["metadata"]["shares"]["evaluation"].get<double>(), split.share(split.evaluation), kHalfStep4);
}

// The wall time is the log's clock; should the harness's measurements exceed it (a clock coarser than the
// steady clock), they shrink to fit and the parts still add up to run_start..run_stop.
TEST_F(RunnerTest, TimeSplitFitsALogClockShorterThanTheMeasuredParts) {
  ScriptedWorkload workload;
  workload.description.schedule = {1, 1, 1};
  workload.input_wait = std::chrono::milliseconds(20);
  workload.compute = std::chrono::milliseconds(60);
  workload.metrics = {0.9};
  int64_t now_ms = 0;
  const RunOutcome outcome = run_benchmark(workload, options_, [&] { return now_ms += 1; });  // 1 ms a line
  const TimeSplit& split = outcome.time_split;
  EXPECT_LT(outcome.minutes * 60, 0.08);
  EXPECT_NEAR(split.total(), outcome.minutes * 60, 1e-9);
  EXPECT_GT(split.training_compute, split.input_wait);  // in proportion
  for (const double part : {split.training_compute, split.input_wait, split.evaluation, split.rank_wait, split.other})
    EXPECT_GE(part, 0);
}

// What other processes took of the run's CPUs, logged after the time split; the figures depend on the
// machine, so this checks their shape and that the outcome and the log agree.
TEST_F(RunnerTest, CpuContentionIsLoggedBeforeRunStop) {
  ScriptedWorkload workload;
  workload.description.schedule = {1, 1, 1};
  workload.compute = std::chrono::milliseconds(200);
  workload.metrics = {0.9};
  const RunOutcome outcome = run_benchmark(workload, options_);
  const CpuContention& contention = outcome.cpu_contention;
  ASSERT_TRUE(contention.measured());
  EXPECT_EQ(contention.cpus, sample_cpu_usage().cpus);
  EXPECT_GE(contention.other_processes_seconds, 0);
  EXPECT_LE(contention.share(), 1 + 1e-9);
  const auto records = read_log(options_.result_path);
  const auto& logged = first_record(records, "trainbench_cpu_contention");
  EXPECT_EQ(logged["metadata"]["unit"], "cpu_seconds");
  EXPECT_EQ(logged["metadata"]["cpus"], cpu_list_text(contention.cpus));
  EXPECT_NEAR(logged["value"]["other_processes"].get<double>(), contention.other_processes_seconds, kHalfStep3);
  EXPECT_NEAR(logged["value"]["steal"].get<double>(), contention.steal_seconds, kHalfStep3);
  EXPECT_NEAR(logged["metadata"]["capacity"].get<double>(), contention.capacity_seconds, kHalfStep3);
  EXPECT_NEAR(logged["metadata"]["shares"]["other_processes"].get<double>(), contention.other_processes_share(), kHalfStep4);
  const auto keys = keys_of(records);
  const bool warned = std::find(keys.begin(), keys.end(), "trainbench_warning") != keys.end();
  EXPECT_EQ(warned, !contention.warning().empty());
  if (warned) {
    EXPECT_EQ(first_record(records, "trainbench_warning")["value"], contention.warning());
  }
}

TEST(TimeSplit, SummaryGivesEachPartsSecondsAndShare) {
  const TimeSplit split{6, 0.4, 2, 0, 1.6};
  EXPECT_EQ(split.text(), "training compute 6.000 s (60.0%), input wait 0.400 s (4.0%), evaluation 2.000 s (20.0%), "
                          "rank wait 0.000 s (0.0%), other 1.600 s (16.0%)");
  EXPECT_EQ(TimeSplit{}.share(0), 0);
}

// MiniGo's timed region ends when the passing generation was saved: the generations after it and the
// evaluations are outside it.
TEST_F(RunnerTest, TimeSplitOfAWorkloadEvaluatedAfterTrainingStopsAtThePassingSave) {
  ScriptedWorkload workload;
  workload.description.uses_dataset = false;
  workload.description.schedule = {1, 1, 3};
  workload.description.schedule.evaluation = Evaluation::kAfterTraining;
  workload.compute = std::chrono::milliseconds(200);
  workload.evaluation = std::chrono::milliseconds(300);
  workload.metrics = {0.9};
  const RunOutcome outcome = run_benchmark(workload, options_);
  EXPECT_TRUE(outcome.converged);
  EXPECT_NEAR(outcome.time_split.training_compute, 0.2, 0.08);
  EXPECT_EQ(outcome.time_split.evaluation, 0);
  EXPECT_NEAR(outcome.time_split.total(), outcome.minutes * 60, 1e-9);
}

TEST(SchedulePosition, ReadsInTheScheduleUnit) {
  EXPECT_EQ(describe_position(ScheduleUnit::kEpochs, 4), "epoch 4");
  EXPECT_EQ(describe_position(ScheduleUnit::kEpochs, 1.05), "epoch 1.05");
  EXPECT_EQ(describe_position(ScheduleUnit::kSamples, 16000), "16000 samples");
  EXPECT_EQ(describe_position(ScheduleUnit::kTokens, 1024000), "1024000 tokens");
  EXPECT_EQ(describe_position(ScheduleUnit::kGenerations, 3), "generation 3");
}

}  // namespace
}  // namespace trainbench
