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

#include "support/trainbench_binary.h"
#include "util/atomic_file.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kCommTimeoutSeconds = 5;
constexpr int kMarginSeconds = 17;  // docs/reliability.md: diagnosis (at most 7 s) and the 10 s shutdown watchdog

int shell(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()); }

// Two namespaces, a veth pair between them with 10.218.<n>.1 and .2; removed by the destructor.
class TwoNodes {
 public:
  TwoNodes() : tag_(std::to_string(::getpid() % 100000)) {
    if (::geteuid() != 0) {
      reason_ = "not root";
      return;
    }
    const std::string subnet = "10.218." + std::to_string(::getpid() % 250) + ".";
    address_a_ = subnet + "1";
    address_b_ = subnet + "2";
    const std::string setup = "ip netns add " + ns_a() + " && ip netns add " + ns_b() + " && ip link add " + veth_a() +
                              " type veth peer name " + veth_b() + " && ip link set " + veth_a() + " netns " + ns_a() +
                              " && ip link set " + veth_b() + " netns " + ns_b() + " && ip -n " + ns_a() + " addr add " +
                              address_a_ + "/24 dev " + veth_a() + " && ip -n " + ns_b() + " addr add " + address_b_ +
                              "/24 dev " + veth_b() + " && ip -n " + ns_a() + " link set " + veth_a() + " up && ip -n " +
                              ns_b() + " link set " + veth_b() + " up && ip -n " + ns_a() + " link set lo up && ip -n " +
                              ns_b() + " link set lo up";
    if (shell(setup) != 0) reason_ = "cannot create two network namespaces joined by a veth pair (`ip netns`, `ip link`)";
  }
  ~TwoNodes() { shell("ip netns del " + ns_a() + "; ip netns del " + ns_b()); }

  const std::string& unavailable() const { return reason_; }
  std::string ns_a() const { return "tb18a" + tag_; }
  std::string ns_b() const { return "tb18b" + tag_; }
  std::string veth_a() const { return "tb18va" + tag_; }
  std::string veth_b() const { return "tb18vb" + tag_; }
  const std::string& address_a() const { return address_a_; }
  // Cuts the link: both directions, and neither side gets a reset.
  void cut() const { shell("ip -n " + ns_a() + " link set " + veth_a() + " down"); }

 private:
  std::string tag_, address_a_, address_b_, reason_;
};

pid_t start(const std::string& command, const fs::path& output) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " > " + output.string() + " 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(NetworkPartition, EveryRankStopsWithinTheTimeoutPlusTheMarginAndSaysWhy) {
  const TwoNodes nodes;
  if (!nodes.unavailable().empty()) GTEST_SKIP() << "network partition test skipped: " << nodes.unavailable();
  const fs::path dir = fs::temp_directory_path() / ("trainbench_partition_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto made = trainbench::testing::run_trainbench("data make dlrm --preset tiny --out " + (dir / "data").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const int port = 29000 + ::getpid() % 1000;
  const auto node = [&](int node_rank, const std::string& ns, const std::string& veth) {
    return "ip netns exec " + ns + " env GLOO_SOCKET_IFNAME=" + veth + " " + TRAINBENCH_BINARY +
           " launch --nnodes 2 --nproc 1 --grace 120 --node-rank " + std::to_string(node_rank) + " --master-addr " +
           nodes.address_a() + " --master-port " + std::to_string(port) + " -- run dlrm --preset tiny --quiet --threads 1" +
           " --set target=0.99 --seed 3 --comm-timeout " + std::to_string(kCommTimeoutSeconds) + " --data " +
           (dir / "data").string() + " --out " + (dir / "results").string() + " --system node" + std::to_string(node_rank);
  };
  const pid_t node0 = start(node(0, nodes.ns_a(), nodes.veth_a()), dir / "node0.txt");
  const pid_t node1 = start(node(1, nodes.ns_b(), nodes.veth_b()), dir / "node1.txt");
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
