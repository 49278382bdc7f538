#pragma once
// The recommendation benchmark (MLPerf "dlrm"). Torch-free entry points for the registry; the
// implementation lives in dlrm_workload.cpp.
#include <memory>
#include <ostream>
#include <string>

#include "workloads/registry.h"

namespace trainbench::dlrm {

std::unique_ptr<Workload> create_workload(const WorkloadSettings& settings);
// Generated day files in <out_dir>/days (with planted.json) and their prepared form in <out_dir>.
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed);
// Criteo day files in in_dir -> train.bin and eval.bin in out_dir, hashed into the preset's table sizes.
void prepare_dataset(const Config& config, const std::string& in_dir, const std::string& out_dir);
void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out);

}  // namespace trainbench::dlrm
