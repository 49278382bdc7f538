// Two nodes in two network namespaces joined by a veth pair, each running `trainbench launch` with one
// rank; the link is cut while they train. Every rank must stop on its own within --comm-timeout plus the
// stated margin (docs/reliability.md): rank 0 with an aborted log naming rank 1, rank 1 with a message that
// rank 0 is unreachable. Needs root and network namespaces (CI has both); otherwise it says so and skips.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/child_process.h"
#include "support/trainbench_binary.h"
#include "support/two_nodes.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kCommTimeoutSeconds = 5;
constexpr int kMarginSeconds = 17;  // docs/reliability.md: diagnosis (at most 7 s) and the 10 s shutdown watchdog

TEST(NetworkPartition, EveryRankStopsWithinTheTimeoutPlusTheMarginAndSaysWhy) {
  const trainbench::testing::TwoNodes nodes;
  if (!nodes.unavailable().empty()) GTEST_SKIP() << "network partition test skipped: " << nodes.unavailable();
  const fs::path dir = fs::temp_directory_path() / ("trainbench_partition_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto made = trainbench::testing::run_trainbench("data make dlrm --preset tiny --out " + (dir / "data").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const int port = 29000 + ::getpid() % 1000;
  const auto node = [&](int node_rank) {
    return trainbench::testing::on_node(
        nodes, node_rank,
        std::string(TRAINBENCH_BINARY) + " launch --nnodes 2 --nproc 1 --grace 120 --node-rank " + std::to_string(node_rank) +
            " --master-addr " + nodes.address_a() + " --master-port " + std::to_string(port) +
            " -- run dlrm --preset tiny --quiet --threads 1 --set target=0.99 --seed 3 --comm-timeout " +
            std::to_string(kCommTimeoutSeconds) + " --data " + (dir / "data").string() + " --out " + (dir / "results").string() +
            " --system node" + std::to_string(node_rank));
  };

  const pid_t node0 = trainbench::testing::start_in_background(node(0), (dir / "node0.txt").string());
  const pid_t node1 = trainbench::testing::start_in_background(node(1), (dir / "node1.txt").string());
  const fs::path partial = dir / "results/node0/dlrm/result_0.txt.partial";
  for (int i = 0; i < 1200 && !(fs::exists(partial) && trainbench::read_file(partial.string()).find("\"block_start\"") != std::string::npos); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(partial)) << trainbench::read_file((dir / "node0.txt").string()) << trainbench::read_file((dir / "node1.txt").string());
  nodes.cut();
  const auto cut_at = Clock::now();

  const double limit = kCommTimeoutSeconds + kMarginSeconds;
  double stopped_after[2] = {-1, -1};
  int status[2] = {0, 0};
  const pid_t pids[2] = {node0, node1};
  while ((stopped_after[0] < 0 || stopped_after[1] < 0) && std::chrono::duration<double>(Clock::now() - cut_at).count() < 3 * limit) {
    for (int n = 0; n < 2; ++n)
      if (stopped_after[n] < 0 && ::waitpid(pids[n], &status[n], WNOHANG) == pids[n])
        stopped_after[n] = std::chrono::duration<double>(Clock::now() - cut_at).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int n = 0; n < 2; ++n) {
    if (stopped_after[n] < 0) {
      ::kill(pids[n], SIGKILL);  // the launcher; its rank dies with it
      ::waitpid(pids[n], &status[n], 0);
    }
  }
  const std::string out0 = trainbench::read_file((dir / "node0.txt").string());
  const std::string out1 = trainbench::read_file((dir / "node1.txt").string());
  std::printf("after the cut: node 0 stopped in %.1f s, node 1 in %.1f s (bound %.0f s)\n", stopped_after[0], stopped_after[1], limit);
  for (int n = 0; n < 2; ++n) {
    EXPECT_GE(stopped_after[n], 0) << "node " << n << " did not stop\n" << (n ? out1 : out0);
    EXPECT_LT(stopped_after[n], limit) << "node " << n << "\n" << (n ? out1 : out0);
    EXPECT_TRUE(WIFEXITED(status[n]) && WEXITSTATUS(status[n]) != 0) << (n ? out1 : out0);
  }
  const std::string log = trainbench::read_file((dir / "results/node0/dlrm/result_0.txt").string());
  const std::string stop = log.substr(log.rfind(":::MLLOG"));
  EXPECT_THAT(stop, ::testing::HasSubstr("\"status\": \"aborted\""));
  EXPECT_THAT(stop, ::testing::HasSubstr("rank 1 stopped responding")) << stop;
  EXPECT_THAT(out1, ::testing::HasSubstr("rank 0, which hosts the rendezvous store at " + nodes.address_a())) << out1;
  fs::remove_all(dir);
}

}  // namespace
