#include "harness/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <unistd.h>

#include "harness/cpu_contention.h"
#include "harness/interrupt.h"
#include "harness/progress.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mllog_keys.h"
#include "util/provenance.h"

namespace trainbench {

namespace {

// Rules: "flush the cache or restart the system prior to benchmarking". Dropping the page cache needs root;
// the logged value says whether it happened.
bool drop_page_cache() {
  ::sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "3\n";
  drop.flush();
  return static_cast<bool>(drop);
}

// Epoch numbers are logged as integers when whole (as in the reference logs), fractions otherwise (DLRM).
nlohmann::json epoch_json(double epoch) {
  return epoch == std::floor(epoch) ? nlohmann::json(static_cast<int64_t>(epoch)) : nlohmann::json(epoch);
}

using SteadyClock = std::chrono::steady_clock;
double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// What the harness measures of the timed region as it goes; TimeSplit follows from it at run_stop.
struct TimedParts {
  double train = 0;              // inside train()
  double input_wait = 0;         // of which blocked on input (the workload's report)
  double rank_wait_in_train = 0; // of which waiting for other ranks (the workload's report)
  double rank_wait = 0;          // the harness's own sums and barriers
  double evaluation = 0;         // evaluate() and its lines
};

// The split of a timed region of `wall_ms` on the log's clock. The measured parts are rounded to whole
// milliseconds and "other" is the remainder, so the parts add up to the wall time exactly. The parts are
// read on the steady clock and the wall on the log's; should they exceed it by the clocks' granularity, they
// are scaled down to fit.
TimeSplit split_time(const TimedParts& parts, int64_t wall_ms) {
  const auto to_ms = [](double seconds) { return std::max<int64_t>(0, std::llround(seconds * 1000)); };
  int64_t measured[] = {to_ms(parts.train - parts.input_wait - parts.rank_wait_in_train), to_ms(parts.input_wait),
                        to_ms(parts.evaluation), to_ms(parts.rank_wait_in_train + parts.rank_wait)};
  int64_t sum = 0;
  for (const int64_t part : measured) sum += part;
  if (sum > wall_ms) {
    const int64_t over = sum;
    sum = 0;
    for (int64_t& part : measured) sum += part = part * std::max<int64_t>(0, wall_ms) / over;
  }
  TimeSplit split;
  split.training_compute = measured[0] / 1000.0;
  split.input_wait = measured[1] / 1000.0;
  split.evaluation = measured[2] / 1000.0;
  split.rank_wait = measured[3] / 1000.0;
  split.other = std::max<int64_t>(0, wall_ms - sum) / 1000.0;
  return split;
}

// trainbench_time_split: each part's seconds as the value, their shares (of run_start to run_stop) in the
// metadata.
std::pair<nlohmann::json, nlohmann::ordered_json> time_split_json(const TimeSplit& split) {
  nlohmann::json seconds;
  nlohmann::ordered_json shares;
  for (const auto& [name, value] : split.parts()) {
    seconds[name] = value;
    shares[name] = std::round(split.share(value) * 1e4) / 1e4;
  }
  return {seconds, {{mllog_keys::kUnit, "seconds"}, {mllog_keys::kShares, shares}}};
}

// Where a run is in its schedule while a block trains, in the schedule's unit: epochs trained (fractional),
// samples or tokens trained, or the generation being trained.
double schedule_position(const EvalSchedule& schedule, const Block& block, int64_t block_samples,
                         int64_t samples_per_epoch) {
  switch (schedule.unit) {
    case ScheduleUnit::kSamples:
    case ScheduleUnit::kTokens:
      return block.units_before() + static_cast<double>(block_samples) * schedule.units_per_sample;
    case ScheduleUnit::kGenerations:
      return block.first_epoch_num;
    case ScheduleUnit::kEpochs:
      break;
  }
  if (samples_per_epoch <= 0) return block.units_before();
  return block.units_before() + static_cast<double>(block_samples) / static_cast<double>(samples_per_epoch);
}

// Connects the workload's per-step reports to the progress line and the interrupt flag.
class HarnessControl : public RunControl {
 public:
  HarnessControl(ProgressLine* progress, const EvalSchedule& schedule, int64_t train_samples, TimedParts& parts)
      : progress_(progress), schedule_(schedule), samples_per_epoch_(train_samples), parts_(parts) {}

  void begin_block(const Block& block) {
    block_ = block;
    block_samples_ = 0;
  }

