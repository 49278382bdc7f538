#pragma once
// The timing every `trainbench bench <workload>` shares, so the numbers of different workloads (and of their
// python peers, which time the same way) mean the same thing.
#include <functional>

#include "workloads/registry.h"

namespace trainbench {

// Calls `step` warmup_steps times untimed, then `steps` times timed; returns the median seconds per call.
// `step` must wait for the device before it returns (e.g. end in item()).
double median_step_seconds(const BenchSettings& settings, const std::function<void()>& step);

}  // namespace trainbench
