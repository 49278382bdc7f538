#pragma once
// System descriptions (systems/<system>.json, submission rules §5): checking one against the ruleset's
// required fields, and writing one for this machine. Detection reads Linux's own files (/proc/cpuinfo,
// /sys/devices/system/cpu/*/cache, /proc/meminfo, /etc/os-release, /sys/block) and nvidia-smi when it is
// installed; the fields a machine cannot know (submitter, division, status, cooling, topologies) come
// from the caller or stay empty.
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "review/finding.h"
#include "review/ruleset.h"

namespace trainbench::review {

std::vector<Finding> check_system_description(const nlohmann::json& description, const std::string& path,
                                              const SystemDescriptionRules& rules);

// Reads and checks a file; `description` receives the parsed JSON when it parses.
std::vector<Finding> check_system_description_file(const std::string& path, const SystemDescriptionRules& rules,
                                                   nlohmann::json* description = nullptr);

// number_of_nodes x accelerators_per_node, when both are whole numbers (the summarizer's count).
std::optional<long long> accelerator_count(const nlohmann::json& description);

// "8x NVIDIA A100-SXM4-80GB (400W)" or, without accelerators, "CPU: <processor model>".
std::string hardware_label(const nlohmann::json& description);

struct HostProbe {
  std::string root = "/";          // proc/, sys/ and etc/ are read below this (tests point it at a fake tree)
  std::string storage_path = ".";  // the folder whose file system is described
  // Runs a command and returns its standard output, or nothing when it cannot run. Empty: popen.
  std::function<std::optional<std::string>(const std::string& command)> run_command;
};

// Every field of `rules.fields` in order: detected values, then `given` (which wins), the rest "".
nlohmann::ordered_json describe_host(const HostProbe& probe, const SystemDescriptionRules& rules,
                                     const std::map<std::string, std::string>& given);

}  // namespace trainbench::review
