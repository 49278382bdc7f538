#include "harness/cpu_contention.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace trainbench {
namespace {

// /proc/stat of this 2-vCPU VM captured before and after three seconds of `taskset -c 0 yes`, while a build
// kept both CPUs busy: cpu0 went from 32505 0 5810 14607 84 0 14 171 to 32655 0 5964 14607 84 0 14 172,
// cpu1 from 32414 0 7301 12483 654 0 186 183 to 32670 0 7350 12483 654 0 186 184 (USER_HZ 100).
std::string captured(const std::string& name) {
  std::ifstream file(std::string(PROC_STAT_DIR) + "/" + name);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

CpuSample sample_of(const std::string& name, std::vector<int> cpus, double own_cpu_seconds = 0) {
  CpuSample sample;
  for (const auto& [cpu, ticks] : parse_proc_stat(captured(name), name))
    if (std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) sample.ticks[cpu] = ticks;
  sample.cpus = std::move(cpus);
  sample.own_cpu_seconds = own_cpu_seconds;
  return sample;
}

TEST(ProcStat, ReadsEachCpuLineAndSkipsTheRest) {
  const auto cpus = parse_proc_stat(captured("before.txt"), "before.txt");
  ASSERT_EQ(cpus.size(), 2u);  // "cpu" (all CPUs), intr, ctxt, ... are not per-CPU lines
  EXPECT_EQ(cpus.at(0).busy, 32505 + 0 + 5810 + 0 + 14);  // user nice system irq softirq
  EXPECT_EQ(cpus.at(0).idle, 14607 + 84);                 // idle iowait
  EXPECT_EQ(cpus.at(0).steal, 171);
  EXPECT_EQ(cpus.at(1).total(), 32414 + 7301 + 12483 + 654 + 186 + 183);
}

TEST(ProcStat, OlderKernelsFewerColumnsCountAsZero) {
  const auto cpus = parse_proc_stat("cpu  10 0 5 100\ncpu3 10 0 5 100\n", "old");
  ASSERT_EQ(cpus.count(3), 1u);
  EXPECT_EQ(cpus.at(3).busy, 15);
  EXPECT_EQ(cpus.at(3).idle, 100);
  EXPECT_EQ(cpus.at(3).steal, 0);
}

TEST(ProcStat, AMalformedCpuLineNamesTheSourceAndLine) {
  for (const char* text : {"cpu 1 2 3 4\ncpu0 1 2 x 4 5\n", "cpu 1 2 3 4\ncpu0 1 2\n"}) {
    try {
      parse_proc_stat(text, "/proc/stat");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).rfind("/proc/stat:2: expected 'cpuN' and at least 4 tick counts", 0), 0u)
          << error.what();
    }
  }
}

TEST(CpuContention, OtherProcessesAreTheBusyTimeLessTheRunsOwn) {
  // Both CPUs: 304 + 305 busy ticks, 1 + 1 steal, 305 + 306 in all; the run itself used 1.5 CPU seconds.
  const CpuContention both = measure_contention(sample_of("before.txt", {0, 1}), sample_of("after.txt", {0, 1}), 1.5, 100);
  EXPECT_EQ(both.cpus, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(both.capacity_seconds, 6.11);
  EXPECT_DOUBLE_EQ(both.other_processes_seconds, 6.09 - 1.5);
  EXPECT_DOUBLE_EQ(both.steal_seconds, 0.02);
  EXPECT_DOUBLE_EQ(both.share(), (6.09 - 1.5 + 0.02) / 6.11);
  EXPECT_EQ(both.text(), "other processes 4.590 s (75.1%), steal 0.020 s (0.3%) of 6.110 s CPU time on CPUs 0-1");
  EXPECT_EQ(both.warning(),
            "other processes and the hypervisor took 75.5% of CPUs 0-1 during the timed region (over 10.0%): this "
            "run's times measure a busy machine, not the system");

  // Pinned to cpu0, only its counters count.
  const CpuContention pinned = measure_contention(sample_of("before.txt", {0}), sample_of("after.txt", {0}), 0, 100);
  EXPECT_DOUBLE_EQ(pinned.capacity_seconds, 3.05);
  EXPECT_DOUBLE_EQ(pinned.other_processes_seconds, 3.04);
  EXPECT_EQ(pinned.text(), "other processes 3.040 s (99.7%), steal 0.010 s (0.3%) of 3.050 s CPU time on CPU 0");
}

TEST(CpuContention, ARunThatUsedItsCpusAloneHasNoWarning) {
  // All the busy time was the run's (and a little more, from the counters' 10 ms granularity): none is other.
  const CpuContention alone = measure_contention(sample_of("before.txt", {0, 1}), sample_of("after.txt", {0, 1}), 6.1, 100);
  EXPECT_EQ(alone.other_processes_seconds, 0);
  EXPECT_LT(alone.share(), kContentionWarningShare);
  EXPECT_EQ(alone.warning(), "");
}

TEST(CpuContention, WithoutCountersItIsUnmeasured) {
  CpuSample no_counters;
  no_counters.cpus = {0, 1};
  const CpuContention none = measure_contention(no_counters, no_counters, 0, 100);
  EXPECT_FALSE(none.measured());
  EXPECT_EQ(none.share(), 0);
  EXPECT_EQ(none.warning(), "");
  // A CPU that left the affinity mask between the samples is not measured.
  const CpuContention one = measure_contention(sample_of("before.txt", {0, 1}), sample_of("after.txt", {1}), 0, 100);
  EXPECT_EQ(one.cpus, (std::vector<int>{1}));
}

// Two ranks of one machine: the other rank's CPU time is the run's own, not contention.
class TwoRanksOnOneMachine : public RankGroup {
 public:
  explicit TwoRanksOnOneMachine(double other_rank_cpu_seconds) : other_(other_rank_cpu_seconds) {}
  int rank() const override { return 0; }
  int world() const override { return 2; }
  void barrier() override {}
  void sum(std::vector<double>& values) override { values[0] += other_; }
  void broadcast(std::vector<double>&, int) override {}
  void report_failure(const std::string&) override {}

 private:
  double other_;
};

TEST(CpuContention, TheOtherRanksOnThisMachineAreTheRunsOwnWork) {
  // USER_HZ is 100 on Linux, as the captures were taken.
  const CpuSample start = sample_of("before.txt", {0, 1}, 10.0), stop = sample_of("after.txt", {0, 1}, 11.0);
  SingleRank alone;
  EXPECT_NEAR(run_contention(start, stop, alone).other_processes_seconds, 6.09 - 1.0, 1e-9);
  TwoRanksOnOneMachine ranks(4.0);
  EXPECT_NEAR(run_contention(start, stop, ranks).other_processes_seconds, 6.09 - 1.0 - 4.0, 1e-9);
}

TEST(CpuContention, SampleReadsThisProcesssCpus) {
  const CpuSample sample = sample_cpu_usage();
  ASSERT_FALSE(sample.cpus.empty());
  EXPECT_EQ(sample.ticks.size(), sample.cpus.size());  // Linux: every CPU of the mask has a cpuN line
  EXPECT_GT(sample.own_cpu_seconds, 0);
}

TEST(CpuList, RangesAsTheKernelPrintsThem) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 6, 8, 9}), "0-3,6,8-9");
  EXPECT_EQ(cpu_list_text({5}), "5");
  EXPECT_EQ(cpu_list_text({}), "");
}

}  // namespace
}  // namespace trainbench
