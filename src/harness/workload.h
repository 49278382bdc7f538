#pragma once
// The contract between the harness and one benchmark. The harness owns the clock, the :::MLLOG log, the
// evaluation schedule and the verdict; a workload only builds, trains the blocks it is handed, evaluates,
// and describes itself. It never reads a clock for the log and never writes lifecycle lines.
//
// Call order, enforced by harness/runner.cpp:
//   describe()                     before init_start: what to log and how to schedule
//   build()                        untimed init: model, optimizer; must not read the dataset
//   ---- run_start (clock starts) ----
//   open_data()                    first timed step: index the dataset (or set up self-play); it may fix
//                                  the schedule when the schedule depends on the dataset's size
//   train(block) / evaluate(block) for each block of the schedule, until the target or the limit
//   ---- run_stop ----
// With Evaluation::kAfterTraining (MiniGo) every block is trained first; then the harness evaluates the
// model each block saved, off the clock, and the run's time ends where the first passing block ended.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/config.h"
#include "util/mllog_keys.h"

namespace trainbench {

// One logged value: an MLPerf key and its value, exactly as the rules spell them.
struct HyperParameter {
  std::string key;
  nlohmann::json value;
};

// What a schedule counts. Blocks, epoch_num and the progress line are in this unit.
enum class ScheduleUnit {
  kEpochs,       // ResNet; DLRM in fractions of an epoch
  kSamples,      // BERT: training samples
  kTokens,       // GPT-3: training tokens (samples x sequence length), as NVIDIA's v3.0 logs and the RCPs count
  kGenerations,  // MiniGo: self-play generations
};
const char* unit_name(ScheduleUnit unit);  // "epoch", "samples", "tokens", "generation"
// "epoch 4", "16000 samples", "1024000 tokens", "generation 3": a position in the schedule for people to read.
std::string describe_position(ScheduleUnit unit, double position);

// A block trains epoch_count units starting at first_epoch_num (1-based), then the harness evaluates. The
// evaluation's epoch_num is the last unit trained (ResNet: epochs 1..4 -> 4), or, for a positional
// schedule, the position reached: 1 + the units trained so far (DLRM's reference logs 1.05, 1.10, ... when
// it evaluates 20 times per epoch).
struct Block {
  double first_epoch_num = 1;
  double epoch_count = 1;
  bool positional = false;
  double last_epoch_num() const;
  // Units trained before this block started.
  double units_before() const { return first_epoch_num - 1; }
};

// When the harness evaluates: right after each block (the rules' usual schedule), or after all blocks on
// the model each block saved (MiniGo's reference evaluates generations against the target model after
// training; its run_stop is dated when the first passing generation was saved).
enum class Evaluation { kAfterEachBlock, kAfterTraining };

// The rules' evaluation schedule: the first evaluation after `first_block` units, then every `interval`
// units, never past `max_epochs` (a run that has not converged by then ends as aborted).
struct EvalSchedule {
  double first_block = 1;
  double interval = 1;
  double max_epochs = 1;
  bool positional = false;  // epoch_num = 1 + units trained (see Block)
  ScheduleUnit unit = ScheduleUnit::kEpochs;
  double units_per_sample = 1;  // kTokens: the sequence length
  Evaluation evaluation = Evaluation::kAfterEachBlock;
  std::vector<Block> blocks() const;
};

// A quality metric as evaluate() returns it: one number, or named parts that the log writes as an object
// (Mask R-CNN: {"BBOX": 0.377, "SEGM": 0.339}). Parts keep the order the workload gives them.
class Metric {
 public:
  struct Part {
    std::string name;
    double value = 0;
  };
  Metric() = default;
  Metric(double value) : parts_{{"", value}} {}  // NOLINT: a plain number is the common case
  static Metric named(std::vector<Part> parts);

