#include "parallel/rank_environment.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench::parallel {
namespace {

EnvironmentLookup from(std::map<std::string, std::string> variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

TEST(RankEnvironment, NoLauncherMeansOneRank) {
  const RankEnvironment env = detect_rank_environment(from({}));
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world, 1);
  EXPECT_EQ(env.local_world, 1);
}

TEST(RankEnvironment, TorchrunVariables) {
  const RankEnvironment env = detect_rank_environment(from({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"},
                                                            {"LOCAL_WORLD_SIZE", "8"}, {"MASTER_ADDR", "node0"},
                                                            {"MASTER_PORT", "29511"}}));
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world, 8);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29511);
  EXPECT_NE(env.source.find("torchrun"), std::string::npos);
}

TEST(RankEnvironment, SrunVariablesWithTheFirstNodeAsMaster) {
  const RankEnvironment env = detect_rank_environment(
      from({{"SLURM_PROCID", "9"}, {"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_LOCALID", "1"},
            {"SLURM_STEP_TASKS_PER_NODE", "8(x2)"}, {"SLURM_STEP_NODELIST", "gpu[003-004]"}, {"SLURM_NTASKS", "16"}}));
  EXPECT_EQ(env.rank, 9);
  EXPECT_EQ(env.world, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world, 8);
  EXPECT_EQ(env.master_addr, "gpu003");
  EXPECT_EQ(env.master_port, kDefaultMasterPort);
}

TEST(RankEnvironment, ASlurmBatchScriptWithoutSrunIsOneRank) {
  const RankEnvironment env = detect_rank_environment(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}}));
  EXPECT_EQ(env.world, 1);
}

TEST(RankEnvironment, OpenMpiVariables) {
  const RankEnvironment env = detect_rank_environment(
      from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
}

TEST(RankEnvironment, OpenMpiAcrossNodesNeedsMasterAddr) {
  EXPECT_THAT(testing::error_message([&] { detect_rank_environment(from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})); }), ::testing::HasSubstr("environment variable MASTER_ADDR: is needed when mpirun spans several nodes"));
}

TEST(RankEnvironment, BadValuesNameTheVariable) {
  EXPECT_THAT(testing::error_message([&] {
                detect_rank_environment(from({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
              }),
              ::testing::HasSubstr("environment variable RANK: expected an integer, got \"x\""));
  EXPECT_THAT(
      testing::error_message([&] {
        detect_rank_environment(from({{"RANK", "0"}, {"WORLD_SIZE", "2147483647"}}));
      }),
      ::testing::HasSubstr("environment variable WORLD_SIZE: expected an integer from 1 to 1000000, got 2147483647"));
  EXPECT_THAT(testing::error_message([&] { detect_rank_environment(from({{"RANK", "2"}, {"WORLD_SIZE", "2"}})); }), ::testing::HasSubstr("environment variable RANK: 2 is not below WORLD_SIZE = 2"));
  EXPECT_THAT(testing::error_message([&] { detect_rank_environment(from({{"RANK", "0"}})); }), ::testing::HasSubstr("environment variables RANK and WORLD_SIZE: must be set together"));
  EXPECT_THAT(testing::error_message([&] {
                detect_rank_environment(from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}));
              }),
              ::testing::HasSubstr("environment variable MASTER_PORT: expected a port 1..65535, got 70000"));
}

// torchrun's variables are read first; a scheduler's set beside them must name the same rank and world.
TEST(RankEnvironment, TorchrunAndSchedulerVariablesMustAgree) {
  const RankEnvironment agreed = detect_rank_environment(
      from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(agreed.rank, 1);
  EXPECT_THAT(
      testing::error_message([&] {
        detect_rank_environment(
            from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
      }),
      ::testing::HasSubstr("environment variables RANK/WORLD_SIZE and OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE: "
                           "disagree (rank 0 of 2 against rank 1 of 2)"));
  EXPECT_THAT(testing::error_message([&] {
                detect_rank_environment(
                    from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
              }),
              ::testing::HasSubstr("disagree (rank 0 of 2 against rank 0 of 4)"));
}

TEST(RankEnvironment, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node7"), "node7");
  EXPECT_EQ(first_slurm_host("a1,a2"), "a1");
  EXPECT_EQ(first_slurm_host("gpu[010,012-014],io1"), "gpu010");
  EXPECT_THAT(testing::error_message([&] { first_slurm_host("gpu[01"); }), ::testing::HasSubstr("has an unclosed '['"));
}

}  // namespace
}  // namespace trainbench::parallel
