#pragma once
// The MLPerf ResNet learning-rate schedule: linear warmup from 0 to the base rate, then polynomial decay to
// the end rate (closed rules: power 2, end 1e-4), as in the reference's PolynomialDecayWithWarmup.
#include <cstdint>

namespace trainbench::resnet {

struct PolyWarmupSchedule {
  double base_lr = 0;
  double end_lr = 1e-4;
  double power = 2;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;  // steps after warmup over which the rate falls to end_lr

  double at(int64_t step) const;
};

}  // namespace trainbench::resnet
