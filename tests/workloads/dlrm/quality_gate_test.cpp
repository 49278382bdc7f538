// Quality gate: the tiny preset (the mini model and optimizer on a smaller generated dataset, a target
// below what that dataset allows) must reach its target through run_benchmark, its AUC must stay below the
// planted model's ceiling, and its log must pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/quality_gate.h"
#include "util/atomic_file.h"

namespace trainbench {
namespace {

TEST(DlrmQualityGate, TinyPresetReachesItsTargetBelowThePlantedCeiling) {
  const testing::QualityGateRun gate("dlrm", 4321);
  const double ceiling =
      nlohmann::json::parse(read_file((gate.data_dir() / "days" / "planted.json").string())).at("eval_auc_ceiling");
  ASSERT_FALSE(gate.outcome().last_metric.parts().empty());
  EXPECT_LT(gate.outcome().last_metric.part(""), ceiling + 0.01) << "an AUC above the planted model's ceiling";
}

}  // namespace
}  // namespace trainbench
