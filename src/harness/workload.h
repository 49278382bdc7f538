#pragma once
// The contract between the harness and one benchmark. The harness owns the clock, the :::MLLOG log, the
// evaluation schedule and the verdict; a workload only builds, trains the blocks it is handed, evaluates,
// and describes itself. It never reads a clock for the log and never writes lifecycle lines.
//
// Call order, enforced by harness/runner.cpp:
//   describe()                     before init_start: what to log and how to schedule
//   build()                        untimed init: model, optimizer; must not read the dataset
//   ---- run_start (clock starts) ----
//   open_data()                    first timed step: index the dataset
//   train(block) / evaluate(block) for each block of the schedule, until the target or the epoch limit
//   ---- run_stop ----
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainbench {

// One logged hyperparameter: an MLPerf key and its value, exactly as the rules spell them.
struct HyperParameter {
  std::string key;
  nlohmann::json value;
};

// "Epochs" are in the unit the benchmark's logs use for epoch_num: epochs for ResNet, a fraction of an epoch
// for DLRM, samples for BERT. A block trains epoch_count units starting at first_epoch_num (1-based), then
// the harness evaluates. The evaluation's epoch_num is the last epoch trained (ResNet: epochs 1..4 -> 4),
// or, for a positional schedule, the position reached: 1 + the epochs trained so far (DLRM's reference
// logs 1.05, 1.10, ... when it evaluates 20 times per epoch).
struct Block {
  double first_epoch_num = 1;
  double epoch_count = 1;
  bool positional = false;
  double last_epoch_num() const;
};

// The rules' evaluation schedule: the first evaluation after `first_block` epochs, then every `interval`
// epochs, never past `max_epochs` (a run that has not converged by then ends as aborted).
struct EvalSchedule {
  double first_block = 1;
  double interval = 1;
  double max_epochs = 1;
  bool positional = false;  // epoch_num = 1 + epochs trained (see Block)
  std::vector<Block> blocks() const;
};

// The quality the run must reach. The metric is logged under `metric` (e.g. eval_accuracy).
struct QualityTarget {
  std::string metric = "eval_accuracy";
  double threshold = 0;
  bool higher_is_better = true;
  bool reached(double value) const { return higher_is_better ? value >= threshold : value <= threshold; }
};

struct WorkloadDescription {
  std::string benchmark;                        // submission_benchmark, e.g. "resnet"
  std::string preset;                           // "mini", "reference", ...
  std::string sample_unit = "samples";          // for progress lines: "images", "sequences", ...
  std::vector<HyperParameter> hyperparameters;  // logged once each during init, in this order
  EvalSchedule schedule;
  QualityTarget target;
  int threads = 1;                              // compute threads the workload was built to use
  std::string device = "cpu";                   // where it computes: "cpu", "cuda:0", ...
};

// What open_data() learned from the dataset. Hyperparameters that depend on its size (e.g. decay steps)
// are logged right after train_samples and eval_samples.
struct DataSummary {
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
  std::vector<HyperParameter> derived_hyperparameters;
};

struct BlockReport {
  int64_t samples = 0;         // training samples processed in the block
  double mean_loss = 0;
  int64_t skipped_files = 0;   // unreadable inputs skipped because the user asked for it
};

// Given to train() and evaluate(). step() reports progress and throws RunInterrupted when the user asked
// the run to stop (SIGINT/SIGTERM), so a workload needs no signal handling of its own.
class RunControl {
 public:
  virtual ~RunControl() = default;
  virtual void step(int64_t samples, double loss) = 0;
  virtual void check_interrupt() = 0;
};

struct RunInterrupted {
  int signal_number;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual WorkloadDescription describe() const = 0;
  // Returns the names of the tensors it initialized, as the rules name them (e.g. "conv0_weight"); the
  // harness logs each as weights_initialization.
  virtual std::vector<std::string> build() = 0;
  virtual DataSummary open_data() = 0;
  virtual BlockReport train(const Block& block, RunControl& control) = 0;
  virtual double evaluate(const Block& block, RunControl& control) = 0;
};

}  // namespace trainbench
