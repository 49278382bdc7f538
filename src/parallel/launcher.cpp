#include "parallel/launcher.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> launcher_signal{0};
extern "C" void on_launcher_signal(int signal_number) { launcher_signal.store(signal_number); }

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  int stopped_by = 0;  // the signal that stopped it (SIGSTOP, SIGTSTP, ...) while it is stopped, else 0
};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signal_number) + " (" + strsignal(signal_number) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

pid_t start_rank(const LaunchOptions& options, int local_rank, int port) {
  const int world = options.processes_per_node * options.nodes;
  const int rank = options.node_rank * options.processes_per_node + local_rank;
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) fail("launch", std::string("fork failed: ") + std::strerror(errno));
  if (pid > 0) return pid;
  // Child: die with the launcher, even if it is killed outright.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);
  const auto set = [](const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); };
  set("RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(world));
  set("LOCAL_RANK", std::to_string(local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(options.processes_per_node));
  set("MASTER_ADDR", options.master_addr);
  set("MASTER_PORT", std::to_string(port));
  // The ranks are launch's now: a scheduler's, inherited when launch itself runs under srun or mpirun (one
  // launch per node), would disagree with them (rank_environment.cpp refuses that).
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
        "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"})
    ::unsetenv(name);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(options.program.c_str()));
  for (const auto& argument : options.arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  ::execv(options.program.c_str(), argv.data());
  std::fprintf(stderr, "trainbench launch: cannot run %s: %s\n", options.program.c_str(), std::strerror(errno));
  ::_exit(127);
}

void signal_running(std::vector<Rank>& ranks, int signal_number) {
  for (auto& rank : ranks)
    if (rank.running) ::kill(rank.pid, signal_number);
}

// A stopped rank cannot notice anything: it gets SIGTERM at once and SIGCONT to act on it, rather than
// the grace period the others get to stop on their own.
void terminate_stopped(std::vector<Rank>& ranks) {
  for (auto& rank : ranks) {
    if (!rank.running || !rank.stopped_by) continue;
    ::kill(rank.pid, SIGTERM);
    ::kill(rank.pid, SIGCONT);
  }
}

}  // namespace

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("launch", std::string("socket failed: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    fail("launch", std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

int launch_ranks(const LaunchOptions& options, std::ostream& messages) {
  if (options.processes_per_node < 1) fail("--nproc", "expected at least 1");
  if (options.nodes < 1) fail("--nnodes", "expected at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nodes)
    fail("--node-rank", "expected 0.." + std::to_string(options.nodes - 1) + ", got " + std::to_string(options.node_rank));
  if (options.master_port == 0 && options.nodes > 1)
    fail("--master-port", "must be given when the job spans several nodes (every node must use the same one)");
  const int port = options.master_port ? options.master_port : pick_free_port();

  struct sigaction action {}, previous_int {}, previous_term {};
  action.sa_handler = on_launcher_signal;
  sigemptyset(&action.sa_mask);
  launcher_signal.store(0);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);

  std::vector<Rank> ranks(options.processes_per_node);
  for (int local = 0; local < options.processes_per_node; ++local) {
    ranks[local].rank = options.node_rank * options.processes_per_node + local;
    ranks[local].pid = start_rank(options, local, port);
    ranks[local].running = true;
    messages << "launch: rank " << ranks[local].rank << " pid " << ranks[local].pid << "\n";
  }
  messages << "launch: " << options.processes_per_node * options.nodes << " ranks, rendezvous at "
           << options.master_addr << ":" << port << std::endl;

  int exit_code = 0;
  std::string first_failure;
  std::optional<Clock::time_point> terminate_at, kill_at;
  const auto begin_shutdown = [&](Clock::time_point now) {
    if (!terminate_at) terminate_at = now + options.grace;
  };
  int forwarded_signal = 0;
  while (std::any_of(ranks.begin(), ranks.end(), [](const Rank& rank) { return rank.running; })) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    const auto now = Clock::now();
    if (pid > 0) {
      for (auto& rank : ranks) {
        if (rank.pid != pid) continue;
        if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
          rank.stopped_by = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
          if (rank.stopped_by) messages << "launch: rank " << rank.rank << " (pid " << pid << ") was stopped by signal "
                                        << rank.stopped_by << " (" << strsignal(rank.stopped_by) << ")" << std::endl;
          if (rank.stopped_by && terminate_at) terminate_stopped(ranks);
          continue;
        }
        rank.running = false;
        rank.status = status;
        if (status != 0 && exit_code == 0) {
          // A rank that exits because a peer stopped answering is not the cause: the stopped peer is (its
          // peers time out on it, the first of them exits, and it would otherwise be blamed).
          const auto stopped = std::find_if(ranks.begin(), ranks.end(), [](const Rank& other) { return other.running && other.stopped_by; });
          if (stopped != ranks.end()) {
            exit_code = 128 + stopped->stopped_by;
            first_failure = "rank " + std::to_string(stopped->rank) + " (pid " + std::to_string(stopped->pid) +
                            ") was stopped by signal " + std::to_string(stopped->stopped_by) + " (" +
                            strsignal(stopped->stopped_by) + ") and stopped answering; rank " + std::to_string(rank.rank) +
                            " then " + describe_exit(status);
          } else {
            exit_code = exit_code_of(status);
            first_failure = "rank " + std::to_string(rank.rank) + " (pid " + std::to_string(pid) + ") " + describe_exit(status);
          }
          messages << "launch: " << first_failure << "; the other ranks have "
                   << std::chrono::duration_cast<std::chrono::seconds>(options.grace).count()
                   << " s to stop on their own" << std::endl;
          begin_shutdown(now);
          terminate_stopped(ranks);
        }
      }
      continue;
    }
    if (const int signal_number = launcher_signal.load(); signal_number && !forwarded_signal) {
      forwarded_signal = signal_number;
      messages << "launch: received signal " << signal_number << ", stopping the ranks" << std::endl;
      signal_running(ranks, SIGTERM);
      terminate_stopped(ranks);
      begin_shutdown(now);
    }
    if (terminate_at && now >= *terminate_at && !kill_at) {
      messages << "launch: ranks still running after the grace period; terminating them" << std::endl;
      signal_running(ranks, SIGTERM);
      terminate_stopped(ranks);
      kill_at = now + std::chrono::seconds(5);
    }
    if (kill_at && now >= *kill_at) signal_running(ranks, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);

  if (exit_code == 0 && forwarded_signal) exit_code = 128 + forwarded_signal;
  if (!first_failure.empty()) {
    messages << "launch: failed: " << first_failure << "\n";
    for (const auto& rank : ranks)
      if (rank.status != 0) messages << "launch:   rank " << rank.rank << " " << describe_exit(rank.status) << "\n";
  } else if (exit_code == 0) {
    messages << "launch: all " << ranks.size() << " ranks finished\n";
  }
  messages.flush();
  return exit_code;
}

}  // namespace trainbench::parallel
