#pragma once
// How much of the CPUs a run may use went to someone else while its clock ran: to other processes (the
// CPUs' busy time less this process's own CPU time) and to the hypervisor (the steal column). On a 2-core
// VM a second process on one core made resnet mini 25x slower (OpenMP threads spin-waiting on a descheduled
// partner), so a run measures this and says when its figures are not the machine's own. Linux only:
// /proc/stat, sched_getaffinity and getrusage; plain C++, no LibTorch.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/mllog.h"
#include "harness/rank_group.h"

namespace trainbench {

// One CPU's counters from a /proc/stat "cpuN" line, in clock ticks (USER_HZ).
struct CpuTicks {
  int64_t busy = 0;   // user + nice + system + irq + softirq (guest time is already inside user and nice)
  int64_t idle = 0;   // idle + iowait
  int64_t steal = 0;  // time the hypervisor ran something else while this virtual CPU wanted to run
  int64_t total() const { return busy + idle + steal; }
};

// The per-CPU lines of a /proc/stat text, by CPU number (the all-CPU "cpu" line and other lines are skipped).
// A malformed cpuN line is an Error naming `source`, the line number and what was expected.
std::map<int, CpuTicks> parse_proc_stat(const std::string& text, const std::string& source);

// The CPUs this process may run on (its affinity mask), ascending; empty when the mask cannot be read.
std::vector<int> affinity_cpus();
// How many: the cap of --threads and of the loaders' threads (the machine's count when the mask cannot be read).
int usable_cpu_count();

// What is read at each end of the timed region.
struct CpuSample {
  std::vector<int> cpus;          // the CPUs this process may run on (its affinity mask), ascending
  std::map<int, CpuTicks> ticks;  // their counters
  double own_cpu_seconds = 0;     // this process's user and system time, all threads
};

// Reads the affinity mask, /proc/stat and getrusage now. Where /proc/stat cannot be read or parsed,
// `ticks` is empty and the contention comes out unmeasured.
CpuSample sample_cpu_usage();

// Above this share of the CPUs' capacity taken by others, a run's timings are not the machine's own.
constexpr double kContentionWarningShare = 0.10;

struct CpuContention {
  std::vector<int> cpus;               // the CPUs measured: in the affinity mask at both samples
  double capacity_seconds = 0;         // CPU time those CPUs had between the samples
  double other_processes_seconds = 0;  // their busy time less this run's own CPU time (not below 0)
  double steal_seconds = 0;

  // Counters were read for at least one CPU (a region shorter than a clock tick has a capacity of 0).
  bool measured() const { return !cpus.empty(); }
  double other_processes_share() const { return capacity_seconds > 0 ? other_processes_seconds / capacity_seconds : 0; }
  double steal_share() const { return capacity_seconds > 0 ? steal_seconds / capacity_seconds : 0; }
  double share() const { return other_processes_share() + steal_share(); }
  // When measured: "other processes 12.300 s (48.0%), steal 0.000 s (0.0%) of 25.600 s CPU time on CPUs 0-1"
  std::string text() const;
  // A sentence for stderr and the log when share() exceeds kContentionWarningShare; "" otherwise.
  std::string warning() const;
};

// The contention between two samples, with USER_HZ `ticks_per_second`. `own_cpu_seconds` is the CPU time
// this run spent between them: this process's, plus that of any other ranks sharing its CPUs.
CpuContention measure_contention(const CpuSample& start, const CpuSample& stop, double own_cpu_seconds,
                                 double ticks_per_second);

// The contention over a run between two samples, read with this machine's USER_HZ. The run's own CPU time
// is this process's plus that of the other ranks on the same machine: ranks that `trainbench launch` starts
// share its CPUs, and their work is the run's, not contention. Every rank must call it (it sums over them).
CpuContention run_contention(const CpuSample& start, const CpuSample& stop, RankGroup& ranks);

// trainbench_cpu_contention (CPU seconds taken by other processes and steal, with the capacity, the CPUs and
// the shares in its metadata) and, past the threshold, trainbench_warning with warning(). Nothing when
// unmeasured.
void log_contention(MlLogger& log, const CpuContention& contention);

// "0-3,6,8-9", as the kernel prints CPU lists.
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace trainbench
