// The scaffolding every workload shares (src/workloads/common.h).
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "workloads/common.h"

namespace trainbench {
namespace {

Config config_with(nlohmann::json target, std::vector<std::string> overrides = {}) {
  const nlohmann::json presets = {{"mini", {{"target", target}, {"batch_size", 8}, {"note", "a"}}}};
  return Config::from_presets("fake", presets.dump(), "mini", overrides);
}

// The smallest workload on WorkloadBase: what base_description() fills in is the point.
class DescribedWorkload : public WorkloadBase {
 public:
  explicit DescribedWorkload(WorkloadSettings settings) : WorkloadBase(std::move(settings)) {}
  WorkloadDescription describe() const override { return base_description("items"); }
  std::vector<std::string> build() override { return {}; }
  DataSummary open_data() override { return {}; }
  BlockReport train(const Block&, RunControl&) override { return {}; }
  Metric evaluate(const Block&, RunControl&) override { return 0.0; }
  double fraction(double count, double total) const { return fraction_over_ranks(count, total, "eval/", "nothing evaluated"); }
};

TEST(WorkloadBase, DescriptionCarriesThePresetTargetOverridesAndEffectiveConfig) {
  WorkloadSettings settings;
  settings.config = config_with({{"BBOX", 0.377}, {"SEGM", 0.339}}, {"batch_size=16", "note=b"});
  settings.threads = 3;
  settings.device = "cpu";
  const DescribedWorkload workload(settings);
  const WorkloadDescription description = workload.describe();
  EXPECT_EQ(description.benchmark, "fake");
  EXPECT_EQ(description.preset, "mini");
  EXPECT_EQ(description.sample_unit, "items");
  EXPECT_EQ(description.threads, 3);
  EXPECT_EQ(description.device, "cpu");
  EXPECT_EQ(description.target.text(), "eval_accuracy BBOX >= 0.377 and SEGM >= 0.339");
  EXPECT_EQ(description.overrides, (std::vector<std::string>{"batch_size=16", "note=b"}));
  EXPECT_EQ(description.effective_config.at("batch_size"), 16);
  EXPECT_DOUBLE_EQ(workload.fraction(3, 4), 0.75);
  EXPECT_EQ(testing::error_message([&] { workload.fraction(0, 0); }), "eval/: nothing evaluated");
}

TEST(LossMeter, AveragesTheStepsAndNamesTheStepThatDiverged) {
  const Config config = config_with(0.5);
  LossMeter losses(config);
  EXPECT_EQ(losses.mean(), 0);
  losses.add(1.0, 1);
  losses.add(2.0, 2);
  EXPECT_DOUBLE_EQ(losses.mean(), 1.5);
  EXPECT_EQ(testing::error_message([&] { losses.add(NAN, 3); }), "fake/mini: training diverged (loss nan at step 3)");
}

TEST(BenchRun, TimesTheMedianStepAndPrintsOneTrainingLine) {
  WorkloadSettings settings;
  settings.config = config_with(0.5);
  settings.device = "cpu";
  settings.threads = 1;
  BenchSettings bench;
  bench.steps = 3;
  bench.warmup_steps = 1;
  BenchRun run(settings, bench);
  EXPECT_EQ(run.global_batch, 8);
  EXPECT_EQ(run.local_batch, 8);
  int calls = 0;
  EXPECT_GE(run.median_step_seconds([&] { ++calls; }), 0);
  EXPECT_EQ(calls, 4);
  std::ostringstream out;
  run.print_training(out, 0.5, "items", 1e9, "details");
  EXPECT_EQ(out.str(),
            "training            16.0 items/s  (batch 8 over 1 rank(s), details, cpu, 1 threads/rank, median of 3 steps: "
            "0.50000 s/step, 16.0 GFLOP/s)\n");
}

TEST(BenchRun, LinesShowTheShareOfThePeakOnlyWhenOneIsGiven) {
  BenchSettings settings;
  EXPECT_EQ(share_of_peak(1e9, settings), "");
  settings.peak_flops = 4e9;
  EXPECT_EQ(share_of_peak(1e9, settings), ", 25.0% of measured fp32 peak 4.0 GFLOP/s");
}

}  // namespace
}  // namespace trainbench
