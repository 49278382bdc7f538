// BERT under tensor_parallel 2 x pipeline_parallel 2 through the trainbench binary: four real ranks started by
// `trainbench launch`, over Gloo on loopback. The tiny preset reaches its target and its log passes review as a
// one-rank log does; a stage that dies ends the run naming it.
#include <csignal>
#include <filesystem>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "review/compliance.h"
#include "review/ruleset.h"
#include "support/child_process.h"
#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace trainbench::bert {
namespace {

namespace fs = std::filesystem;

class BertPlanRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = fs::temp_directory_path() / ("trainbench_bert_plan_data_" + std::to_string(::getpid()));
    fs::remove_all(data_);
    const auto made = testing::run_trainbench("data make bert --preset tiny --out " + data_.string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { fs::remove_all(data_); }
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_bert_plan_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two micro-batches a step: the smallest number the 1F1B schedule overlaps across the two stages; four took
  // half as long again (50 s against 33 s on the 2-core VM) for the same evaluations.
  std::string run_flags(const std::string& system) const {
    return "run bert --preset tiny --quiet --threads 1 --seed 5 --data " + data_.string() + " --out " +
           (dir_ / "results").string() + " --system " + system +
           " --set tensor_parallel=2 --set pipeline_parallel=2 --set gradient_accumulation_steps=2";
  }

  static fs::path data_;
  fs::path dir_;
};

fs::path BertPlanRun::data_;

TEST_F(BertPlanRun, TinyAtTensor2Pipeline2ReachesItsTargetAndItsLogPassesReview) {
  const auto result = testing::run_trainbench("launch --nproc 4 -- " + run_flags("plan"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const std::string log_path = (dir_ / "results/plan/bert/result_0.txt").string();
  const review::RunReview review = review::review_log_file(log_path, review::load_ruleset("1.1.0"));
  for (const auto& finding : review.findings)
    if (finding.severity == review::Severity::kError) ADD_FAILURE() << review::format_finding(finding);
  EXPECT_TRUE(review.converged());
  const std::string log = read_file(log_path);
  EXPECT_THAT(log, ::testing::HasSubstr("\"key\": \"trainbench_tensor_parallel\", \"value\": 2"));
  EXPECT_THAT(log, ::testing::HasSubstr("\"key\": \"trainbench_pipeline_parallel\", \"value\": 2"));
}

TEST_F(BertPlanRun, AKilledStageEndsTheRunNamingIt) {
  const fs::path messages = dir_ / "launch.txt", partial = dir_ / "results/crash/bert/result_0.txt.partial";
  const pid_t launcher = testing::start_in_background(
      std::string(TRAINBENCH_BINARY) + " launch --nproc 4 --grace 20 -- " + run_flags("crash") +
          " --set max_samples=10000000 --set eval_interval_samples=10000000",
      messages.string());
  // Rank 2 is stage 1's first tensor-parallel rank (world rank = tensor + 2 x stage).
  const std::regex rank2_line("launch: rank 2 pid ([0-9]+)");
  pid_t rank2 = -1;
  for (int i = 0; i < 1200; ++i) {
    std::smatch match;
    const std::string text = fs::exists(messages) ? read_file(messages.string()) : "";
    if (std::regex_search(text, match, rank2_line)) rank2 = std::stoi(match[1]);
    if (rank2 > 0 && fs::exists(partial) && read_file(partial.string()).find("\"block_start\"") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(rank2, 0) << read_file(messages.string());
  ::kill(rank2, SIGKILL);
  double seconds = 0;
  const int code = testing::wait_for_exit(launcher, 90, &seconds);
  const std::string text = read_file(messages.string());
  EXPECT_EQ(code, 128 + SIGKILL) << text;
  EXPECT_THAT(
      text, ::testing::HasSubstr("launch: failed: rank 2 (pid " + std::to_string(rank2) + ") was killed by signal 9"));
  const std::string log = read_file((dir_ / "results/crash/bert/result_0.txt").string());
  EXPECT_THAT(log, ::testing::HasSubstr("\"status\": \"aborted\""));
  EXPECT_THAT(log, ::testing::HasSubstr("rank 2 stopped responding"))
      << log.substr(log.size() > 600 ? log.size() - 600 : 0);
}

}  // namespace
}  // namespace trainbench::bert
