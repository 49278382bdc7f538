#pragma once
// Which rank this process is and how to reach the others, read from the environment conventions cluster
// launchers already set, so a trainbench rank can be started by any of them:
//   torchrun / trainbench launch:  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   Slurm srun:                    SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID,
//                                  SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NODELIST (first host = master)
//   Open MPI mpirun:               OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
// MASTER_ADDR and MASTER_PORT, when set, override what Slurm implies; Open MPI needs MASTER_ADDR for
// more than one node (mpirun -x MASTER_ADDR=host0). Torch-free.
#include <functional>
#include <optional>
#include <string>

namespace trainbench::parallel {

inline constexpr int kDefaultMasterPort = 29500;

struct RankEnvironment {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  std::string source = "single process";  // which convention it came from, for logs and errors
};

using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads the process environment. Throws Error naming the variable when one is malformed or out of range.
RankEnvironment detect_rank_environment();
RankEnvironment detect_rank_environment(const EnvironmentLookup& lookup);

// The first host of a Slurm node list: "gpu[003-004,010],io1" -> "gpu003".
std::string first_slurm_host(const std::string& node_list);

}  // namespace trainbench::parallel
