#pragma once
// `trainbench probe comm`: collective bandwidth over a geometric sweep of message sizes, in the manner of
// nccl-tests, through the same communicator training uses. For each operation and size it reports the
// time per call (the slowest rank's mean), algorithm bandwidth (size / time) and bus bandwidth, which
// scales algbw by the fraction of the data each rank must move so that figures compare across rank counts
// (nccl-tests' PERFORMANCE.md): all-reduce 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n,
// broadcast 1. Every result is checked element by element against values computed from the inputs.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainbench::parallel {
class Communicator;
}

namespace trainbench::probes {

struct CommProbeOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = 256LL << 20;
  double factor = 2;
  int iterations = 20;
  int warmup_iterations = 5;
  std::vector<std::string> operations{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"};
  std::string dtype = "float";  // float, double, int32
  std::string device = "auto";
  bool check = true;
  int threads = 1;  // compute threads for the local sums (reduce-scatter over Gloo)
  // Above 1: also all-reduce within tensor-parallel groups of this many neighbouring ranks and within the
  // data-parallel groups across them, each alone and both at once, as a tensor x data layout runs them
  // (parallel/plan.h's rank order).
  int tensor_parallel = 1;
};

struct CommProbeRow {
  std::string operation, placement;  // placement: "out-of-place" or "in-place"
  int64_t bytes = 0, count = 0;
  double seconds = 0, algbw_gbps = 0, busbw_gbps = 0;
  int64_t wrong = 0;
};

// One size of the layout sweep: the all-reduce time per call within the tensor- and data-parallel groups, each
// alone and each while the other group's runs at the same time (the slowest rank's mean).
struct LayoutProbeRow {
  int64_t bytes = 0;
  double tensor_alone = 0, data_alone = 0, tensor_beside_data = 0, data_beside_tensor = 0;
  int64_t wrong = 0;
};

struct CommProbeResult {
  std::vector<CommProbeRow> rows;
  std::vector<LayoutProbeRow> layout_rows;
  int64_t wrong_total = 0;
  bool lead = true;  // rank 0, which prints and writes the results
  nlohmann::ordered_json json;  // arguments, environment, versions and rows
};

// The bus-bandwidth factor of nccl-tests for `operation` with `ranks` ranks.
double bus_bandwidth_factor(const std::string& operation, int ranks);
// The message sizes of a sweep: min, min*factor, ... up to max (inclusive), each rounded down to a whole
// number of elements that every rank can share equally.
std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, double factor, int64_t element_bytes, int ranks);

// Runs the sweep on every rank; prints the table on rank 0 (to `out`).
CommProbeResult run_comm_probe(parallel::Communicator& communicator, const CommProbeOptions& options, std::ostream& out);
// Joins the ranks of this process's environment (launch, torchrun, srun, mpirun; alone a world of one) and
// runs the sweep; a collective that waits longer than timeout_seconds fails naming the rank that stopped.
// Only rank 0 prints to `out`.
CommProbeResult run_comm_probe_across_ranks(const CommProbeOptions& options, double timeout_seconds, std::ostream& out);

}  // namespace trainbench::probes
