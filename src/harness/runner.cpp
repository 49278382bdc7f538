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
// samples trained, or the generation being trained.
double schedule_position(ScheduleUnit unit, const Block& block, int64_t block_samples, int64_t samples_per_epoch) {
  switch (unit) {
    case ScheduleUnit::kSamples:
      return block.units_before() + static_cast<double>(block_samples);
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
  HarnessControl(ProgressLine* progress, ScheduleUnit unit, int64_t train_samples, TimedParts& parts)
      : progress_(progress), unit_(unit), samples_per_epoch_(train_samples), parts_(parts) {}

  void begin_block(const Block& block) {
    block_ = block;
    block_samples_ = 0;
  }

  void step(int64_t samples, double loss) override {
    block_samples_ += samples;
    total_samples_ += samples;
    if (progress_) progress_->on_step(schedule_position(unit_, block_, block_samples_, samples_per_epoch_), samples, loss);
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
  ScheduleUnit unit_;
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
  const WorkloadDescription description = workload.describe();
  SingleRank single_rank;
  RankGroup& ranks = options.ranks ? *options.ranks : single_rank;
  const bool logging_rank = ranks.rank() == 0;
  std::optional<ResultLog> result;
  if (logging_rank) result.emplace(options);
  MlLogger log(
      [&](const std::string& line) {
        if (result) result->write(line);
      },
      clock);

  RunOutcome outcome;
  outcome.target = description.target;
  outcome.unit = description.schedule.unit;
  int64_t run_start_ms = 0;
  bool clock_running = false;
  // A run whose quality is judged after training stops its clock when the passing model was saved.
  const auto stop_clock = [&](const char* status, const std::string& error, std::optional<int64_t> dated_ms = {}) {
    nlohmann::ordered_json metadata{{mllog_keys::kStatus, status}};
    if (!error.empty()) metadata[mllog_keys::kError] = error;
    if (!clock_running) log.start(mllog_keys::kRunStart);  // an abort during init still yields a well-formed log
    const int64_t stop_ms = dated_ms ? log.end_at(*dated_ms, mllog_keys::kRunStop, nullptr, metadata)
                                     : log.end(mllog_keys::kRunStop, nullptr, metadata);
    outcome.minutes = clock_running ? (stop_ms - run_start_ms) / 60000.0 : 0;
    if (result) outcome.result_path = result->commit();
  };

  // Submission fields, then untimed init.
  log.event(mllog_keys::kSubmissionBenchmark, description.benchmark);
  log.event(mllog_keys::kSubmissionOrg, options.submission.org);
  log.event(mllog_keys::kSubmissionDivision, options.submission.division);
  log.event(mllog_keys::kSubmissionStatus, options.submission.status);
  log.event(mllog_keys::kSubmissionPlatform, options.submission.platform);
  log.event(mllog_keys::kCacheClear, drop_page_cache());
  log.start(mllog_keys::kInitStart);
  log.event(mllog_keys::kTrainbenchVersion, std::string(provenance::kVersion) + " (" + provenance::kGitRevision + ")");
  log.event(mllog_keys::kTrainbenchLibtorch,
            std::string(provenance::kTorchVersion) + " (" + provenance::kTorchBuild + ")");
  log.event(mllog_keys::kTrainbenchPreset, description.preset);
  log.event(mllog_keys::kTrainbenchTarget, description.target.threshold.to_json(),
            {{"metric", description.target.metric}, {"higher_is_better", description.target.higher_is_better}});
  log.event(mllog_keys::kTrainbenchOverrides, description.overrides);
  log.event(mllog_keys::kTrainbenchConfig, description.effective_config);
  log.event(mllog_keys::kTrainbenchThreads, description.threads);
  log.event(mllog_keys::kTrainbenchDevice, description.device);
  log.event(mllog_keys::kTrainbenchRanks, ranks.world());
  log.event(mllog_keys::kSeed, options.seed);
  for (const auto& hyperparameter : description.hyperparameters)
    log.event(hyperparameter.key, hyperparameter.value);

  InterruptGuard interrupt_guard;
  std::optional<ProgressLine> progress;
  bool checking_input = true;  // an Error from build() or open_data() is bad input: no result
  try {
    const std::vector<std::string> initialized = workload.build();
    checking_input = false;
    for (const std::string& tensor : initialized)
      log.event(mllog_keys::kWeightsInitialization, nullptr, {{mllog_keys::kTensor, tensor}});
    log.end(mllog_keys::kInitStop);
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};

    ranks.barrier();  // the clock starts when every rank is ready
    run_start_ms = log.start(mllog_keys::kRunStart);
    const CpuSample cpu_at_start = sample_cpu_usage();
    CpuSample cpu_at_stop;
    clock_running = true;
    if (options.show_progress && logging_rank)
      progress.emplace(description.benchmark + " " + description.preset, description.schedule.unit,
                       description.sample_unit, options.progress_stream);
    checking_input = true;
    const DataSummary data = workload.open_data();
    if (description.uses_dataset) {
      log.event(mllog_keys::kTrainSamples, data.train_samples);
      log.event(mllog_keys::kEvalSamples, data.eval_samples);
    }
    for (const auto& hyperparameter : data.derived_hyperparameters)
      log.event(hyperparameter.key, hyperparameter.value);
    const EvalSchedule schedule = data.schedule.value_or(description.schedule);
    outcome.unit = schedule.unit;  // the summary speaks the unit of the schedule that ran
    checking_input = false;
    if (result) result->open();

    TimedParts parts;
    HarnessControl control(progress ? &*progress : nullptr, schedule.unit, data.train_samples, parts);
    int64_t skipped_files = 0;
    std::optional<int64_t> passing_model_saved_ms;
    const auto judge = [&](const Block& block, const Metric& metric) {
      outcome.last_metric = metric;
      outcome.convergence_epoch = block.last_epoch_num();
      outcome.converged = description.target.reached(metric);
      return outcome.converged;
    };
    if (schedule.evaluation == Evaluation::kAfterEachBlock) {
      for (const Block& block : schedule.blocks()) {
        train_block(workload, block, log, ranks, control, parts, skipped_files);
        const Metric metric =
            evaluate_block(workload, block, log, control, description.target, progress ? &*progress : nullptr, parts);
        log.end(mllog_keys::kBlockStop, nullptr, {{mllog_keys::kFirstEpochNum, epoch_json(block.first_epoch_num)}});
        if (judge(block, metric)) break;
      }
    } else {
      // Each block, when its model was saved (its block_stop), and the time split up to then.
      struct Saved {
        Block block;
        int64_t saved_ms;
        TimedParts parts;
        CpuSample cpu;
      };
      std::vector<Saved> saved;
      for (const Block& block : schedule.blocks()) {
        train_block(workload, block, log, ranks, control, parts, skipped_files);
        const int64_t saved_ms =
            log.end(mllog_keys::kBlockStop, nullptr, {{mllog_keys::kFirstEpochNum, epoch_json(block.first_epoch_num)}});
        saved.push_back({block, saved_ms, parts, sample_cpu_usage()});
      }
      for (const Saved& model : saved) {
        if (judge(model.block,
                  evaluate_block(workload, model.block, log, control, description.target, progress ? &*progress : nullptr, parts))) {
          passing_model_saved_ms = model.saved_ms;
          parts = model.parts;  // the timed region ends at that save, before any evaluation
          cpu_at_stop = model.cpu;
          break;
        }
      }
    }
    if (skipped_files > 0) log.event(mllog_keys::kTrainbenchSkippedFiles, skipped_files);
    std::vector<double> total_samples{static_cast<double>(control.total_samples())};
    const auto wait_start = SteadyClock::now();
    ranks.sum(total_samples);
    ranks.barrier();  // the clock stops when every rank is done
    if (!passing_model_saved_ms) {
      parts.rank_wait += seconds_since(wait_start);
      cpu_at_stop = sample_cpu_usage();
    }
    const int64_t stop_ms = passing_model_saved_ms.value_or(log.now_ms());
    const double timed_seconds = (stop_ms - run_start_ms) / 1000.0;
    if (timed_seconds > 0) outcome.samples_per_second = total_samples[0] / timed_seconds;
    outcome.time_split = split_time(parts, stop_ms - run_start_ms);
    const auto [split_seconds, split_metadata] = time_split_json(outcome.time_split);
    log.event(mllog_keys::kTrainbenchTimeSplit, split_seconds, split_metadata);
    outcome.cpu_contention = run_contention(cpu_at_start, cpu_at_stop, ranks);
    log_contention(log, outcome.cpu_contention);
    if (progress) progress->finish();
    stop_clock(outcome.converged ? mllog_keys::kSuccess : mllog_keys::kAborted, "", stop_ms);
  } catch (const RunInterrupted& interrupt) {
    if (progress) progress->finish();
    outcome.interrupted_by = interrupt.signal_number;
    outcome.converged = false;
    ranks.report_failure("interrupted by signal " + std::to_string(interrupt.signal_number));
    stop_clock(mllog_keys::kAborted, "interrupted by signal " + std::to_string(interrupt.signal_number));
  } catch (const Error& error) {
    if (progress) progress->finish();
    ranks.report_failure(error.what());
    if (!checking_input) stop_clock(mllog_keys::kAborted, error.what());
    throw;
  } catch (const std::exception& error) {
    if (progress) progress->finish();
    outcome.converged = false;
    ranks.report_failure(error.what());
    stop_clock(mllog_keys::kAborted, error.what());
    throw;
  }
  return outcome;
}

}  // namespace trainbench
