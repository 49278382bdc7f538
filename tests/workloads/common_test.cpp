// The scaffolding every workload shares (src/workloads/common.h).
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "harness/cpu_contention.h"
#include "util/atomic_file.h"
#include "workloads/common.h"

namespace trainbench {
namespace {

Config config_with(nlohmann::json target, std::vector<std::string> overrides = {}) {
  const nlohmann::json presets = {{"mini", {{"target", target}, {"batch_size", 8}, {"gradient_accumulation_steps", 1}, {"precision", "fp32"}, {"note", "a"}}}};
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
  // It builds no model, so it has no trainer to save.
  const Trainer& trainer() const override { throw std::logic_error("DescribedWorkload builds no trainer"); }
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

// Issue 32: loader_threads=100000 started 25,000 threads and 3 GB before SIGTERM could end the run.
TEST(LoaderThreads, AreRefusedAboveTheCpusThisProcessMayRunOn) {
  const auto threads = [](int64_t value) {
    const nlohmann::json presets = {{"mini", {{"loader_threads", value}}}};
    return loader_threads(Config::from_presets("fake", presets.dump(), "mini", {}), "loader_threads");
  };
  const int64_t cpus = static_cast<int64_t>(affinity_cpus().size());
  ASSERT_GE(cpus, 1);
  EXPECT_EQ(threads(1), 1);
  EXPECT_EQ(threads(cpus), cpus);
  EXPECT_EQ(testing::error_message([&] { threads(cpus + 1); }),
            "fake/mini: loader_threads: expected at most " + std::to_string(cpus) +
                " (the CPUs this process may run on), got " + std::to_string(cpus + 1));
  EXPECT_EQ(testing::error_message([&] { threads(0); }), "fake/mini: loader_threads: expected at least 1, got 0");
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

// One CPU thread and a batch of 8; `steps` timed steps after one warm-up step.
WorkloadSettings cpu_bench_workload() {
  WorkloadSettings settings;
  settings.config = config_with(0.5);
  settings.device = "cpu";
  settings.threads = 1;
  return settings;
}

BenchSettings bench_steps(int64_t steps) {
  BenchSettings bench;
  bench.steps = steps;
  bench.warmup_steps = 1;
  return bench;
}

TEST(BenchRun, TimesTheMedianStepAndPrintsOneTrainingLine) {
  const WorkloadSettings settings = cpu_bench_workload();
  const BenchSettings bench = bench_steps(3);
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

TEST(BenchRun, MemoryModeRunsOneStepAndPrintsItsPeakAboveTheProcessBeforeTheModel) {
  const WorkloadSettings settings = cpu_bench_workload();
  BenchSettings bench = bench_steps(3);
  bench.memory = true;
  BenchRun run(settings, bench);
  EXPECT_TRUE(run.memory_only());
  int calls = 0;
  constexpr int64_t kElements = 32 << 20;  // a 128 MiB float tensor, written, held through the step
  run.training_step_seconds([&] {
    ++calls;
    torch::ones({kElements}).sum().item<float>();
  });
  EXPECT_EQ(calls, 1);
  std::ostringstream out;
  run.print_training(out, 0.5, "items", 1e9, "details");
  const std::string printed = out.str();
  EXPECT_NE(printed.find("median of 1 steps"), std::string::npos) << printed;
  const size_t memory = printed.find("memory ");
  ASSERT_NE(memory, std::string::npos) << printed;
  const double mib = std::stod(printed.substr(memory + 7));
  EXPECT_GE(mib, 128 * 0.95) << printed;
  EXPECT_LT(mib, 128 * 3) << printed;
  EXPECT_NE(printed.find("batch 8 per rank in 1 micro-batch(es), fp32, cpu"), std::string::npos) << printed;
}

TEST(BenchRun, ProfilesAsManyMoreStepsIntoAChromeTraceAndAnOperatorTable) {
  const WorkloadSettings settings = cpu_bench_workload();
  BenchSettings bench = bench_steps(2);
  const auto trace = std::filesystem::temp_directory_path() / ("trainbench_profile_" + std::to_string(::getpid()) + ".json");
  bench.profile_path = trace.string();
  BenchRun run(settings, bench);
  const torch::Tensor matrix = torch::ones({64, 64}, torch::requires_grad());
  int calls = 0;
  ::testing::internal::CaptureStdout();
  run.median_step_seconds([&] {
    ++calls;
    torch::mm(matrix, matrix).sum().backward();
  });
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(calls, 1 + 2 + 2);
  EXPECT_NE(printed.find("profile: 2 more steps"), std::string::npos) << printed;
  EXPECT_NE(printed.find("aten::mm "), std::string::npos) << printed;

  const nlohmann::json events = nlohmann::json::parse(read_file(trace.string()));
  std::filesystem::remove(trace);
  int64_t mm_events = 0;
  int64_t mm_backward_events = 0;
  for (const auto& event : events) {
    if (event.at("ph") != "X") continue;
    if (event.at("name") == "aten::mm") ++mm_events;
    if (event.at("name") == "MmBackward0") ++mm_backward_events;
  }
  EXPECT_GE(mm_events, 2 * 3);  // one forward and two backward products per profiled step
  // Autograd's nodes are profiled too. Not asked of the table: it shows the 15 largest self times, and on a busy
  // machine MmBackward0's few microseconds can fall below its 15th row.
  EXPECT_EQ(mm_backward_events, 2);
}

TEST(OperatorTimes, SelfTimeIsTotalLessTheNestedOperatorsAcrossThreads) {
  const std::vector<std::vector<ProfiledRange>> threads = {
      {{"outer", 1, true, 0}, {"inner", 2, true, 10}, {"inner", 2, false, 30}, {"leaf", 3, true, 40},
       {"leaf", 3, false, 45}, {"outer", 1, false, 100}, {"before_start", 9, false, 110}},
      {{"inner", 4, true, 0}, {"inner", 4, false, 5}}};
  const std::vector<OperatorTime> times = operator_times(threads);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].name, "outer");
  EXPECT_DOUBLE_EQ(times[0].self_us, 75);
  EXPECT_DOUBLE_EQ(times[0].total_us, 100);
  EXPECT_EQ(times[1].name, "inner");
  EXPECT_EQ(times[1].calls, 2);
  EXPECT_DOUBLE_EQ(times[1].self_us, 25);
  EXPECT_EQ(times[2].name, "leaf");
  EXPECT_DOUBLE_EQ(times[2].self_us, 5);

  std::ostringstream table;
  print_operator_table(table, times, 2, 5);
  EXPECT_NE(table.str().find("outer"), std::string::npos);
  EXPECT_NE(table.str().find("71.43%"), std::string::npos) << table.str();  // 75 of 105 us
  EXPECT_EQ(table.str().find("leaf"), std::string::npos) << "only the first 2 rows";
  EXPECT_NE(table.str().find("Self CPU time total: 105.000us (21.000us per step)"), std::string::npos) << table.str();
}

TEST(BenchRun, LinesShowTheShareOfThePeakOnlyWhenOneIsGiven) {
  BenchSettings settings;
  EXPECT_EQ(share_of_peak(1e9, settings), "");
  settings.peak_flops = 4e9;
  EXPECT_EQ(share_of_peak(1e9, settings), ", 25.0% of measured fp32 peak 4.0 GFLOP/s");
}

}  // namespace
}  // namespace trainbench
