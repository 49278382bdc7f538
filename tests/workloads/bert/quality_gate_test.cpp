// Quality gate: the mini preset, exactly as `trainbench run bert --preset mini` runs it (KJV dataset,
// model, LAMB, schedule and target from presets/bert.json), must reach its target, and its result log must
// pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>

#include "support/quality_gate.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

TEST(BertQualityGate, MiniPresetReachesItsTargetWithACompliantLog) {
  const Config config = Config::from_presets("bert", find_workload("bert").presets_json, "mini", {});
  const testing::QualityGateRun gate("bert", config, 1234);
  EXPECT_TRUE(gate.outcome().converged) << "masked-LM accuracy " << gate.outcome().last_metric << " at sample "
                                        << gate.outcome().convergence_epoch;
  EXPECT_GE(gate.outcome().last_metric, config.number("target"));
}

}  // namespace
}  // namespace trainbench
