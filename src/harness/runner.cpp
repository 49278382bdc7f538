#include "harness/runner.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <iostream>
#include <unistd.h>

#include "harness/interrupt.h"
#include "harness/progress.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/provenance.h"

namespace trainbench {

namespace {
// Fractional epochs (0.05 per block) are not exact in binary; boundaries snap to a 1e-9 grid so that
// 20 blocks make exactly one epoch and epoch_num logs as 1.1, not 1.1000000000000001.
double snap(double epochs) { return std::round(epochs * 1e9) / 1e9; }
}  // namespace

double Block::last_epoch_num() const { return snap(first_epoch_num + epoch_count - (positional ? 0 : 1)); }

std::vector<Block> EvalSchedule::blocks() const {
  std::vector<Block> result;
  double next = 1;
  double length = first_block;
  while (length > 0 && next < snap(max_epochs + 1)) {  // blocks end by max_epochs
    const double count = snap(std::min(length, max_epochs - next + 1));
    result.push_back({next, count, positional});
    next = snap(next + count);
    length = interval;
  }
  return result;
}

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

// Connects the workload's per-step reports to the progress line and the interrupt flag.
class HarnessControl : public RunControl {
 public:
  HarnessControl(ProgressLine* progress, int64_t train_samples)
      : progress_(progress), samples_per_epoch_(train_samples) {}

  void begin_block(const Block& block) {
    block_start_epoch_ = block.first_epoch_num - 1;
    block_samples_ = 0;
  }

  void step(int64_t samples, double loss) override {
    block_samples_ += samples;
    total_samples_ += samples;
    if (progress_) {
      const double epoch = block_start_epoch_ + static_cast<double>(block_samples_) / samples_per_epoch_;
      progress_->on_step(epoch, samples, loss);
    }
    check_interrupt();
  }

  void check_interrupt() override {
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};
  }

  int64_t total_samples() const { return total_samples_; }

 private:
  ProgressLine* progress_;
  double samples_per_epoch_;
  double block_start_epoch_ = 0;
  int64_t block_samples_ = 0, total_samples_ = 0;
};

}  // namespace

