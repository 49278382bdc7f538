#pragma once
// `trainbench launch`: starts the local ranks of a data-parallel job (torchrun's role), each a copy of this
// program with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, and
// supervises them. If one rank fails, the others get `grace` to notice through the communicator, end
// their logs as aborted and exit; whoever is left is then terminated. No rank outlives the launcher:
// each dies with it (PR_SET_PDEATHSIG). Torch-free.
#include <chrono>
#include <ostream>
#include <string>
#include <vector>

namespace trainbench::parallel {

struct LaunchOptions {
  int processes_per_node = 1;
  int nodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free local port (single node only)
  std::chrono::milliseconds grace{std::chrono::seconds(30)};
  std::string program;                 // the executable each rank runs
  std::vector<std::string> arguments;  // its arguments (without argv[0])
};

// Runs the ranks to completion. Returns 0 when all succeeded, else the first failed rank's exit status
// (128 + signal when it was killed). Writes one line per rank started and a summary naming the failed rank.
int launch_ranks(const LaunchOptions& options, std::ostream& messages);

// A TCP port on 127.0.0.1 that was free a moment ago.
int pick_free_port();

}  // namespace trainbench::parallel
