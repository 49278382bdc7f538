#pragma once
// What every workload does alike, written once: its settings, device and ranks; the description preamble
// (benchmark, preset, target from the preset, threads, device, the effective config and the user's
// overrides); seeding; the per-rank share of the global batch; the block's loss meter with its divergence
// check; fractions summed over ranks; and the `bench` scaffolding with its one output line.
#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workloads/registry.h"

namespace trainbench {

namespace parallel {
class GradientSync;
struct ParallelContext;
}  // namespace parallel
class Trainer;

// settings.communicator, or a communicator for this process alone.
std::shared_ptr<parallel::Communicator> communicator_or_single(const WorkloadSettings& settings);

enum class Precision { kFp32, kBf16, kFp16 };
const char* precision_name(Precision precision);  // "fp32", "bf16", "fp16"

// The preset's gradient_accumulation_steps and precision, checked against the device: an Error names the
// setting and what it accepts (fp16 needs CUDA: its dynamic loss scaling exists for fp16's range on GPUs).
struct StepSettings {
  int64_t accumulation_steps = 1;
  Precision precision = Precision::kFp32;

  static StepSettings from_config(const Config& config, const torch::Device& device);
};

// The ranks that split the batch: the world, or under a 3-D plan (a benchmark whose settings have
// tensor_parallel and pipeline_parallel) world / (tensor_parallel x pipeline_parallel), an Error naming the
// setting when that does not divide the world.
int data_parallel_ranks(const Config& config, int world);

// The per-rank share of a global batch; an Error naming `field` when it does not divide into the
// data-parallel ranks x gradient_accumulation_steps micro-batches (the rules' global batch is the same whatever
// the split).
int64_t local_batch_size(const Config& config, const std::string& field, int world);

// The preset's loader thread count `key`: an Error naming the key, the value and the cap when it is below 1 or
// above the CPUs this process may run on (more only contend; 100,000 exhausted the process before SIGTERM
// could end the run).
int loader_threads(const Config& config, const std::string& key);

// Compute threads and the seed of LibTorch's generators, before anything random is built.
void seed_torch(const WorkloadSettings& settings);

// The checkpoint a model starts from: --weights, else for a run the preset's init_checkpoint (a relative path is
// inside the dataset directory, where the MLPerf package keeps it); empty: the seeded initialization.
std::string starting_weights(const WorkloadSettings& settings, const std::string& init_checkpoint,
                             TrainerPurpose purpose);
// A file or directory the preset's `key` names (init_checkpoint, target_model), checked when the workload is made:
// before a dataset is generated or a log reserved. It must exist when it is absolute or its dataset directory
// does; a relative one inside a dataset still to be generated is the generator's to write.
void require_preset_path(const WorkloadSettings& settings, const std::string& key, const std::string& path);

class WorkloadBase : public Workload {
 public:
  // --save-model: the trainer's model (Trainer::save_model).
  void save_weights(const std::string& path) const override;

 protected:
  explicit WorkloadBase(WorkloadSettings settings);

  // The preamble every description shares; the workload adds its schedule and hyperparameters.
  WorkloadDescription base_description(const std::string& sample_unit) const;
  // An Error naming --data when the dataset directory is missing; `expected` says what it should hold.
  void require_data_dir(const std::string& expected) const;
  int64_t local_batch(const std::string& field) const;
  // count / total with both summed over the ranks (each evaluated its own shard); an Error naming `where`
  // when no rank counted anything.
  double fraction_over_ranks(double count, double total, const std::string& where, const std::string& what_is_empty) const;
  // This rank's device and ranks, as the benchmark's trainer is built from them.
  parallel::ParallelContext parallel_context() const;
  // The trainer build() made.
  virtual const Trainer& trainer() const = 0;

  WorkloadSettings settings_;
  const Config& config_;
  torch::Device device_;
  std::shared_ptr<parallel::Communicator> communicator_;
  StepSettings step_settings_;  // checked here, before the log opens
};

// The mean training loss of a block. A loss that is not finite stops the run: an Error naming the preset
// and the step, as every workload reports divergence.
class LossMeter {
 public:
  explicit LossMeter(const Config& config) : config_(config) {}
  void add(double loss, int64_t step);
  double mean() const { return steps_ ? sum_ / static_cast<double>(steps_) : 0; }

