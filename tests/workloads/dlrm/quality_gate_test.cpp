// Quality gate: a shortened mini run (the mini preset's model and optimizer on a smaller generated dataset,
// a target just below what that dataset allows) must reach its target through run_benchmark, and its log
// must pass the project's own v1.1 compliance checks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/quality_gate.h"
#include "util/atomic_file.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

TEST(DlrmQualityGate, ShortMiniRunReachesItsTargetWithACompliantLog) {
  nlohmann::json values = Config::from_presets("dlrm", find_workload("dlrm").presets_json, "mini", {}).values();
  values["dataset"]["samples_per_day"] = 60000;
  values["dataset"]["eval_samples"] = 20000;
  values["target"] = 0.76;
  const testing::QualityGateRun gate("dlrm", Config("dlrm/mini", values), 4321);
  const double ceiling =
      nlohmann::json::parse(read_file((gate.data_dir() / "days" / "planted.json").string())).at("eval_auc_ceiling");
  EXPECT_TRUE(gate.outcome().converged) << "AUC " << gate.outcome().last_metric << " at epoch "
                                        << gate.outcome().convergence_epoch << " (planted ceiling " << ceiling << ")";
  EXPECT_LT(gate.outcome().last_metric, ceiling + 0.01);
}

}  // namespace
}  // namespace trainbench
