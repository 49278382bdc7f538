// The poly-decay schedule against values computed by hand from the formula in lr_schedule.h.
#include <gtest/gtest.h>

#include "workloads/resnet/lr_schedule.h"

namespace trainbench::resnet {
namespace {

TEST(PolyWarmupSchedule, WarmupThenQuadraticDecayToTheEndRate) {
  const PolyWarmupSchedule schedule{2.0, 0.0001, 2.0, 4, 10};
  EXPECT_DOUBLE_EQ(schedule.at(0), 0.0);
  EXPECT_DOUBLE_EQ(schedule.at(2), 1.0);
  EXPECT_DOUBLE_EQ(schedule.at(4), 2.0);
  EXPECT_NEAR(schedule.at(9), (2.0 - 0.0001) * 0.25 + 0.0001, 1e-12);  // halfway through the decay
  EXPECT_DOUBLE_EQ(schedule.at(14), 0.0001);
  EXPECT_DOUBLE_EQ(schedule.at(100), 0.0001);  // held at the end rate past the schedule
}

}  // namespace
}  // namespace trainbench::resnet
