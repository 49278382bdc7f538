// Quality gate: the tiny preset, exactly as `trainbench run bert --preset tiny` runs it (generated KJV
// shards, model, LAMB, schedule and target from src/workloads/bert/presets.json), must reach its target,
// and its result log must pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>

#include "support/quality_gate.h"

namespace trainbench {
namespace {

TEST(BertQualityGate, TinyPresetReachesItsTargetWithACompliantLog) {
  const testing::QualityGateRun gate("bert", 1234);
  EXPECT_EQ(gate.outcome().unit, ScheduleUnit::kSamples);  // BERT's schedule counts samples
}

}  // namespace
}  // namespace trainbench
