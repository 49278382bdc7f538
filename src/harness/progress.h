#pragma once
// The live progress line: epoch, loss, throughput, last evaluation and elapsed time. On a terminal it
// rewrites one line in place a few times a second; otherwise it prints a plain line every few seconds so
// CI logs stay readable.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace trainbench {

class ProgressLine {
 public:
  ProgressLine(std::string label, std::string sample_unit, std::FILE* stream = stderr);

  // Called after every training step with the epoch reached (fractional) and the step's loss.
  void on_step(double epoch, int64_t samples, double loss);
  void on_eval(double epoch, double value);
  // Ends the in-place line so later output starts on a fresh line.
  void finish();

 private:
  void print(bool force);
  double elapsed_seconds() const;

  std::string label_, unit_;
  std::FILE* stream_;
  bool is_terminal_;
  std::chrono::steady_clock::time_point start_, last_print_, window_start_;
  int64_t window_samples_ = 0;
  double rate_ = 0, epoch_ = 0, loss_ = 0;
  std::optional<std::pair<double, double>> last_eval_;  // (epoch, value)
  bool line_open_ = false;
};

}  // namespace trainbench