  void step(int64_t samples, double loss) override {
    block_samples_ += samples;
    total_samples_ += samples;
    if (progress_)
      progress_->on_step(schedule_position(schedule_, block_, block_samples_, samples_per_epoch_), samples, loss);
    check_interrupt();
  }

  void check_interrupt() override {
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};
  }

  // Waits count as such inside train(); inside evaluate() they are part of the evaluation. The flag is
  // cleared however train() ends, so a throw cannot leave later waits counted as training's.
  class TrainingSpan {
   public:
    explicit TrainingSpan(HarnessControl& control) : control_(control) { control_.training_ = true; }
    ~TrainingSpan() { control_.training_ = false; }
    TrainingSpan(const TrainingSpan&) = delete;
    TrainingSpan& operator=(const TrainingSpan&) = delete;

   private:
    HarnessControl& control_;
  };
  void add_input_wait(double seconds) override {
    if (training_) parts_.input_wait += seconds;
  }
  void add_rank_wait(double seconds) override {
    if (training_) parts_.rank_wait_in_train += seconds;
  }

  int64_t total_samples() const { return total_samples_; }

 private:
  ProgressLine* progress_;
  EvalSchedule schedule_;
  int64_t samples_per_epoch_;
  TimedParts& parts_;
  Block block_;
  int64_t block_samples_ = 0, total_samples_ = 0;
  bool training_ = false;
};

// Rank 0's result log. Lines wait in memory until open(), which reserves the file: a run refused while the
// workload checks its input leaves nothing behind, and a run that got that far always commits.
class ResultLog {
 public:
  explicit ResultLog(const RunOptions& options) : options_(options) {}

  void write(const std::string& line) {
    if (file_) file_->write(line);
    else pending_ += line;
    if (options_.echo_log) std::cout << line << std::flush;
  }
  void open() {
    if (file_) return;
    file_ = options_.result_dir.empty()
                ? std::make_unique<AtomicFile>(options_.result_path, AtomicFile::Existing::kKeep)
                : AtomicFile::reserve_numbered(options_.result_dir, "result_", ".txt");
    file_->write(pending_);
    pending_.clear();
  }
  // The committed path.
  std::string commit() {
    open();
    file_->commit();
    return file_->path();
  }

 private:
  const RunOptions& options_;
  std::string pending_;
  std::unique_ptr<AtomicFile> file_;
};

// The log lines of one block's training: block_start, the block's throughput and mean loss summed over
// ranks, and the values the workload reports per block.
void train_block(Workload& workload, const Block& block, MlLogger& log, RankGroup& ranks, HarnessControl& control,
                 TimedParts& parts, int64_t& skipped_files) {
  const nlohmann::ordered_json at_epoch{{mllog_keys::kEpochNum, epoch_json(block.last_epoch_num())}};
  const nlohmann::ordered_json block_metadata{{mllog_keys::kFirstEpochNum, epoch_json(block.first_epoch_num)},
                                              {mllog_keys::kEpochCount, epoch_json(block.epoch_count)}};
  const int64_t block_start_ms = log.start(mllog_keys::kBlockStart, nullptr, block_metadata);
  control.begin_block(block);
  const auto train_start = SteadyClock::now();
  const BlockReport local = [&] {
    const HarnessControl::TrainingSpan training(control);
    return workload.train(block, control);
  }();
  parts.train += seconds_since(train_start);
  std::vector<double> totals{static_cast<double>(local.samples), local.mean_loss, static_cast<double>(local.skipped_files)};
  const auto sum_start = SteadyClock::now();
  ranks.sum(totals);
  parts.rank_wait += seconds_since(sum_start);
  const double block_seconds = (log.now_ms() - block_start_ms) / 1000.0;
  skipped_files += static_cast<int64_t>(totals[2]);
  if (block_seconds > 0) log.event(mllog_keys::kThroughput, totals[0] / block_seconds, at_epoch);
  log.event(mllog_keys::kTrainbenchTrainLoss, totals[1] / ranks.world(), at_epoch);
  for (const auto& value : local.logged) log.event(value.key, value.value, at_epoch);
}

// eval_start, the workload's evaluation, eval_stop and the metric line; the value for the caller to judge.
Metric evaluate_block(Workload& workload, const Block& block, MlLogger& log, RunControl& control,
                      const QualityTarget& target, ProgressLine* progress, TimedParts& parts) {
  const auto start = SteadyClock::now();
  const nlohmann::ordered_json at_epoch{{mllog_keys::kEpochNum, epoch_json(block.last_epoch_num())}};
  log.start(mllog_keys::kEvalStart, nullptr, at_epoch);
  const Metric metric = workload.evaluate(block, control);
  log.end(mllog_keys::kEvalStop, nullptr, at_epoch);
  log.event(target.metric, metric.to_json(), at_epoch);
  if (progress) progress->on_eval(block.last_epoch_num(), metric.text());
  parts.evaluation += seconds_since(start);
  return metric;
}

// A model saved at its block_stop, with the time split and CPU sample up to then: a run judged after training
// ends its timed region there if this model is the first to pass.
struct SavedModel {
  Block block;
  int64_t saved_ms;
  TimedParts parts;
  CpuSample cpu;
};

// One call of run_benchmark: the state its phases share, from the first log line to the committed log.
class BenchmarkRun {
 public:
  BenchmarkRun(Workload& workload, const RunOptions& options, MlLogger::Clock clock);
  RunOutcome run();

