#pragma once
// The language-model benchmark (MLPerf "bert"). Torch-free entry points for the registry; the
// implementation lives in bert_workload.cpp.
#include <memory>
#include <ostream>
#include <string>

#include "workloads/registry.h"

namespace trainbench::bert {

std::unique_ptr<Workload> create_workload(const WorkloadSettings& settings);
void make_dataset(const Config& config, const std::string& out_dir, int64_t seed);
void bench(const WorkloadSettings& settings, const BenchSettings& bench_settings, std::ostream& out);

}  // namespace trainbench::bert
