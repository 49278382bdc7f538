// Quality gate: the tiny preset, exactly as `trainbench run resnet --preset tiny` runs it (generated
// dataset, model, optimizer, schedule and target from src/workloads/resnet/presets.json), must reach its
// target, and its result log must pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>

#include "support/quality_gate.h"

namespace trainbench {
namespace {

TEST(ResNetQualityGate, TinyPresetReachesItsTargetWithACompliantLog) {
  const testing::QualityGateRun gate("resnet", 1234);
  EXPECT_EQ(gate.outcome().unit, ScheduleUnit::kEpochs);
}

}  // namespace
}  // namespace trainbench
