#pragma once
// `trainbench bench`'s data-pipeline line, shared by the workloads whose input is a threaded loader.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>

#include "workloads/registry.h"

namespace trainbench {

// Takes bench.warmup_steps batches from `next` (the training loader's next(), returning an optional batch with
// a `size`) untimed, then times bench.steps batches and prints
// "data pipeline  123.4 img/s  (640 images, 2 loader threads, 3.1x training)".
template <typename Next>
void print_data_pipeline(std::ostream& out, const BenchSettings& bench, int64_t loader_threads,
                         double training_samples_per_second, Next&& next) {
  for (int64_t batch = 0; batch < bench.warmup_steps && next(); ++batch) {
  }
  const auto begin = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int64_t batch = 0; batch < bench.steps; ++batch) {
    const auto taken = next();
    if (!taken) break;  // the epoch ran out; report what was measured
    samples += taken->size;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double rate = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  char line[256];
  std::snprintf(line, sizeof line, "data pipeline %10.1f img/s  (%lld images, %lld loader threads, %.1fx training)\n", rate,
                static_cast<long long>(samples), static_cast<long long>(loader_threads), rate / training_samples_per_second);
  out << line;
}

}  // namespace trainbench
