#include "workloads/bench_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace trainbench {

double median_step_seconds(const BenchSettings& settings, const std::function<void()>& step) {
  std::vector<double> seconds;
  for (int64_t i = 0; i < settings.warmup_steps + settings.steps; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    step();
    if (i >= settings.warmup_steps)
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const size_t middle = seconds.size() / 2;
  return seconds.size() % 2 ? seconds[middle] : (seconds[middle - 1] + seconds[middle]) / 2;
}

}  // namespace trainbench