RunOutcome run_benchmark(Workload& workload, const RunOptions& options, MlLogger::Clock clock) {
  const WorkloadDescription description = workload.describe();
  SingleRank single_rank;
  RankGroup& ranks = options.ranks ? *options.ranks : single_rank;
  const bool logging_rank = ranks.rank() == 0;
  std::optional<AtomicFile> result;
  if (logging_rank) result.emplace(options.result_path);
  MlLogger log(
      [&](const std::string& line) {
        if (!result) return;
        result->write(line);
        if (options.echo_log) std::cout << line << std::flush;
      },
      clock);

  RunOutcome outcome;
  int64_t run_start_ms = 0;
  bool clock_running = false;
  const auto stop_clock = [&](const char* status, const std::string& error) {
    nlohmann::ordered_json metadata{{"status", status}};
    if (!error.empty()) metadata["error"] = error;
    if (!clock_running) log.start("run_start");  // an abort during init still yields a well-formed log
    const int64_t stop_ms = log.end("run_stop", nullptr, metadata);
    outcome.minutes = clock_running ? (stop_ms - run_start_ms) / 60000.0 : 0;
    if (result) result->commit();
  };

  // Submission fields, then untimed init.
  log.event("submission_benchmark", description.benchmark);
  log.event("submission_org", options.submission.org);
  log.event("submission_division", options.submission.division);
  log.event("submission_status", options.submission.status);
  log.event("submission_platform", options.submission.platform);
  log.event("cache_clear", drop_page_cache());
  log.start("init_start");
  log.event("trainbench_version", std::string(provenance::kVersion) + " (" + provenance::kGitRevision + ")");
  log.event("trainbench_preset", description.preset);
  log.event("trainbench_target", description.target.threshold, {{"metric", description.target.metric}});
  log.event("trainbench_threads", description.threads);
  log.event("trainbench_device", description.device);
  log.event("trainbench_ranks", ranks.world());
  log.event("seed", options.seed);
  for (const auto& hyperparameter : description.hyperparameters)
    log.event(hyperparameter.key, hyperparameter.value);

  InterruptGuard interrupt_guard;
  std::optional<ProgressLine> progress;
  try {
    for (const std::string& tensor : workload.build())
      log.event("weights_initialization", nullptr, {{"tensor", tensor}});
    log.end("init_stop");
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};

    ranks.barrier();  // the clock starts when every rank is ready
    run_start_ms = log.start("run_start");
    clock_running = true;
    if (options.show_progress && logging_rank)
      progress.emplace(description.benchmark + " " + description.preset, description.sample_unit);
    const DataSummary data = workload.open_data();
    log.event("train_samples", data.train_samples);
    log.event("eval_samples", data.eval_samples);
    for (const auto& hyperparameter : data.derived_hyperparameters)
      log.event(hyperparameter.key, hyperparameter.value);

    HarnessControl control(progress ? &*progress : nullptr, data.train_samples);
    int64_t skipped_files = 0;
    for (const Block& block : description.schedule.blocks()) {
      const nlohmann::ordered_json first_epoch{{"first_epoch_num", epoch_json(block.first_epoch_num)}};
      const nlohmann::ordered_json at_epoch{{"epoch_num", epoch_json(block.last_epoch_num())}};
      nlohmann::ordered_json block_metadata = first_epoch;
      block_metadata["epoch_count"] = epoch_json(block.epoch_count);
      const int64_t block_start_ms = log.start("block_start", nullptr, block_metadata);
      control.begin_block(block);
      const BlockReport local = workload.train(block, control);
      std::vector<double> totals{static_cast<double>(local.samples), local.mean_loss,
                                 static_cast<double>(local.skipped_files)};
      ranks.sum(totals);
      const double block_seconds = (log.now_ms() - block_start_ms) / 1000.0;
      skipped_files += static_cast<int64_t>(totals[2]);
      if (block_seconds > 0) log.event("throughput", totals[0] / block_seconds, at_epoch);
      log.event("trainbench_train_loss", totals[1] / ranks.world(), at_epoch);

      log.start("eval_start", nullptr, at_epoch);
      const double metric = workload.evaluate(block, control);
      log.end("eval_stop", nullptr, at_epoch);
      log.event(description.target.metric, metric, at_epoch);
      log.end("block_stop", nullptr, first_epoch);
      if (progress) progress->on_eval(block.last_epoch_num(), metric);

      outcome.last_metric = metric;
      outcome.convergence_epoch = block.last_epoch_num();
      if (description.target.reached(metric)) {
        outcome.converged = true;
        break;
      }
    }
    if (skipped_files > 0) log.event("trainbench_skipped_files", skipped_files);
    std::vector<double> total_samples{static_cast<double>(control.total_samples())};
    ranks.sum(total_samples);
    ranks.barrier();  // the clock stops when every rank is done
    const double timed_seconds = (log.now_ms() - run_start_ms) / 1000.0;
    if (timed_seconds > 0) outcome.samples_per_second = total_samples[0] / timed_seconds;
    if (progress) progress->finish();
    stop_clock(outcome.converged ? "success" : "aborted", "");
  } catch (const RunInterrupted& interrupt) {
    if (progress) progress->finish();
    outcome.interrupted_by = interrupt.signal_number;
    ranks.report_failure("interrupted by signal " + std::to_string(interrupt.signal_number));
    stop_clock("aborted", "interrupted by signal " + std::to_string(interrupt.signal_number));
  } catch (const std::exception& error) {
    if (progress) progress->finish();
    ranks.report_failure(error.what());
    stop_clock("aborted", error.what());
    throw;
  }
  return outcome;
}

}  // namespace trainbench
