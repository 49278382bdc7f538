// Data-parallel runs through the trainbench binary: `trainbench launch` starting real ranks that talk
// over Gloo on loopback. Checks the collectives, that 2 ranks train like 1 rank with the same global
// batch, and that a rank that dies or hangs ends the run promptly, named, with an aborted log.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using Result = trainbench::testing::BinaryResult;

Result run(const std::string& arguments) { return trainbench::testing::run_trainbench(arguments); }

// The values logged under `key`, in order.
std::vector<double> logged_values(const std::string& log, const std::string& key) {
  std::vector<double> values;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(":::MLLOG ", 0) != 0) continue;
    const auto record = nlohmann::json::parse(line.substr(9));
    if (record["key"] == key) values.push_back(record["value"].get<double>());
  }
  return values;
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  return text.substr(text.rfind('\n', end) + 1, end - text.rfind('\n', end));
}

class DistributedRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = fs::temp_directory_path() / ("trainbench_parallel_data_" + std::to_string(::getpid()));
    fs::remove_all(data_);
    // A small mini dataset: 10 classes x 64 training images, 5 steps of the global batch of 128 per epoch.
    const Result made = run("data make resnet --out " + data_.string() +
                            " --set dataset.train_per_class=64 --set dataset.val_per_class=16");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { fs::remove_all(data_); }

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_parallel_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string run_flags(const std::string& system, int epochs) const {
    return "run resnet --quiet --threads 1 --seed 7 --data " + data_.string() + " --out " + (dir_ / "results").string() +
           " --system " + system + " --set max_epochs=" + std::to_string(epochs) + " --set train_epochs=" +
           std::to_string(epochs);
  }
  std::string log_of(const std::string& system) const {
    return trainbench::read_file((dir_ / "results" / system / "resnet/result_0.txt").string());
  }

  static fs::path data_;
  fs::path dir_;
};

fs::path DistributedRunTest::data_;

