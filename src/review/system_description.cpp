#include "review/system_description.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "review/json_checks.h"
#include "util/json_limits.h"
#include "util/provenance.h"

namespace trainbench::review {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<long long> whole_number(const std::string& text) {
  const std::string value = trim(text);
  if (value.empty() || value.size() > 15 || !std::all_of(value.begin(), value.end(), ::isdigit)) return std::nullopt;
  return std::stoll(value);
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<std::string> run_with_popen(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string output;
  std::array<char, 4096> buffer;
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), count);
  return ::pclose(pipe) == 0 ? std::optional<std::string>(output) : std::nullopt;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!trim(line).empty()) lines.push_back(trim(line));
  return lines;
}

// "name : value" lines of /proc/cpuinfo, one map per logical processor.
std::vector<std::map<std::string, std::string>> cpuinfo_blocks(const std::string& text) {
  std::vector<std::map<std::string, std::string>> blocks(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) {
      if (!blocks.back().empty()) blocks.emplace_back();
      continue;
    }
    const size_t colon = line.find(':');
    if (colon != std::string::npos) blocks.back()[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  if (blocks.back().empty()) blocks.pop_back();
  return blocks;
}

void detect_processor(const fs::path& root, std::map<std::string, std::string>& fields) {
  const auto cpuinfo = read_text(root / "proc/cpuinfo");
  if (cpuinfo) {
    const auto blocks = cpuinfo_blocks(*cpuinfo);
    std::set<std::string> sockets;
    int logical = 0;
    for (const auto& block : blocks) {
      if (!block.count("processor")) continue;
      ++logical;
      if (block.count("physical id")) sockets.insert(block.at("physical id"));
    }
    if (logical > 0) {
      const auto& first = blocks.front();
      const int socket_count = std::max<int>(1, static_cast<int>(sockets.size()));
      fields["host_processors_per_node"] = std::to_string(socket_count);
      fields["host_processor_vcpu_count"] = std::to_string(logical);
      if (first.count("model name")) fields["host_processor_model_name"] = first.at("model name");
      fields["host_processor_core_count"] =
          first.count("cpu cores") ? first.at("cpu cores") : std::to_string(logical / socket_count);
      if (first.count("cpu MHz")) fields["host_processor_frequency"] = first.at("cpu MHz") + " MHz";
    }
  }
  if (const auto max_khz = read_text(root / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")) {
    if (const auto khz = whole_number(*max_khz)) fields["host_processor_frequency"] = format("%.2f GHz", *khz / 1e6);
  }
  std::error_code error;
  std::vector<fs::path> caches;
  for (const auto& entry : fs::directory_iterator(root / "sys/devices/system/cpu/cpu0/cache", error))
    if (entry.path().filename().string().rfind("index", 0) == 0) caches.push_back(entry.path());
  std::sort(caches.begin(), caches.end());
  std::string cache_text;
  for (const auto& cache : caches) {
    const std::string level = trim(read_text(cache / "level").value_or(""));
    const std::string type = trim(read_text(cache / "type").value_or(""));
    const std::string size = trim(read_text(cache / "size").value_or(""));
    if (level.empty() || size.empty()) continue;
    const std::string suffix = type == "Data" ? "d" : type == "Instruction" ? "i" : "";
    cache_text += (cache_text.empty() ? "" : ", ") + ("L" + level + suffix + " " + size);
  }
  if (!cache_text.empty())
    fields["host_processor_caches"] = cache_text + " (per core or shared, as Linux reports them)";
}

void detect_memory_and_os(const fs::path& root, std::map<std::string, std::string>& fields) {
  if (const auto meminfo = read_text(root / "proc/meminfo")) {
    for (const auto& line : lines_of(*meminfo)) {
      if (line.rfind("MemTotal:", 0) != 0) continue;
      std::istringstream in(line.substr(9));
      double kib = 0;
      if (in >> kib) fields["host_memory_capacity"] = format("%.1f GiB", kib / (1024.0 * 1024.0));
    }
  }
  if (const auto os_release = read_text(root / "etc/os-release")) {
    for (const auto& line : lines_of(*os_release)) {
      if (line.rfind("PRETTY_NAME=", 0) != 0) continue;
      std::string name = line.substr(12);
      if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
      fields["operating_system"] = name;
    }
  }
  if (const auto kernel = read_text(root / "proc/sys/kernel/osrelease"); kernel && !trim(*kernel).empty())
    fields["operating_system"] += (fields["operating_system"].empty() ? "" : ", ") + ("Linux " + trim(*kernel));
}

// The block device behind `path` (its whole disk, not the partition), e.g. "nvme0n1", or "".
std::string block_device_of(const fs::path& root, const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  std::error_code error;
  const fs::path link =
      root / ("sys/dev/block/" + std::to_string(major(info.st_dev)) + ":" + std::to_string(minor(info.st_dev)));
  fs::path device = fs::canonical(link, error);
  if (error) return "";
  if (fs::exists(device / "partition", error)) device = device.parent_path();
  return device.filename().string();
}

void detect_storage(const HostProbe& probe, std::map<std::string, std::string>& fields) {
  struct statvfs space {};
  if (::statvfs(probe.storage_path.c_str(), &space) == 0)
    fields["host_storage_capacity"] =
        format("%.0f GB", static_cast<double>(space.f_blocks) * static_cast<double>(space.f_frsize) / 1e9) +
        " (file system of the working folder)";
  const std::string disk = block_device_of(probe.root, probe.storage_path);
  if (disk.empty()) {
    fields["host_storage_type"] = "unknown (no block device behind the working folder, e.g. a container overlay)";
    return;
  }
  const std::string rotational =
      trim(read_text(fs::path(probe.root) / "sys/block" / disk / "queue/rotational").value_or(""));
  std::string type = rotational == "1"            ? "HDD"
                     : disk.rfind("nvme", 0) == 0 ? "NVMe SSD"
                     : rotational == "0"          ? "SSD"
                                                  : "disk";
  fields["host_storage_type"] = type + " (" + disk + ", from its rotational flag in /sys/block)";
}

void detect_accelerators(const HostProbe& probe, std::map<std::string, std::string>& fields, ordered_json& software) {
  const auto run = probe.run_command ? probe.run_command : run_with_popen;
  const auto gpus = run("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader");
  if (!gpus) {
    fields["accelerators_per_node"] = "0";
    return;
  }
  std::vector<std::string> models;
  std::string memory;
  int count = 0;
  for (const auto& line : lines_of(*gpus)) {
    const size_t comma = line.rfind(',');
    const std::string name = trim(line.substr(0, comma));
    if (name.empty()) continue;
    ++count;
    if (std::find(models.begin(), models.end(), name) == models.end()) models.push_back(name);
    if (memory.empty() && comma != std::string::npos) memory = trim(line.substr(comma + 1));
  }
  fields["accelerators_per_node"] = std::to_string(count);
  std::string model_text;
  for (const auto& model : models) model_text += (model_text.empty() ? "" : " + ") + model;
  fields["accelerator_model_name"] = model_text;
  fields["accelerator_memory_capacity"] = memory;
  if (const auto driver = run("nvidia-smi --query-gpu=driver_version --format=csv,noheader")) {
    const auto versions = lines_of(*driver);
    if (!versions.empty()) software["nvidia_driver_version"] = versions.front();
  }
}

}  // namespace

std::vector<Finding> check_system_description(const json& description, const std::string& path,
                                              const SystemDescriptionRules& rules) {
  std::vector<Finding> findings;
  const auto add = [&](Severity severity, const std::string& message) {
    findings.push_back({severity, path, 0, message});
  };
  if (!description.is_object()) {
    add(Severity::kError, "a system description must be a JSON object");
    return findings;
  }
  // The v1.1 system_desc_checker only checks that every field is present; any value passes. A value that
  // is not text is worth a warning where the summarizer prints it as a table cell.
  const auto is_structured_field = [&](const std::string& field) {
    const auto& structured = rules.structured_fields;
    return std::find(structured.begin(), structured.end(), field) != structured.end();
  };
  for (const auto& field : rules.fields) {
    const auto found = description.find(field);
    if (found == description.end())
      add(Severity::kError, "missing required field '" + field + "'");
    else if (!found->is_string() && !is_structured_field(field))
      add(Severity::kWarning, "field '" + field + "' is " + describe(*found) +
                                  ", not text; the v1.1 system_desc_checker accepts any value");
  }
  for (const auto& field : rules.count_fields) {
    const auto found = description.find(field);
    if (found == description.end() || !found->is_string()) continue;
    const std::string& text = found->get_ref<const std::string&>();
    if (trim(text).empty())
      add(Severity::kWarning, "field '" + field + "' is empty, so the accelerator count is unknown");
    else if (!whole_number(text))
      add(Severity::kWarning, "field '" + field + "' is " + describe(*found) +
                                  ", not a whole number, so the accelerator count is unknown");
  }
  for (const auto& [field, allowed] : rules.allowed_values) {
    const auto found = description.find(field);
    if (found == description.end()) continue;
    const auto listed = [&](std::string value, bool lowered) {
      if (lowered)  // Python's str.lower(); the lists are ASCII, so other letters cannot match either way
        for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return std::find(allowed.values.begin(), allowed.values.end(), value) != allowed.values.end();
    };
    if (found->is_string() && (listed(found->get<std::string>(), false) ||
                               (allowed.or_lowercased && listed(found->get<std::string>(), true))))
      continue;
    std::string list;
    for (const auto& value : allowed.values) list += (list.empty() ? "'" : ", '") + value + "'";
    add(Severity::kError, "field '" + field + "' is " + describe(*found) +
                              "; the round's system_desc_checker wants one of " + list +
                              (allowed.or_lowercased ? " (or one whose lower case is listed)" : ""));
  }
  for (const auto& [field, value] : description.items()) {
    if (std::find(rules.fields.begin(), rules.fields.end(), field) == rules.fields.end())
      add(Severity::kWarning, "field '" + printable(field, 60) + "' is not one of the required fields");
  }
  return findings;
}

std::vector<Finding> check_system_description_file(const std::string& path, const SystemDescriptionRules& rules,
                                                   json* description) {
  const auto text = read_text(path);
  if (!text) return {{Severity::kError, path, 0, "cannot read the system description"}};
  if (json_nesting_depth(*text, kMaxJsonNesting) > kMaxJsonNesting)
    return {{Severity::kError, path, 0, "JSON nested deeper than " + std::to_string(kMaxJsonNesting) + " levels"}};
  json parsed;
  try {
    parsed = json::parse(*text);
  } catch (const json::exception& error) {
    return {{Severity::kError, path, 0, printable(std::string("invalid JSON: ") + error.what(), 300)}};
  }
  if (description) *description = parsed;
  return check_system_description(parsed, path, rules);
}

std::optional<long long> accelerator_count(const json& description) {
  if (!description.is_object()) return std::nullopt;
  const auto count_of = [&](const char* field) -> std::optional<long long> {
    const auto found = description.find(field);
    return found != description.end() && found->is_string() ? whole_number(found->get<std::string>()) : std::nullopt;
  };
  const auto nodes = count_of("number_of_nodes");
  const auto per_node = count_of("accelerators_per_node");
  if (!nodes || !per_node) return std::nullopt;
  return *nodes * *per_node;
}

std::string hardware_label(const json& description) {
  if (!description.is_object()) return "";
  const auto text_of = [&](const char* field) {
    const auto found = description.find(field);
    return found != description.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  const auto count = accelerator_count(description);
  const std::string model = text_of("accelerator_model_name");
  if (count && *count > 0) return std::to_string(*count) + "x " + (model.empty() ? "accelerators" : model);
  const std::string processor = text_of("host_processor_model_name");
  return processor.empty() ? "" : "CPU: " + processor;
}

ordered_json describe_host(const HostProbe& probe, const SystemDescriptionRules& rules,
                           const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> fields;
  fields["number_of_nodes"] = "1";
  ordered_json software = ordered_json::object();
  software["trainbench"] = std::string(provenance::kVersion) + " (" + provenance::kGitRevision + ")";
  software["compiler"] = provenance::kCompiler;
  const std::string torch = provenance::kTorchVersion;
  fields["framework"] = torch.empty() ? "LibTorch" : "LibTorch " + torch;
  detect_processor(probe.root, fields);
  detect_memory_and_os(probe.root, fields);
  detect_storage(probe, fields);
  detect_accelerators(probe, fields, software);
  for (const auto& [field, value] : given) fields[field] = value;

  ordered_json description = ordered_json::object();
  for (const auto& field : rules.fields) {
    if (field == "other_software_stack" && !given.count(field))
      description[field] = software;
    else
      description[field] = fields.count(field) ? fields[field] : "";
  }
  return description;
}

}  // namespace trainbench::review
