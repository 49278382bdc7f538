// Quality gate: the tiny preset, exactly as `trainbench run gpt3 --preset tiny` runs it (the generated books, their
// SentencePiece vocabulary, the pre-trained starting checkpoint, Adam, the schedule and the target from
// src/workloads/gpt3/presets.json), must reach its target, and its result log must pass the 3.0.0 rules.
#include <gtest/gtest.h>

#include "support/quality_gate.h"

namespace trainbench {
namespace {

TEST(GptQualityGate, TinyPresetReachesItsTargetWithACompliantLog) {
  const testing::QualityGateRun gate("gpt3", 1234, "tiny", "3.0.0");
  EXPECT_EQ(gate.outcome().unit, ScheduleUnit::kTokens);  // epoch_num in tokens, as NVIDIA's v3.0 logs
}

}  // namespace
}  // namespace trainbench
