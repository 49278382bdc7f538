#include "harness/progress.h"

#include <unistd.h>

namespace trainbench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTerminalRefreshSeconds = 0.5;
constexpr double kPlainRefreshSeconds = 10;
constexpr double kRateWindowSeconds = 2;

}  // namespace

ProgressLine::ProgressLine(std::string label, std::string sample_unit, std::FILE* stream)
    : label_(std::move(label)), unit_(std::move(sample_unit)), stream_(stream),
      is_terminal_(::isatty(fileno(stream)) != 0),
      start_(Clock::now()),
      last_print_(start_),
      window_start_(start_) {}

double ProgressLine::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressLine::on_step(double epoch, int64_t samples, double loss) {
  epoch_ = epoch;
  loss_ = loss;
  window_samples_ += samples;
  const double window = std::chrono::duration<double>(Clock::now() - window_start_).count();
  if (window >= kRateWindowSeconds) {
    rate_ = window_samples_ / window;
    window_samples_ = 0;
    window_start_ = Clock::now();
  }
  print(false);
}

void ProgressLine::on_eval(double epoch, double value) {
  last_eval_ = {epoch, value};
  print(true);
}

void ProgressLine::print(bool force) {
  const double since_print = std::chrono::duration<double>(Clock::now() - last_print_).count();
  if (!force && since_print < (is_terminal_ ? kTerminalRefreshSeconds : kPlainRefreshSeconds)) return;
  last_print_ = Clock::now();
  const int elapsed = static_cast<int>(elapsed_seconds());
  char eval[48] = "eval -";
  if (last_eval_) std::snprintf(eval, sizeof eval, "eval %.4f @ep %g", last_eval_->second, last_eval_->first);
  std::fprintf(stream_, "%s%s | epoch %6.2f | loss %.4f | %8.1f %s/s | %s | %02d:%02d elapsed%s",
               is_terminal_ ? "\r\033[K" : "", label_.c_str(), epoch_, loss_, rate_, unit_.c_str(), eval,
               elapsed / 60, elapsed % 60, is_terminal_ ? "" : "\n");
  std::fflush(stream_);
  line_open_ = is_terminal_;
}

void ProgressLine::finish() {
  if (line_open_) std::fputc('\n', stream_);
  line_open_ = false;
}

}  // namespace trainbench