 private:
  void log_preamble();
  void initialize();
  void time_training();
  DataSummary open_data();
  std::optional<SavedModel> evaluate_after_each_block(const EvalSchedule& schedule, HarnessControl& control);
  std::optional<SavedModel> evaluate_after_training(const EvalSchedule& schedule, HarnessControl& control);
  void stop_timed_region(const HarnessControl& control, const CpuSample& cpu_at_start,
                         const std::optional<SavedModel>& passing);
  void stop_clock(const char* status, const std::string& error, std::optional<int64_t> dated_ms = {});
  void abort_run(const std::string& error, bool write_log = true);
  bool judge(const Block& block, const Metric& metric);
  ProgressLine* progress() { return progress_ ? &*progress_ : nullptr; }

  Workload& workload_;
  const RunOptions& options_;
  const WorkloadDescription description_;
  SingleRank single_rank_;
  RankGroup& ranks_;
  const bool logging_rank_;
  std::optional<ResultLog> result_;
  MlLogger log_;
  RunOutcome outcome_;
  int64_t run_start_ms_ = 0;
  bool clock_running_ = false;
  bool checking_input_ = true;  // an Error from build() or open_data() is bad input: no result
  std::optional<ProgressLine> progress_;
  TimedParts parts_;
  int64_t skipped_files_ = 0;
};

BenchmarkRun::BenchmarkRun(Workload& workload, const RunOptions& options, MlLogger::Clock clock)
    : workload_(workload),
      options_(options),
      description_(workload.describe()),
      ranks_(options.ranks ? *options.ranks : single_rank_),
      logging_rank_(ranks_.rank() == 0),
      log_(
          [this](const std::string& line) {
            if (result_) result_->write(line);
          },
          std::move(clock)) {
  if (logging_rank_) result_.emplace(options);
  outcome_.target = description_.target;
  outcome_.unit = description_.schedule.unit;
}

RunOutcome BenchmarkRun::run() {
  log_preamble();
  InterruptGuard interrupt_guard;
  try {
    initialize();
    time_training();
  } catch (const RunInterrupted& interrupt) {
    outcome_.interrupted_by = interrupt.signal_number;
    outcome_.converged = false;
    abort_run("interrupted by signal " + std::to_string(interrupt.signal_number));
  } catch (const Error& error) {
    abort_run(error.what(), !checking_input_);  // bad input leaves no log
    throw;
  } catch (const std::exception& error) {
    outcome_.converged = false;
    abort_run(error.what());
    throw;
  }
  return outcome_;
}

// Submission fields, then untimed init: what runs, on what, and its hyperparameters.
void BenchmarkRun::log_preamble() {
  log_.event(mllog_keys::kSubmissionBenchmark, description_.benchmark);
  log_.event(mllog_keys::kSubmissionOrg, options_.submission.org);
  log_.event(mllog_keys::kSubmissionDivision, options_.submission.division);
  log_.event(mllog_keys::kSubmissionStatus, options_.submission.status);
  log_.event(mllog_keys::kSubmissionPlatform, options_.submission.platform);
  log_.event(mllog_keys::kCacheClear, drop_page_cache());
  log_.start(mllog_keys::kInitStart);
  log_.event(mllog_keys::kTrainbenchVersion, std::string(provenance::kVersion) + " (" + provenance::kGitRevision + ")");
  log_.event(mllog_keys::kTrainbenchLibtorch,
             std::string(provenance::kTorchVersion) + " (" + provenance::kTorchBuild + ")");
  log_.event(mllog_keys::kTrainbenchPreset, description_.preset);
  log_.event(mllog_keys::kTrainbenchTarget, description_.target.threshold.to_json(),
             {{"metric", description_.target.metric}, {"higher_is_better", description_.target.higher_is_better}});
  log_.event(mllog_keys::kTrainbenchOverrides, description_.overrides);
  log_.event(mllog_keys::kTrainbenchConfig, description_.effective_config);
  log_.event(mllog_keys::kTrainbenchThreads, description_.threads);
  log_.event(mllog_keys::kTrainbenchDevice, description_.device);
  log_.event(mllog_keys::kTrainbenchRanks, ranks_.world());
  log_.event(mllog_keys::kSeed, options_.seed);
  for (const auto& hyperparameter : description_.hyperparameters) log_.event(hyperparameter.key, hyperparameter.value);
}

// The workload builds its model, untimed; a signal that arrived meanwhile ends the run before run_start.
void BenchmarkRun::initialize() {
  const std::vector<std::string> initialized = workload_.build();
  checking_input_ = false;
  for (const std::string& tensor : initialized)
    log_.event(mllog_keys::kWeightsInitialization, nullptr, {{mllog_keys::kTensor, tensor}});
  log_.end(mllog_keys::kInitStop);
  if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};
}