  bool is_scalar() const { return parts_.size() == 1 && parts_[0].name.empty(); }
  const std::vector<Part>& parts() const { return parts_; }
  // The part called `name`; for a scalar metric, name "" is the value. Throws Error when there is none.
  double part(const std::string& name) const;
  nlohmann::json to_json() const;  // a number, or {"BBOX": ..., "SEGM": ...}
  std::string text() const;        // "0.7612", or "BBOX 0.3771, SEGM 0.3402"

 private:
  std::vector<Part> parts_;
};

// The quality the run must reach, from the preset as data: `target` is a number or an object of named
// thresholds; `target_direction` is "higher" (the default) or "lower" (RNN-T's word error rate). Every
// part must reach its own threshold in the same evaluation.
struct QualityTarget {
  std::string metric = mllog_keys::kEvalAccuracy;  // the log key the value is written under
  Metric threshold;
  bool higher_is_better = true;

  static QualityTarget from_config(const Config& config);
  bool reached(const Metric& value) const;
  std::string text() const;  // "eval_accuracy >= 0.759", "eval_accuracy BBOX >= 0.377 and SEGM >= 0.339"
};

struct WorkloadDescription {
  std::string benchmark;                        // submission_benchmark, e.g. "resnet"
  std::string preset;                           // "mini", "reference", ...
  std::string sample_unit = "samples";          // for progress lines: "img", "seq", "games", ...
  std::vector<HyperParameter> hyperparameters;  // logged once each during init, in this order
  EvalSchedule schedule;                        // open_data() may replace it (DataSummary::schedule)
  QualityTarget target;
  bool uses_dataset = true;  // false: no --data, and no train_samples / eval_samples in the log (MiniGo)
  int threads = 1;           // compute threads the workload was built to use
  std::string device = "cpu";  // where it computes: "cpu", "cuda:0", ...
  nlohmann::json effective_config = nlohmann::json::object();  // the preset after the user's overrides
  std::vector<std::string> overrides;                           // the user's --set key=value, as given
};

// What open_data() learned from the dataset. Hyperparameters that depend on its size (e.g. decay steps)
// are logged right after train_samples and eval_samples. A schedule that depends on the data (U-Net3D:
// the first evaluation at CEILING(1000*168/samples_per_epoch) epochs) replaces the described one.
struct DataSummary {
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
  std::vector<HyperParameter> derived_hyperparameters;
  std::optional<EvalSchedule> schedule;
};

struct BlockReport {
  int64_t samples = 0;         // training samples (or examples) processed in the block, on this rank
  double mean_loss = 0;
  int64_t skipped_files = 0;   // unreadable inputs skipped because the user asked for it
  // Values the rules want per block (MiniGo: actual_selfplay_games_per_generation), logged after the
  // block's training with its epoch_num. Rank 0's values are logged.
  std::vector<HyperParameter> logged;
};

// Given to train() and evaluate(). step() reports progress and throws RunInterrupted when the user asked
// the run to stop (SIGINT/SIGTERM), so a workload needs no signal handling of its own.
class RunControl {
 public:
  virtual ~RunControl() = default;
  virtual void step(int64_t samples, double loss) = 0;
  virtual void check_interrupt() = 0;
  // Time train() spent blocked on its input pipeline (waiting for the next batch), and waiting for other
  // ranks (communication that did not overlap compute). The harness counts the rest of train() as training
  // compute in the run's time split (RunOutcome::time_split).
  virtual void add_input_wait(double seconds) = 0;
  virtual void add_rank_wait(double seconds) = 0;
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
  // The quality of the model after `block` (with Evaluation::kAfterTraining: of the model that block saved).
  virtual Metric evaluate(const Block& block, RunControl& control) = 0;
  // run --save-model: the model as it is now, as a PyTorch state dict under the official implementation's names
  // (workloads/checkpoint.h). Benchmarks whose names are not mapped yet throw an Error naming the flag.
  virtual void save_weights(const std::string& path) const;
};

}  // namespace trainbench
