// Quality gate: the mini preset, exactly as `trainbench run resnet --preset mini` runs it (generated
// dataset, model, optimizer, schedule and target from presets/resnet.json), must reach its target, and its
// result log must pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>

#include "support/quality_gate.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

TEST(ResNetQualityGate, MiniPresetReachesItsTargetWithACompliantLog) {
  const Config config = Config::from_presets("resnet", find_workload("resnet").presets_json, "mini", {});
  const testing::QualityGateRun gate("resnet", config, 1234);
  EXPECT_TRUE(gate.outcome().converged) << "accuracy " << gate.outcome().last_metric << " at epoch "
                                        << gate.outcome().convergence_epoch;
  EXPECT_GE(gate.outcome().last_metric, config.number("target"));
}

}  // namespace
}  // namespace trainbench