// run_start to run_stop: the data opened, the blocks trained and evaluated as the schedule says.
void BenchmarkRun::time_training() {
  ranks_.barrier();  // the clock starts when every rank is ready
  run_start_ms_ = log_.start(mllog_keys::kRunStart);
  const CpuSample cpu_at_start = sample_cpu_usage();
  clock_running_ = true;
  if (options_.show_progress && logging_rank_)
    progress_.emplace(description_.benchmark + " " + description_.preset, description_.schedule.unit,
                      description_.sample_unit, options_.progress_stream);
  const DataSummary data = open_data();
  const EvalSchedule schedule = data.schedule.value_or(description_.schedule);
  outcome_.unit = schedule.unit;  // the summary speaks the unit of the schedule that ran
  checking_input_ = false;
  if (result_) result_->open();

  HarnessControl control(progress(), schedule, data.train_samples, parts_);
  const std::optional<SavedModel> passing = schedule.evaluation == Evaluation::kAfterEachBlock
                                                ? evaluate_after_each_block(schedule, control)
                                                : evaluate_after_training(schedule, control);
  stop_timed_region(control, cpu_at_start, passing);
}

DataSummary BenchmarkRun::open_data() {
  checking_input_ = true;
  const DataSummary data = workload_.open_data();
  if (description_.uses_dataset) {
    log_.event(mllog_keys::kTrainSamples, data.train_samples);
    log_.event(mllog_keys::kEvalSamples, data.eval_samples);
  }
  for (const auto& hyperparameter : data.derived_hyperparameters) log_.event(hyperparameter.key, hyperparameter.value);
  return data;
}

// Each block is evaluated once trained; the first to reach the target ends the run, which then stops its clock.
std::optional<SavedModel> BenchmarkRun::evaluate_after_each_block(const EvalSchedule& schedule,
                                                                  HarnessControl& control) {
  for (const Block& block : schedule.blocks()) {
    train_block(workload_, block, log_, ranks_, control, parts_, skipped_files_);
    const Metric metric = evaluate_block(workload_, block, log_, control, description_.target, progress(), parts_);
    log_.end(mllog_keys::kBlockStop, nullptr, {{mllog_keys::kFirstEpochNum, epoch_json(block.first_epoch_num)}});
    if (judge(block, metric)) break;
  }
  return std::nullopt;
}

// Every block is trained and saved first (MiniGo's generations), then the saved models are evaluated in order;
// the first to pass ends the timed region where it was saved, before any evaluation.
std::optional<SavedModel> BenchmarkRun::evaluate_after_training(const EvalSchedule& schedule,
                                                                HarnessControl& control) {
  std::vector<SavedModel> saved;
  for (const Block& block : schedule.blocks()) {
    train_block(workload_, block, log_, ranks_, control, parts_, skipped_files_);
    const int64_t saved_ms =
        log_.end(mllog_keys::kBlockStop, nullptr, {{mllog_keys::kFirstEpochNum, epoch_json(block.first_epoch_num)}});
    saved.push_back({block, saved_ms, parts_, sample_cpu_usage()});
  }
  for (const SavedModel& model : saved)
    if (judge(model.block,
              evaluate_block(workload_, model.block, log_, control, description_.target, progress(), parts_)))
      return model;
  return std::nullopt;
}

