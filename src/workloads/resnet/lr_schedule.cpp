#include "workloads/resnet/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace trainbench::resnet {

double PolyWarmupSchedule::at(int64_t step) const {
  if (step < warmup_steps) return base_lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  const double progress =
      std::min(static_cast<double>(step - warmup_steps), static_cast<double>(decay_steps)) / decay_steps;
  return (base_lr - end_lr) * std::pow(1.0 - progress, power) + end_lr;
}

}  // namespace trainbench::resnet
