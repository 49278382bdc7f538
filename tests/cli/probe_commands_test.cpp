// `trainbench probe` as a user meets it: help, a small storage run with its JSON copy, and exit code 2 with a
// message naming the flag for bad input.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/test_files.h"
#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;
using trainbench::testing::run_trainbench;

class ProbeCliTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_ / "data" / "class0"); }
  const trainbench::data::testing::TempDir temp_;
  const fs::path dir_ = temp_.path();
};

TEST_F(ProbeCliTest, HelpNamesTheProbesAndTheirFlags) {
  auto result = run_trainbench("probe compute --help");
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag : {"--device", "--threads", "--seconds", "--json"})
    EXPECT_NE(result.output.find(flag), std::string::npos) << flag;
  result = run_trainbench("probe storage --help");
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag : {"--dir", "--threads", "--files-max", "--seed", "--checkpoint-size", "--checkpoint-dir", "--no-evict", "--json"})
    EXPECT_NE(result.output.find(flag), std::string::npos) << flag;
}

TEST_F(ProbeCliTest, StorageProbeReportsAndWritesItsJsonCopy) {
  for (int i = 0; i < 5; ++i) std::ofstream(dir_ / "data" / "class0" / ("s" + std::to_string(i))) << std::string(1000 + i, 'x');
  const std::string json = (dir_ / "storage.json").string();
  const auto result = run_trainbench("probe storage --dir " + (dir_ / "data").string() + " --threads 2 --checkpoint-size 2M --json " + json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("dataset reads: 5 of 5 files"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("every byte read back matched"), std::string::npos) << result.output;
  const auto report = nlohmann::json::parse(trainbench::read_file(json));
  EXPECT_EQ(report["probe"], "storage");
  EXPECT_EQ(report["arguments"]["threads"], 2);
  EXPECT_EQ(report["dataset_read"]["files_read"], 5);
  EXPECT_EQ(report["dataset_read"]["bytes"], 5 * 1000 + 10);
  EXPECT_EQ(report["checkpoint"]["bytes"], 2 << 20);
  EXPECT_EQ(report["checkpoint"]["verified"], true);
  const std::string label = report["dataset_read"]["cache"]["label"];
  EXPECT_TRUE(label == "cold" || label == "warm") << label;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "data"), fs::directory_iterator()), 1) << "the checkpoint was not removed";
}

TEST_F(ProbeCliTest, BadInputGetsAClearErrorAndExitCode2) {
  const std::string data = (dir_ / "data").string();
  auto result = run_trainbench("probe storage --dir " + (dir_ / "missing").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--dir " + (dir_ / "missing").string() + ": does not exist; expected a folder"), std::string::npos)
      << result.output;

  result = run_trainbench("probe storage --dir " + data);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--dir " + data + ": holds no files to read"), std::string::npos) << result.output;

  std::ofstream(dir_ / "data" / "class0" / "sample") << "bytes";
  result = run_trainbench("probe storage --dir " + data + " --checkpoint-size 1Q");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--checkpoint-size '1Q': expected a size in bytes like 4096, 512K, 512M or 1G"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("dataset reads"), std::string::npos) << "sizes are checked before anything is measured";

  result = run_trainbench("bench resnet --peak " + (dir_ / "no-such-probe.json").string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir_ / "no-such-probe.json").string() + ": cannot open for reading"), std::string::npos) << result.output;
}

}  // namespace
