#include "harness/cpu_contention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sched.h>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench {

namespace {

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", value);
  return text;
}

// "CPU 3", "CPUs 0-1".
std::string cpus_named(const std::vector<int>& cpus) {
  return (cpus.size() == 1 ? "CPU " : "CPUs ") + cpu_list_text(cpus);
}

double own_cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto to_seconds = [](const timeval& time) { return time.tv_sec + time.tv_usec / 1e6; };
  return to_seconds(usage.ru_utime) + to_seconds(usage.ru_stime);
}

// Ranks on one machine are told apart from others by the host name, carried as a double: 52 bits of its
// hash are exact in a double, so a collision between two machines of one run is negligible.
double host_id() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return static_cast<double>(std::hash<std::string>{}(name) & ((uint64_t{1} << 52) - 1));
}

}  // namespace

std::vector<int> affinity_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  return cpus;
}

int usable_cpu_count() {
  const size_t cpus = affinity_cpus().size();
  return cpus > 0 ? static_cast<int>(cpus) : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::map<int, CpuTicks> parse_proc_stat(const std::string& text, const std::string& source) {
  std::map<int, CpuTicks> cpus;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice"; older kernels print fewer
    // columns (steal since 2.6.11), and the missing ones count as 0.
    if (line.compare(0, 3, "cpu") != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    enum Column { kUser, kNice, kSystem, kIdle, kIowait, kIrq, kSoftirq, kSteal, kColumns };
    int64_t column[kColumns] = {};
    int read = 0;
    while (read < kColumns && fields >> column[read]) ++read;
    if (cpu < 0 || read <= kIdle || (read < kColumns && !fields.eof()))
      fail(source + ":" + std::to_string(number),
           "expected 'cpuN' and at least 4 tick counts (user nice system idle ...), got '" + line.substr(0, 120) + "'");
    cpus[cpu] = {column[kUser] + column[kNice] + column[kSystem] + column[kIrq] + column[kSoftirq],
                 column[kIdle] + column[kIowait], column[kSteal]};
  }
  return cpus;
}

CpuSample sample_cpu_usage() {
  CpuSample sample;
  sample.cpus = affinity_cpus();
  sample.own_cpu_seconds = own_cpu_seconds();
  std::ifstream file("/proc/stat");
  if (!file) return sample;
  std::ostringstream text;
  text << file.rdbuf();
  // A kernel whose /proc/stat this cannot read leaves the run unmeasured; it must not end the run.
  std::map<int, CpuTicks> all;
  try {
    all = parse_proc_stat(text.str(), "/proc/stat");
  } catch (const Error&) {
    return sample;
  }
  for (const int cpu : sample.cpus)
    if (const auto found = all.find(cpu); found != all.end()) sample.ticks[cpu] = found->second;
  return sample;
}

CpuContention measure_contention(const CpuSample& start, const CpuSample& stop, double own_cpu_seconds,
                                 double ticks_per_second) {
  CpuContention contention;
  if (!(ticks_per_second > 0)) return contention;
  int64_t busy = 0, steal = 0, total = 0;
  for (const int cpu : start.cpus) {
    const auto before = start.ticks.find(cpu), after = stop.ticks.find(cpu);
    if (before == start.ticks.end() || after == stop.ticks.end()) continue;  // left the mask, or unreadable
    contention.cpus.push_back(cpu);
    busy += after->second.busy - before->second.busy;
    steal += after->second.steal - before->second.steal;
    total += after->second.total() - before->second.total();
  }
  contention.capacity_seconds = total / ticks_per_second;
  contention.steal_seconds = steal / ticks_per_second;
  contention.other_processes_seconds = std::max(0.0, busy / ticks_per_second - own_cpu_seconds);
  return contention;
}

CpuContention run_contention(const CpuSample& start, const CpuSample& stop, RankGroup& ranks) {
  std::vector<double> host{host_id()};
  ranks.broadcast(host, 0);
  const double own = stop.own_cpu_seconds - start.own_cpu_seconds;
  std::vector<double> on_this_machine{host[0] == host_id() ? own : 0.0};
  ranks.sum(on_this_machine);
  return measure_contention(start, stop, on_this_machine[0], static_cast<double>(sysconf(_SC_CLK_TCK)));
}

std::string CpuContention::text() const {
  return "other processes " + seconds(other_processes_seconds) + " (" + percent(other_processes_share()) +
         "), steal " + seconds(steal_seconds) + " (" + percent(steal_share()) + ") of " + seconds(capacity_seconds) +
         " CPU time on " + cpus_named(cpus);
}

std::string CpuContention::warning() const {
  if (share() <= kContentionWarningShare) return "";
  return "other processes and the hypervisor took " + percent(share()) + " of " + cpus_named(cpus) +
         " during the timed region (over " + percent(kContentionWarningShare) +
         "): this run's times measure a busy machine, not the system";
}

void log_contention(MlLogger& log, const CpuContention& contention) {
  if (!contention.measured()) return;
  const auto rounded = [](double value, double scale) { return std::round(value * scale) / scale; };
  log.event(mllog_keys::kTrainbenchCpuContention,
            {{mllog_keys::kOtherProcesses, rounded(contention.other_processes_seconds, 1e3)},
             {mllog_keys::kSteal, rounded(contention.steal_seconds, 1e3)}},
            {{mllog_keys::kUnit, "cpu_seconds"},
             {mllog_keys::kCapacity, rounded(contention.capacity_seconds, 1e3)},
             {mllog_keys::kCpus, cpu_list_text(contention.cpus)},
             {mllog_keys::kWarningShare, kContentionWarningShare},
             {mllog_keys::kShares,
              {{mllog_keys::kOtherProcesses, rounded(contention.other_processes_share(), 1e4)},
               {mllog_keys::kSteal, rounded(contention.steal_share(), 1e4)}}}});
  if (const std::string warning = contention.warning(); !warning.empty())
    log.event(mllog_keys::kTrainbenchWarning, warning);
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]) + (last > i ? "-" + std::to_string(cpus[last]) : "");
    i = last + 1;
  }
  return text;
}

}  // namespace trainbench
