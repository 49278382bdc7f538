#pragma once
// What a probe's JSON copy says about the machine it ran on. Plain C++ (no LibTorch) so every probe, the
// torch-free storage probe too, describes the host the same way.
#include <string>

#include <nlohmann/json.hpp>

namespace trainbench::probes {

// The text of /proc/cpuinfo ("" where there is none).
std::string read_cpuinfo();
// The first value of a "key : value" line of /proc/cpuinfo text, e.g. "model name"; "" when absent.
std::string cpuinfo_field(const std::string& cpuinfo, const std::string& key);
// Whether the first "flags" line lists `flag` as a whole word.
bool cpuinfo_has_flag(const std::string& cpuinfo, const std::string& flag);

// Host name, kernel, CPU model and clock, logical CPUs, and the trainbench build (version, revision, LibTorch).
nlohmann::ordered_json host_environment();

// Writes a probe's JSON copy atomically (util/atomic_file.h), pretty-printed.
void write_json_report(const std::string& path, const nlohmann::ordered_json& report);

}  // namespace trainbench::probes