TEST_F(DistributedRunTest, CommProbeChecksEveryCollectiveOnTwoRanks) {
  const std::string json = (dir_ / "comm.json").string();
  const Result result = run("launch --nproc 2 -- probe comm -b 8 -e 64K -f 16 -n 2 -w 1 --json " + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, ::testing::HasSubstr("# trainbench probe comm: gloo, 2 rank(s), float"));
  EXPECT_THAT(result.output, ::testing::HasSubstr("# Wrong elements: 0"));
  const auto report = nlohmann::json::parse(trainbench::read_file(json));
  // 5 operations x 4 sizes (8 B, 128 B, 2 KiB, 32 KiB) x 2 placements, less all-to-all in place.
  EXPECT_EQ(report["rows"].size(), 5u * 4 * 2 - 4);
  for (const auto& row : report["rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_GT(row["busbw_GBps"].get<double>(), 0) << row.dump();
  }
  EXPECT_EQ(report["environment"]["ranks"], 2);
  EXPECT_EQ(report["arguments"]["maxbytes"], 65536);
}

// A tensor x data layout of 4 ranks: the tensor groups {0,1} {2,3} and the data groups {0,2} {1,3} all-reduce
// alone and at once, every element checked.
// Outside the fixture: it needs no dataset.
TEST(DistributedProbeTest, CommProbeRunsTheTensorAndDataGroupsAloneAndAtOnce) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_layout_probe_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string json = (dir / "comm.json").string();
  const Result result = run(
      "launch --nproc 4 -- probe comm -b 8 -e 4K -f 8 -n 2 -w 1 --ops all_reduce --tensor-parallel 2 --json " + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, ::testing::HasSubstr("2 tensor-parallel groups of 2 neighbouring ranks, 2 data-parallel"));
  const auto report = nlohmann::json::parse(trainbench::read_file(json));
  ASSERT_EQ(report["layout_rows"].size(), 4u);  // 8 B, 64 B, 512 B, 4 KiB
  for (const auto& row : report["layout_rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    for (const char* time : {"tp_alone_us", "dp_alone_us", "tp_beside_dp_us", "dp_beside_tp_us"})
      EXPECT_GT(row[time].get<double>(), 0) << row.dump();
  }
  const Result uneven = run("launch --nproc 4 -- probe comm -b 8 -e 64 --tensor-parallel 3");
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_THAT(uneven.output, ::testing::HasSubstr("--tensor-parallel"));
  fs::remove_all(dir);
}

// Same seed and global batch: the ranks see disjoint halves of each global batch with the same
// augmentation, and gradients are averaged, so only batch-norm differs — each rank normalizes with the
// statistics of its half batch, as data-parallel training without synchronized batch norm does.
TEST_F(DistributedRunTest, TwoRanksFollowTheOneRankLossTrajectory) {
  const Result one = run(run_flags("one", 3));
  ASSERT_THAT(one.exit_code, ::testing::AnyOf(0, 1)) << one.output;
  const Result two = run("launch --nproc 2 -- " + run_flags("two", 3));
  ASSERT_THAT(two.exit_code, ::testing::AnyOf(0, 1)) << two.output;
  const std::string log_one = log_of("one"), log_two = log_of("two");
  EXPECT_EQ(logged_values(log_one, "global_batch_size"), logged_values(log_two, "global_batch_size"));
  EXPECT_EQ(logged_values(log_one, "train_samples"), logged_values(log_two, "train_samples"));
  EXPECT_EQ(logged_values(log_two, "trainbench_ranks"), std::vector<double>{2});
  const auto loss_one = logged_values(log_one, "trainbench_train_loss"), loss_two = logged_values(log_two, "trainbench_train_loss");
  ASSERT_EQ(loss_one.size(), 3u);
  ASSERT_EQ(loss_two.size(), 3u);
  for (size_t epoch = 0; epoch < loss_one.size(); ++epoch) {
    std::printf("epoch %zu mean training loss: 1 rank %.5f, 2 ranks %.5f\n", epoch + 1, loss_one[epoch], loss_two[epoch]);
    EXPECT_NEAR(loss_two[epoch], loss_one[epoch], 0.05 * loss_one[epoch]) << "epoch " << epoch + 1;
  }
  EXPECT_FALSE(fs::exists(dir_ / "results/two/resnet/result_1.txt"));  // only rank 0 writes a log
}

// MiniGo over two ranks (tiny preset, its target built in init): each rank plays half of every generation's
// games and the examples are gathered, so the generations play as many games as one rank's, generation 1
// trains on the same bootstrap window (its loss differs only by each rank's batch-norm half batches), and
// the log passes review.
TEST_F(DistributedRunTest, TwoMinigoRanksShareSelfPlayAndTrainOnOneRanksWindow) {
  const auto minigo_flags = [&](const std::string& system) {
    return "run minigo --preset tiny --quiet --threads 1 --seed 3 --out " + (dir_ / "results").string() + " --system " +
           system + " --set max_generations=2";
  };
  const Result one = run(minigo_flags("one"));
  ASSERT_THAT(one.exit_code, ::testing::AnyOf(0, 1)) << one.output;
  const Result two = run("launch --nproc 2 -- " + minigo_flags("two"));
  ASSERT_THAT(two.exit_code, ::testing::AnyOf(0, 1)) << two.output;
  const auto log_one = trainbench::read_file((dir_ / "results/one/minigo/result_0.txt").string());
  const auto log_two = trainbench::read_file((dir_ / "results/two/minigo/result_0.txt").string());
  EXPECT_EQ(logged_values(log_two, "trainbench_ranks"), std::vector<double>{2});
  EXPECT_EQ(logged_values(log_two, "actual_selfplay_games_per_generation"),
            logged_values(log_one, "actual_selfplay_games_per_generation"));
  EXPECT_EQ(logged_values(log_two, "trainbench_selfplay_games_per_second").size(), 1u) << "generation 2's self-play";
  const auto loss_one = logged_values(log_one, "trainbench_train_loss"), loss_two = logged_values(log_two, "trainbench_train_loss");
  ASSERT_EQ(loss_one.size(), 2u);
  ASSERT_EQ(loss_two.size(), 2u);
  EXPECT_NEAR(loss_two[0], loss_one[0], 0.05 * loss_one[0]) << "generation 1 trains on the bootstrap window";
  const Result review = run("review --log " + (dir_ / "results/two/minigo/result_0.txt").string());
  EXPECT_EQ(review.exit_code, 0) << review.output;
  EXPECT_NE(review.output.find("compliant"), std::string::npos) << review.output;
}

// DLRM with its tables sharded over two ranks (tiny preset; the 26 tables whole, 13 a rank): vectors and
// gradients go by all-to-all, the MLPs stay data-parallel. It trains the replicated run's model to rounding
// (the same initial rows, the same updates), so both evaluate alike at every evaluation and stop at the same one.
TEST_F(DistributedRunTest, TwoDlrmRanksWithShardedTablesTrainTheReplicatedModelToTheTarget) {
  const fs::path data = dir_ / "dlrm_data";
  const Result made = run("data make dlrm --preset tiny --out " + data.string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto dlrm_flags = [&](const std::string& system, const std::string& sharding) {
    return "launch --nproc 2 -- run dlrm --preset tiny --quiet --threads 1 --seed 4 --data " + data.string() + " --out " +
           (dir_ / "results").string() + " --system " + system + " --set embedding_sharding=" + sharding;
  };
  const Result sharded = run(dlrm_flags("sharded", "sharded"));
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  const Result replicated = run(dlrm_flags("replicated", "replicated"));
  ASSERT_EQ(replicated.exit_code, 0) << replicated.output;
  const std::string log_sharded = trainbench::read_file((dir_ / "results/sharded/dlrm/result_0.txt").string());
  const std::string log_replicated = trainbench::read_file((dir_ / "results/replicated/dlrm/result_0.txt").string());
  EXPECT_THAT(log_sharded, ::testing::HasSubstr("\"key\": \"trainbench_embedding_sharding\", \"value\": \"sharded\""));
  const auto auc_sharded = logged_values(log_sharded, "eval_accuracy"), auc_replicated = logged_values(log_replicated, "eval_accuracy");
  ASSERT_EQ(auc_sharded.size(), auc_replicated.size()) << "they stopped at different evaluations";
  for (size_t i = 0; i < auc_sharded.size(); ++i) EXPECT_NEAR(auc_sharded[i], auc_replicated[i], 1e-4) << "evaluation " << i + 1;
  const Result review = run("review --log " + (dir_ / "results/sharded/dlrm/result_0.txt").string());
  EXPECT_EQ(review.exit_code, 0) << review.output;
  EXPECT_NE(review.output.find("compliant"), std::string::npos) << review.output;
}

// Starts a 2-rank run in the background and returns the launcher's pid and rank 1's pid once rank 0's log
// shows training under way.
struct Background {
  pid_t launcher = -1;
  pid_t rank1 = -1;
};

Background start_until_training(const std::string& arguments, const fs::path& messages, const fs::path& partial_log) {
  Background background;
  background.launcher = trainbench::testing::start_in_background(std::string(TRAINBENCH_BINARY) + " " + arguments, messages.string());
  const std::regex rank1_line("launch: rank 1 pid ([0-9]+)");
  for (int i = 0; i < 1200 && (background.rank1 < 0 || !fs::exists(partial_log) ||
                               trainbench::read_file(partial_log.string()).find("\"block_start\"") == std::string::npos);
       ++i) {
    std::smatch match;
    const std::string text = fs::exists(messages) ? trainbench::read_file(messages.string()) : "";
    if (std::regex_search(text, match, rank1_line)) background.rank1 = std::stoi(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return background;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_F(DistributedRunTest, AKilledRankEndsTheRunNamingItWithAnAbortedLog) {
  const fs::path partial = dir_ / "results/crash/resnet/result_0.txt.partial";
  const Background job = start_until_training("launch --nproc 2 --grace 20 -- " + run_flags("crash", 50),
                                              dir_ / "launch.txt", partial);
  ASSERT_GT(job.rank1, 0) << trainbench::read_file((dir_ / "launch.txt").string());
  ASSERT_TRUE(fs::exists(partial));
  ::kill(job.rank1, SIGKILL);
  double seconds = 0;
  const int code = trainbench::testing::wait_for_exit(job.launcher, 60, &seconds);
  const std::string messages = trainbench::read_file((dir_ / "launch.txt").string());
  EXPECT_EQ(code, 128 + SIGKILL) << messages;  // the launcher reports the first rank that failed
  EXPECT_LT(seconds, 20) << messages;          // rank 0 noticed at once, well inside the grace period
  EXPECT_THAT(messages, ::testing::HasSubstr("launch: failed: rank 1 (pid " + std::to_string(job.rank1) + ") was killed by signal 9"));
  const std::string log = log_of("crash");
  const std::string stop = last_line(log);
  EXPECT_THAT(stop, ::testing::HasSubstr("\"key\": \"run_stop\""));
  EXPECT_THAT(stop, ::testing::HasSubstr("\"status\": \"aborted\""));
  EXPECT_THAT(stop, ::testing::HasSubstr("rank 1 stopped responding")) << stop;
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_FALSE(process_exists(job.rank1));
  EXPECT_EQ(::system(("pgrep -f '[s]ystem crash' > /dev/null")), 256) << "a rank outlived the launcher";
}

TEST_F(DistributedRunTest, AHungRankEndsTheRunWithinTheTimeout) {
  const fs::path partial = dir_ / "results/hang/resnet/result_0.txt.partial";
  // A long grace: the launcher must not wait it out for a rank that is stopped and cannot notice anything.
  const Background job = start_until_training("launch --nproc 2 --grace 60 -- " + run_flags("hang", 50) + " --comm-timeout 5",
                                              dir_ / "launch.txt", partial);
  ASSERT_GT(job.rank1, 0) << trainbench::read_file((dir_ / "launch.txt").string());
  ::kill(job.rank1, SIGSTOP);
  double seconds = 0;
  const int code = trainbench::testing::wait_for_exit(job.launcher, 90, &seconds);
  const std::string messages = trainbench::read_file((dir_ / "launch.txt").string());
  EXPECT_EQ(code, 128 + SIGSTOP) << messages;
  EXPECT_LT(seconds, 5 + 5 + 15) << messages;  // timeout, diagnosis, the stopped rank's own stop (docs/reliability.md)
  // Rank 0 exits first (its collective timed out), but the launcher names the rank that caused it.
  EXPECT_THAT(messages, ::testing::HasSubstr("launch: failed: rank 1 (pid " + std::to_string(job.rank1) + ") was stopped by signal " +
                                             std::to_string(SIGSTOP)))
      << messages;
  const std::string stop = last_line(log_of("hang"));
  EXPECT_THAT(stop, ::testing::HasSubstr("\"status\": \"aborted\""));
  EXPECT_THAT(stop, ::testing::HasSubstr("rank 1 stopped responding")) << stop;
  EXPECT_FALSE(process_exists(job.rank1));
  EXPECT_EQ(::system(("pgrep -f '[s]ystem hang' > /dev/null")), 256) << "a rank outlived the launcher";
}

}  // namespace
