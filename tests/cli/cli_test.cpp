// The trainbench binary as a user meets it: help, clear errors with exit code 2, and an interrupted run
// that ends its log with run_stop "aborted" and exits non-zero.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;

using Result = trainbench::testing::BinaryResult;

Result run(const std::string& arguments) { return trainbench::testing::run_trainbench(arguments); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainbench_cli_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliTest, HelpExplainsEveryRunFlag) {
  const Result result = run("run --help");
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag : {"--preset", "--data", "--runs", "--out", "--system", "--seed", "--threads", "--set",
                           "--skip-corrupt", "--device", "--org", "--division", "--status"})
    EXPECT_NE(result.output.find(flag), std::string::npos) << flag;
}

// Every list of benchmarks a user sees comes from the registry.
TEST_F(CliTest, HelpTextsListTheRegisteredBenchmarks) {
  const Result listing = run("benchmarks");
  EXPECT_EQ(listing.exit_code, 0);
  for (const char* command : {"run --help", "bench --help", "data make --help"}) {
    const Result help = run(command);
    EXPECT_EQ(help.exit_code, 0) << command;
    for (const char* benchmark : {"resnet", "bert", "dlrm", "unet3d"}) {
      EXPECT_NE(help.output.find(benchmark), std::string::npos) << command << " omits " << benchmark;
      EXPECT_NE(listing.output.find(std::string(benchmark) + " "), std::string::npos) << "benchmarks omits " << benchmark;
    }
  }
  const Result prepare = run("data prepare --help");
  EXPECT_NE(prepare.output.find("Benchmark (dlrm, unet3d)"), std::string::npos) << prepare.output;
}

TEST_F(CliTest, BadInputGetsAClearErrorAndExitCode2) {
  Result result = run("run imagenet");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("benchmark 'imagenet': unknown (expected one of: resnet, bert, dlrm, unet3d)"), std::string::npos) << result.output;

  result = run("run resnet --preset huge");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--preset: 'huge' is not a preset of resnet (expected one of: mini, reference, tiny)"),
            std::string::npos)
      << result.output;

  result = run("run resnet --set batch_size=abc --data " + dir_.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--set batch_size: expected an integer, got a string"), std::string::npos) << result.output;

  result = run("run resnet --preset reference");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--data: preset 'reference' of resnet trains on the real dataset"), std::string::npos) << result.output;

  result = run("run resnet --no-such-flag");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--no-such-flag"), std::string::npos) << result.output;

  result = run("run resnet --runs 0");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--runs"), std::string::npos) << result.output;
}

TEST_F(CliTest, DataPrepareConvertsCriteoDayFilesAndExplainsBadInput) {
  std::string line = "1";
  for (int i = 0; i < 13; ++i) line += "\t" + std::to_string(i);
  for (int i = 0; i < 26; ++i) line += "\t0000abcd";
  for (const char* day : {"day_0", "day_1"}) std::ofstream(dir_ / day) << line << "\n" << line << "\n";
  Result result = run("data prepare dlrm --in " + dir_.string() + " --out " + (dir_ / "prepared").string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(dir_ / "prepared" / "train.bin"));
  EXPECT_TRUE(fs::exists(dir_ / "prepared" / "eval.bin"));

  std::ofstream(dir_ / "day_1", std::ios::app) << "1\t2\n";
  result = run("data prepare dlrm --in " + dir_.string() + " --out " + (dir_ / "again").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir_ / "day_1").string() + ":3: short line: 2 tab-separated fields"), std::string::npos)
      << result.output;

  result = run("data prepare resnet --in " + dir_.string() + " --out " + (dir_ / "x").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("resnet: reads its dataset as published"), std::string::npos) << result.output;
}

TEST_F(CliTest, MissingDatasetNamesTheDirectoryAndTheLogSaysAborted) {
  const Result result = run("run resnet --quiet --seed 1 --data " + (dir_ / "nowhere").string() + " --out " + (dir_ / "results").string() +
                            " --system box");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir_ / "nowhere").string() + ": dataset directory does not exist"), std::string::npos) << result.output;
  const std::string log = trainbench::read_file((dir_ / "results/box/resnet/result_0.txt").string());
  EXPECT_NE(log.find("\"key\": \"run_stop\", \"value\": null, \"metadata\": {\"file\": \"runner.cpp\""), std::string::npos);
  EXPECT_NE(log.find("\"status\": \"aborted\""), std::string::npos);
}

TEST_F(CliTest, SigtermAbortsTheRunWithACompleteLog) {
  ASSERT_EQ(run("data make resnet --set dataset.train_per_class=64 --set dataset.val_per_class=16 --out " + (dir_ / "data").string()).exit_code, 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string data = (dir_ / "data").string(), out = (dir_ / "results").string();
    ::execl(TRAINBENCH_BINARY, TRAINBENCH_BINARY, "run", "resnet", "--quiet", "--threads", "1", "--seed", "5", "--data",
            data.c_str(), "--out", out.c_str(), "--system", "box", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path partial = dir_ / "results/box/resnet/result_0.txt.partial";
  // Wait until the run is on the clock (its log has run_start), then interrupt it.
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(partial) && trainbench::read_file(partial.string()).find("\"run_start\"") != std::string::npos) break;
    ::usleep(50 * 1000);
  }
  ::usleep(500 * 1000);
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(partial));
  const std::string log = trainbench::read_file((dir_ / "results/box/resnet/result_0.txt").string());
  const auto last_line = log.substr(log.rfind(":::MLLOG", log.size() - 2));
  EXPECT_NE(last_line.find("\"key\": \"run_stop\""), std::string::npos) << last_line;
  EXPECT_NE(last_line.find("\"status\": \"aborted\", \"error\": \"interrupted by signal 15\""), std::string::npos) << last_line;
}

}  // namespace
