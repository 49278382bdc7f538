#include "probes/environment.h"

#include <fstream>
#include <sstream>
#include <thread>
#include <sys/utsname.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/provenance.h"

namespace trainbench::probes {

std::string read_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string cpuinfo_field(const std::string& cpuinfo, const std::string& key) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name != key) continue;
    const size_t value = line.find_first_not_of(" \t", colon + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "";
}

bool cpuinfo_has_flag(const std::string& cpuinfo, const std::string& flag) {
  std::istringstream flags(cpuinfo_field(cpuinfo, "flags"));
  for (std::string word; flags >> word;)
    if (word == flag) return true;
  return false;
}

nlohmann::ordered_json host_environment() {
  const std::string cpuinfo = read_cpuinfo();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  struct utsname system {};
  ::uname(&system);
  nlohmann::ordered_json environment;
  environment["hostname"] = host;
  environment["kernel"] = std::string(system.sysname) + " " + system.release;
  environment["cpu_model"] = cpuinfo_field(cpuinfo, "model name");
  // /proc/cpuinfo's MHz on a VM is usually the nominal (TSC) clock, not the boost clock.
  environment["cpu_mhz"] = cpuinfo_field(cpuinfo, "cpu MHz");
  environment["logical_cpus"] = std::thread::hardware_concurrency();
  environment["trainbench_version"] = provenance::kVersion;
  environment["git_revision"] = provenance::kGitRevision;
  environment["libtorch_version"] = provenance::kTorchVersion;
  return environment;
}

void write_json_report(const std::string& path, const nlohmann::ordered_json& report) {
  write_file_atomically(path, report.dump(2) + "\n");
}

}  // namespace trainbench::probes
