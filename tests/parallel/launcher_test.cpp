// The launcher with a shell as the rank program: environment, exit codes, and stopping the others.
#include "parallel/launcher.h"

#include <chrono>
#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::parallel {
namespace {

namespace fs = std::filesystem;

LaunchOptions shell(int ranks, const std::string& script) {
  LaunchOptions options;
  options.processes_per_node = ranks;
  options.program = "/bin/sh";
  options.arguments = {"-c", script};
  options.grace = std::chrono::milliseconds(300);
  return options;
}

TEST(Launcher, EachRankGetsTheTorchrunVariables) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_launcher_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ostringstream messages;
  const int code = launch_ranks(
      shell(2, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT\" > " + dir.string() + "/rank$RANK"),
      messages);
  EXPECT_EQ(code, 0) << messages.str();
  const std::string rank0 = read_file((dir / "rank0").string()), rank1 = read_file((dir / "rank1").string());
  EXPECT_THAT(rank0, ::testing::StartsWith("0 2 0 2 127.0.0.1 "));
  EXPECT_THAT(rank1, ::testing::StartsWith("1 2 1 2 127.0.0.1 "));
  EXPECT_EQ(rank0.substr(rank0.rfind(' ')), rank1.substr(rank1.rfind(' ')));  // one port for all
  EXPECT_THAT(messages.str(), ::testing::HasSubstr("launch: all 2 ranks finished"));
  fs::remove_all(dir);
}

// launch under srun or mpirun (one per node): the scheduler's rank variables do not reach the ranks, whose
// RANK/WORLD_SIZE would otherwise disagree with them.
TEST(Launcher, TheSchedulersRankVariablesDoNotReachTheRanks) {
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  const fs::path dir = fs::temp_directory_path() / ("trainbench_launcher_scheduler_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ostringstream messages;
  const int code = launch_ranks(
      shell(2, "echo \"[${SLURM_PROCID-unset}] [${OMPI_COMM_WORLD_SIZE-unset}]\" > " + dir.string() + "/rank$RANK"),
      messages);
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(code, 0) << messages.str();
  EXPECT_EQ(read_file((dir / "rank1").string()), "[unset] [unset]\n");
  fs::remove_all(dir);
}

TEST(Launcher, AFailedRankIsNamedAndTheOthersAreStopped) {
  std::ostringstream messages;
  const auto begin = std::chrono::steady_clock::now();
  const int code = launch_ranks(shell(3, "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"), messages);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(code, 3);
  EXPECT_LT(seconds, 10);  // grace 0.3 s, then SIGTERM ends the sleeping ranks
  EXPECT_THAT(messages.str(), ::testing::HasSubstr("launch: failed: rank 1 (pid "));
  EXPECT_THAT(messages.str(), ::testing::HasSubstr(") exited with status 3"));
  EXPECT_THAT(messages.str(), ::testing::HasSubstr("rank 0 was killed by signal 15"));
}

TEST(Launcher, ARankKilledByASignalGives128PlusTheSignal) {
  std::ostringstream messages;
  EXPECT_EQ(launch_ranks(shell(1, "kill -9 $$"), messages), 128 + 9);
  EXPECT_THAT(messages.str(), ::testing::HasSubstr("rank 0 (pid "));
  EXPECT_THAT(messages.str(), ::testing::HasSubstr("was killed by signal 9"));
}

TEST(Launcher, BadOptionsNameTheFlag) {
  std::ostringstream messages;
  LaunchOptions options = shell(2, "true");
  options.nodes = 2;
  options.node_rank = 2;
  EXPECT_THROW(launch_ranks(options, messages), Error);
  options.node_rank = 1;
  try {
    launch_ranks(options, messages);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("--master-port: must be given when the job spans several nodes"));
  }
}

}  // namespace
}  // namespace trainbench::parallel
