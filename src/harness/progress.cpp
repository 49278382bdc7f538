#include "harness/progress.h"

#include <unistd.h>

namespace trainbench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTerminalRefreshSeconds = 0.5;
constexpr double kPlainRefreshSeconds = 10;
constexpr double kRateWindowSeconds = 2;

}  // namespace

ProgressLine::ProgressLine(std::string label, ScheduleUnit unit, std::string sample_unit, std::FILE* stream)
    : label_(std::move(label)), unit_(unit), sample_unit_(std::move(sample_unit)), stream_(stream),
      is_terminal_(::isatty(fileno(stream)) != 0),
      start_(Clock::now()),
      last_print_(start_),
      window_start_(start_) {}

double ProgressLine::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressLine::on_step(double position, int64_t samples, double loss) {
  position_ = position;
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

void ProgressLine::on_eval(double position, const std::string& metric) {
  last_eval_ = {position, metric};
  print(true);
}

void ProgressLine::print(bool force) {
  const double since_print = std::chrono::duration<double>(Clock::now() - last_print_).count();
  if (!force && since_print < (is_terminal_ ? kTerminalRefreshSeconds : kPlainRefreshSeconds)) return;
  last_print_ = Clock::now();
  const int elapsed = static_cast<int>(elapsed_seconds());
  const std::string eval =
      last_eval_ ? "eval " + last_eval_->second + " @" + describe_position(unit_, last_eval_->first) : "eval -";
  char position[48];
  if (unit_ == ScheduleUnit::kEpochs)
    std::snprintf(position, sizeof position, "epoch %6.2f", position_);
  else
    std::snprintf(position, sizeof position, "%s", describe_position(unit_, position_).c_str());
  std::fprintf(stream_, "%s%s | %s | loss %.4f | %8.1f %s/s | %s | %02d:%02d elapsed%s",
               is_terminal_ ? "\r\033[K" : "", label_.c_str(), position, loss_, rate_, sample_unit_.c_str(),
               eval.c_str(), elapsed / 60, elapsed % 60, is_terminal_ ? "" : "\n");
  std::fflush(stream_);
  line_open_ = is_terminal_;
}

void ProgressLine::finish() {
  if (line_open_) std::fputc('\n', stream_);
  line_open_ = false;
}

}  // namespace trainbench
