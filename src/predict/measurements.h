#pragma once
// trainbench's own measurements as prediction inputs: `bench --json` (a step at a per-device batch),
// `probe comm --json` (a link's all-reduce bandwidth and latency) and `probe storage --json` (the rate the
// node reads dataset files at, one file a sample).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "predict/time_to_train.h"

namespace trainbench::predict {

// What `bench` measured: its "training ... X unit/s (batch B over R rank(s), ..., median of S steps: T s/step"
// line, as `bench --json` writes it.
struct BenchMeasurement {
  std::string benchmark, preset;
  double samples_per_second = 0;
  std::string sample_unit;  // img, seq, utt, samples, examples
  double global_batch = 0;
  int ranks = 1;
  int steps = 0;
  double step_seconds = 0;
};

// Finds the training line in bench's output; nothing when there is none.
std::optional<BenchMeasurement> parse_bench_output(const std::string& output, const std::string& benchmark,
                                                   const std::string& preset);
nlohmann::ordered_json to_json(const BenchMeasurement& measurement);

// Reads a `bench --json` file as a one-node calibration (its ranks are that node's devices). It has no
// convergence, evaluation or start-up: the RCP tables give the first, the others are 0 and noted.
// Throws trainbench::Error naming the file and field.
Calibration calibration_from_bench_json(const std::string& path);

// The batch-independent part of a step from two calibrations at different per-device batches, on the
// line step = overhead + per-device batch x seconds per sample through both; never below 0.
// Throws trainbench::Error when the batches are equal.
double step_overhead_seconds(const Calibration& first, const Calibration& second);

// A link from a `probe comm --json` file: the all_reduce bus bandwidth at the largest size and, as latency
// per hop, the smallest size's time over the ring's 2(p-1) hops.
Link link_from_comm_json(const std::string& path);

// Samples per second one node reads, from a `probe storage --json` file (dataset_read.files_per_second).
double input_rate_from_storage_json(const std::string& path);

}  // namespace trainbench::predict
