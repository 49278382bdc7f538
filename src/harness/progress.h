#pragma once
// The live progress line: position in the schedule (epoch, samples or generation), loss, throughput, last
// evaluation and elapsed time. On a terminal it
// rewrites one line in place a few times a second; otherwise it prints a plain line every few seconds so
// CI logs stay readable.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "harness/workload.h"

namespace trainbench {

class ProgressLine {
 public:
  ProgressLine(std::string label, ScheduleUnit unit, std::string sample_unit, std::FILE* stream = stderr);

  // Called after every training step with the position reached in the schedule's unit and the step's loss.
  void on_step(double position, int64_t samples, double loss);
  // Called after an evaluation with its epoch_num and the metric as text.
  void on_eval(double position, const std::string& metric);
  // Ends the in-place line so later output starts on a fresh line.
  void finish();

 private:
  void print(bool force);
  double elapsed_seconds() const;

  std::string label_;
  ScheduleUnit unit_;
  std::string sample_unit_;
  std::FILE* stream_;
  bool is_terminal_;
  std::chrono::steady_clock::time_point start_, last_print_, window_start_;
  int64_t window_samples_ = 0;
  double rate_ = 0, position_ = 0, loss_ = 0;
  std::optional<std::pair<double, std::string>> last_eval_;  // (position, metric)
  bool line_open_ = false;
};

}  // namespace trainbench
