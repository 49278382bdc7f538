#pragma once
// The list of benchmarks the CLI knows. Adding a workload is one folder under workloads/ and one entry
// in registry.cpp. Nothing here includes LibTorch, so the CLI compiles quickly.
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/workload.h"

namespace trainbench {

// Everything a workload is built from: its effective config plus the run's environment.
struct WorkloadSettings {
  Config config;
  std::string data_dir;
  int threads = 1;           // compute threads (torch::set_num_threads)
  std::string device = "auto";  // "cpu", "cuda", or "auto" (CUDA when this LibTorch has a GPU)
  int64_t seed = 0;
  bool skip_corrupt = false; // skip unreadable samples (counted in the log) instead of failing
};

struct BenchSettings {
  int64_t steps = 20;
  int64_t warmup_steps = 3;
};

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
