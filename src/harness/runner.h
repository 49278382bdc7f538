#pragma once
// One timed run of one workload: the MLPerf lifecycle from cache_clear to run_stop, written to a result
// log that appears atomically (harness/workload.h describes the contract).
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "harness/cpu_contention.h"
#include "harness/mllog.h"
#include "harness/rank_group.h"
#include "harness/workload.h"

namespace trainbench {

struct SubmissionInfo {
  std::string org = "trainbench";
  std::string platform;
  std::string division = "closed";
  std::string status = "onprem";
};

struct RunOptions {
  SubmissionInfo submission;
  int64_t seed = 0;
  // Where rank 0's log goes: the first free result_N.txt in `result_dir`, reserved atomically (any number of
  // runs may share the folder), or, when result_dir is empty, exactly `result_path`, which must not exist.
  // The log grows as <file>.partial from the first block on (lines before it are held in memory) and is
  // committed at run_stop without replacing any file. A run refused for bad input while the workload builds
  // or opens its data (a trainbench::Error before the first block) writes no file at all.
  std::string result_dir;
  std::string result_path;
  bool echo_log = false;    // also copy the :::MLLOG lines to stdout
  bool show_progress = true;
  std::FILE* progress_stream = stderr;
  // The processes training this run together; null means this process alone. Only rank 0 writes the
  // log and shows progress; its times are taken after a barrier, so run_start and run_stop bracket every
  // rank's work.
  RankGroup* ranks = nullptr;
};

// Where the timed region (run_start to run_stop) went, in seconds; the parts add up to its wall time on the
// log's clock (whole milliseconds), so their shares add up to 1. Logged as trainbench_time_split. The parts
// are rank 0's view.
struct TimeSplit {
  double training_compute = 0;  // train() less its input and rank waits
  double input_wait = 0;        // train() blocked on the input pipeline
  double evaluation = 0;        // evaluate() and its log lines, waits inside it included
  double rank_wait = 0;         // communication that did not overlap compute, and the harness's barriers and sums
  double other = 0;             // everything else: opening the data, logging, progress (wall time less the rest)
  double total() const { return training_compute + input_wait + evaluation + rank_wait + other; }
  double share(double part) const { return total() > 0 ? part / total() : 0; }
  // Each part under its log name ("training_compute", ...), in this order.
  std::vector<std::pair<std::string, double>> parts() const;
  // "training compute 12.345 s (91.2%), input wait 0.054 s (0.4%), evaluation ..., rank wait ..., other ..."
  std::string text() const;
};

struct RunOutcome {
  bool converged = false;
  int interrupted_by = 0;          // the signal that aborted the run, or 0
  double minutes = 0;              // (run_stop - run_start) / 60000, as the result summarizer computes it
  double convergence_epoch = 0;    // epoch_num of the last evaluation, in the schedule's unit
  ScheduleUnit unit = ScheduleUnit::kEpochs;
  Metric last_metric;              // empty when the run ended before its first evaluation
  QualityTarget target;
  double samples_per_second = 0;   // training samples over the whole timed region
  TimeSplit time_split;
  CpuContention cpu_contention;    // what others took of this run's CPUs over the timed region
  std::string result_path;         // the committed log (rank 0), or empty when none was written
};

// Runs the lifecycle. An interruption or a failing workload still ends the log with run_stop "aborted"
// and commits it; a workload error is rethrown after that so the caller can report it (a trainbench::Error
// while building or opening the data is bad input: rethrown with no log). With several ranks,
// every rank calls this with the same workload settings; block throughput and loss are summed over ranks.
RunOutcome run_benchmark(Workload& workload, const RunOptions& options,
                         MlLogger::Clock clock = MlLogger::system_clock_ms);

}  // namespace trainbench
