#pragma once
// The list of benchmarks the CLI knows. Adding a workload is one folder under workloads/ and one entry
// in registry.cpp. Nothing here includes LibTorch, so the CLI compiles quickly.
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/workload.h"

namespace trainbench {

namespace dist {
class Communicator;
}

// Everything a workload is built from: its effective config plus the run's environment.
struct WorkloadSettings {
  Config config;
  std::string data_dir;
  int threads = 1;           // compute threads (torch::set_num_threads)
  std::string device = "auto";  // "cpu", "cuda", or "auto" (CUDA when this LibTorch has a GPU)
  int64_t seed = 0;
  bool skip_corrupt = false; // skip unreadable samples (counted in the log) instead of failing
  // The ranks training together (data parallel). Null means this process alone. The preset's batch
  // size is the global batch; each rank trains batch_size / world of it.
  std::shared_ptr<dist::Communicator> communicator;
};

// settings.communicator, or a communicator for this process alone.
std::shared_ptr<dist::Communicator> communicator_or_single(const WorkloadSettings& settings);

// The per-rank share of a global batch; an Error naming `field` when the world does not divide it.
int64_t local_batch_size(const Config& config, const std::string& field, int world);

struct BenchSettings {
  int64_t steps = 20;
  int64_t warmup_steps = 3;
  double peak_flops = 0;  // measured fp32 peak FLOP/s (bench --peak, from `probe compute --json`); 0: none given
};

// ", 41.3% of measured fp32 peak 152.0 GFLOP/s" for a bench line's achieved FLOP/s, or "" without --peak.
inline std::string share_of_peak(double flops_per_second, const BenchSettings& settings) {
  if (settings.peak_flops <= 0) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", %.1f%% of measured fp32 peak %.1f GFLOP/s", 100.0 * flops_per_second / settings.peak_flops,
                settings.peak_flops / 1e9);
  return text;
}

struct WorkloadEntry {
  std::string name;
  std::string summary;
  const char* presets_json;
  std::function<std::unique_ptr<Workload>(const WorkloadSettings&)> create;
  // Writes the preset's generated dataset into a directory; empty for presets that need real data.
  std::function<void(const Config&, const std::string& out_dir, int64_t seed)> make_dataset;
  // Prints training and data-pipeline throughput; a benchmark, not a run: no log, no target.
  std::function<void(const WorkloadSettings&, const BenchSettings&, std::ostream&)> bench;
  // Converts the real dataset in in_dir once into the form the workload trains from (in out_dir); empty
  // for workloads that read their dataset as published.
  std::function<void(const Config&, const std::string& in_dir, const std::string& out_dir)> prepare_dataset;
};

const std::vector<WorkloadEntry>& workload_registry();
// Throws Error naming the known benchmarks when `name` is not one of them.
const WorkloadEntry& find_workload(const std::string& name);

}  // namespace trainbench