 private:
  const Config& config_;
  double sum_ = 0;
  int64_t steps_ = 0;
};

// Calls `fetch` (the next batch from the input pipeline, or a batch assembled on the training thread) and
// reports the time it took to the harness as input wait, so the run's time split can tell a starved step
// from a slow one. `fetch` may return nothing (it fills the workload's own buffers).
template <typename Fetch>
auto fetch_input(RunControl& control, Fetch&& fetch) -> decltype(fetch()) {
  struct Report {
    RunControl& control;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Report() { control.add_input_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()); }
  } report{control};
  return fetch();
}

// `trainbench bench <benchmark>`: the threads, seed, device and ranks of the measurement, the global and
// per-rank batch (the preset's batch_size), and the one way every workload times and reports a step.
class BenchRun {
 public:
  BenchRun(const WorkloadSettings& settings, const BenchSettings& bench_settings);

  // Calls `step` warmup_steps times untimed, then `steps` times timed; returns the median seconds per call,
  // averaged over the ranks (the slowest rank sets the pace, and every rank must call this). `step` must
  // wait for the device before it returns (e.g. end in item()). With bench.profile_path, `steps` more calls
  // run under the profiler afterwards, so the profiler's overhead never reaches the timed figure.
  double median_step_seconds(const std::function<void()>& step);
  // The training step's time: median_step_seconds, or with --memory the one call whose peak memory
  // print_training() then reports.
  double training_step_seconds(const std::function<void()>& step);
  // --memory: the bench stops after its training line.
  bool memory_only() const { return bench.memory; }
  // The data pipeline is measured per process and from --data: false where it is not measured, after saying
  // why when there is no dataset.
  bool measures_data_pipeline(std::ostream& out) const;
  // "training      1234.5 img/s  (batch 128 over 1 rank(s), <details>, cpu, 2 threads/rank, median of 20
  // steps: 0.1037 s/step, 12.3 GFLOP/s[, share of the measured peak])"
  void print_training(std::ostream& out, double step_seconds, const std::string& sample_unit, double flops_per_sample,
                      const std::string& details) const;

  // The device and ranks the measurement's trainer is built on.
  parallel::ParallelContext parallel_context() const;

  const WorkloadSettings& settings;
  const BenchSettings& bench;
  const torch::Device device;
  const std::shared_ptr<parallel::Communicator> communicator;
  const int64_t global_batch, local_batch;

 private:
  int64_t memory_baseline_ = 0;  // with --memory: what was resident (CPU) or allocated (CUDA) before the model
  int64_t step_peak_bytes_ = -1;  // with --memory: the peak above it, once measured
};

// ", 41.3% of measured fp32 peak 152.0 GFLOP/s" for a bench line's achieved FLOP/s, or "" without --peak.
std::string share_of_peak(double flops_per_second, const BenchSettings& settings);

// The profiler view of `bench --profile`. One thread's ranges as the profiler recorded them, in order: an
// operator opens and later closes with the same handle, and the operators it calls open and close between.
struct ProfiledRange {
  std::string name;
  uint64_t handle = 0;
  bool opens = true;
  double time_us = 0;
};
// Per operator name: calls, self time (its own time, less that of the operators it called) and total time,
// sorted by self time, largest first, as PyTorch's key_averages() counts them.
struct OperatorTime {
  std::string name;
  int64_t calls = 0;
  double self_us = 0;
  double total_us = 0;
};
std::vector<OperatorTime> operator_times(const std::vector<std::vector<ProfiledRange>>& threads);
// The first `rows` operators as key_averages().table(sort_by="self_cpu_time_total") prints them, then the
// total self time and its share per step.
void print_operator_table(std::ostream& out, const std::vector<OperatorTime>& operators, size_t rows, int64_t steps);

}  // namespace trainbench