// The totals over ranks, the time split and what others took of the CPUs, then run_stop. With a passing saved
// model the timed region ends at its save, with the parts and CPU sample taken then.
void BenchmarkRun::stop_timed_region(const HarnessControl& control, const CpuSample& cpu_at_start,
                                     const std::optional<SavedModel>& passing) {
  if (skipped_files_ > 0) log_.event(mllog_keys::kTrainbenchSkippedFiles, skipped_files_);
  std::vector<double> total_samples{static_cast<double>(control.total_samples())};
  const auto wait_start = SteadyClock::now();
  ranks_.sum(total_samples);
  ranks_.barrier();  // the clock stops when every rank is done
  CpuSample cpu_at_stop;
  if (passing) {
    parts_ = passing->parts;
    cpu_at_stop = passing->cpu;
  } else {
    parts_.rank_wait += seconds_since(wait_start);
    cpu_at_stop = sample_cpu_usage();
  }
  const int64_t now_ms = log_.now_ms();
  const int64_t stop_ms = passing ? passing->saved_ms : now_ms;
  const double timed_seconds = (stop_ms - run_start_ms_) / 1000.0;
  if (timed_seconds > 0) outcome_.samples_per_second = total_samples[0] / timed_seconds;
  outcome_.time_split = split_time(parts_, stop_ms - run_start_ms_);
  const auto [split_seconds, split_metadata] = time_split_json(outcome_.time_split);
  log_.event(mllog_keys::kTrainbenchTimeSplit, split_seconds, split_metadata);
  outcome_.cpu_contention = run_contention(cpu_at_start, cpu_at_stop, ranks_);
  log_contention(log_, outcome_.cpu_contention);
  if (progress_) progress_->finish();
  stop_clock(outcome_.converged ? mllog_keys::kSuccess : mllog_keys::kAborted, "", stop_ms);
}

// Ends the log with run_stop, dated now or at `dated_ms`, and commits it.
void BenchmarkRun::stop_clock(const char* status, const std::string& error, std::optional<int64_t> dated_ms) {
  nlohmann::ordered_json metadata{{mllog_keys::kStatus, status}};
  if (!error.empty()) metadata[mllog_keys::kError] = error;
  if (!clock_running_) log_.start(mllog_keys::kRunStart);  // an abort during init still yields a well-formed log
  const int64_t stop_ms = dated_ms ? log_.end_at(*dated_ms, mllog_keys::kRunStop, nullptr, metadata)
                                   : log_.end(mllog_keys::kRunStop, nullptr, metadata);
  outcome_.minutes = clock_running_ ? (stop_ms - run_start_ms_) / 60000.0 : 0;
  if (result_) outcome_.result_path = result_->commit();
}

// A run that ends early closes its progress line, tells the other ranks why, and ends its log "aborted"
// unless `write_log` is false (bad input: the caller rethrows with no log).
void BenchmarkRun::abort_run(const std::string& error, bool write_log) {
  if (progress_) progress_->finish();
  ranks_.report_failure(error);
  if (write_log) stop_clock(mllog_keys::kAborted, error);
}

// Keeps the evaluation in the outcome; true when it reached the target.
bool BenchmarkRun::judge(const Block& block, const Metric& metric) {
  outcome_.last_metric = metric;
  outcome_.convergence_epoch = block.last_epoch_num();
  outcome_.converged = description_.target.reached(metric);
  return outcome_.converged;
}

}  // namespace

std::vector<std::pair<std::string, double>> TimeSplit::parts() const {
  return {{mllog_keys::kTrainingCompute, training_compute},
          {mllog_keys::kInputWait, input_wait},
          {mllog_keys::kEvaluation, evaluation},
          {mllog_keys::kRankWait, rank_wait},
          {mllog_keys::kOther, other}};
}

std::string TimeSplit::text() const {
  std::string text;
  for (auto [name, seconds] : parts()) {
    std::replace(name.begin(), name.end(), '_', ' ');
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.3f s (%.1f%%)", text.empty() ? "" : ", ", name.c_str(), seconds,
                  100 * share(seconds));
    text += part;
  }
  return text;
}

RunOutcome run_benchmark(Workload& workload, const RunOptions& options, MlLogger::Clock clock) {
  return BenchmarkRun(workload, options, std::move(clock)).run();
}

}  // namespace trainbench
