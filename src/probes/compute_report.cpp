// The LibTorch-free half of probe compute: peaks, printing, the JSON copy and reading it back.
#include <algorithm>

#include "probes/compute_probe.h"
#include "probes/environment.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::probes {

std::string ConvShape::describe() const {
  char text[96];
  std::snprintf(text, sizeof text, "N%lld C%lld %lldx%lld -> K%lld %lldx%lld/%lld", static_cast<long long>(batch),
                static_cast<long long>(in_channels), static_cast<long long>(height), static_cast<long long>(width),
                static_cast<long long>(out_channels), static_cast<long long>(kernel), static_cast<long long>(kernel),
                static_cast<long long>(stride));
  return text;
}

std::vector<DtypePeak> ComputeProbeResult::peaks() const {
  std::vector<DtypePeak> peaks;
  for (const auto& row : rows) {
    auto peak = std::find_if(peaks.begin(), peaks.end(), [&](const DtypePeak& p) { return p.dtype == row.dtype; });
    if (peak == peaks.end()) {
      peak = peaks.emplace(peaks.end());
      peak->dtype = row.dtype;
    }
    const double achieved = row.flops_per_second();
    if (achieved > peak->flops_per_second) {
      peak->flops_per_second = achieved;
      peak->op = row.op;
      peak->shape = row.shape;
    }
    double& best_of_op = row.op == "gemm" ? peak->gemm_flops_per_second : peak->conv_flops_per_second;
    best_of_op = std::max(best_of_op, achieved);
  }
  return peaks;
}

std::optional<std::string> cpu_bf16_skip_reason(const std::string& cpuinfo) {
  if (cpuinfo_has_flag(cpuinfo, "avx512_bf16") || cpuinfo_has_flag(cpuinfo, "amx_bf16")) return std::nullopt;
  return "this CPU has no native bf16 arithmetic (/proc/cpuinfo lists neither avx512_bf16 nor amx_bf16), so "
         "LibTorch would emulate it at a fraction of fp32 speed";
}

std::string format_flops(double flops_per_second) {
  char text[32];
  if (flops_per_second >= 1e12) std::snprintf(text, sizeof text, "%.2f TFLOP/s", flops_per_second / 1e12);
  else std::snprintf(text, sizeof text, "%.1f GFLOP/s", flops_per_second / 1e9);
  return text;
}

void print_row(const ComputeRow& row, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %-5s %-32s %11.4f ms %8lld x %-5lld %s\n", row.op.c_str(), row.dtype.c_str(),
                row.shape.c_str(), row.seconds_per_call * 1e3, static_cast<long long>(row.repetitions),
                static_cast<long long>(row.calls_per_repetition), format_flops(row.flops_per_second()).c_str());
  out << line;
}

void print_peaks(const ComputeProbeResult& result, std::ostream& out) {
  for (const auto& skipped : result.skipped) out << "skipped " << skipped.dtype << ": " << skipped.reason << "\n";
  for (const auto& note : result.notes) out << "note: " << note << "\n";
  out << "measured peak per dtype (" << result.device << ", " << result.device_name << ", " << result.threads << " threads):\n";
  for (const auto& peak : result.peaks()) {
    out << "  " << peak.dtype << "  " << format_flops(peak.flops_per_second) << "  (" << peak.op << " " << peak.shape
        << "; best gemm " << format_flops(peak.gemm_flops_per_second) << ", best conv "
        << format_flops(peak.conv_flops_per_second) << ")\n";
  }
}

nlohmann::ordered_json to_json(const ComputeProbeOptions& options, const ComputeProbeResult& result) {
  nlohmann::ordered_json report;
  report["probe"] = "compute";
  report["arguments"] = {{"device", options.device}, {"threads", options.threads}, {"seconds", options.seconds}};
  auto environment = host_environment();
  environment["device"] = result.device;
  environment["device_name"] = result.device_name;
  environment["threads"] = result.threads;
  report["environment"] = environment;
  report["rows"] = nlohmann::ordered_json::array();
  for (const auto& row : result.rows)
    report["rows"].push_back({{"op", row.op},
                              {"dtype", row.dtype},
                              {"shape", row.shape},
                              {"flops_per_call", row.flops_per_call},
                              {"seconds_per_call", row.seconds_per_call},
                              {"calls_per_repetition", row.calls_per_repetition},
                              {"repetitions", row.repetitions},
                              {"flops_per_second", row.flops_per_second()}});
  report["peaks"] = nlohmann::ordered_json::object();
  for (const auto& peak : result.peaks())
    report["peaks"][peak.dtype] = {{"flops_per_second", peak.flops_per_second},
                                   {"op", peak.op},
                                   {"shape", peak.shape},
                                   {"gemm_flops_per_second", peak.gemm_flops_per_second},
                                   {"conv_flops_per_second", peak.conv_flops_per_second}};
  report["skipped"] = nlohmann::ordered_json::array();
  for (const auto& skipped : result.skipped) report["skipped"].push_back({{"dtype", skipped.dtype}, {"reason", skipped.reason}});
  report["notes"] = result.notes;
  return report;
}

double read_measured_peak(const std::string& path, const std::string& dtype) {
  nlohmann::json report;
  const std::string text = read_file(path);
  check_json_nesting(text, path);
  try {
    report = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(path, std::string("not JSON (expected the --json copy of `trainbench probe compute`): ") + error.what());
  }
  const auto peaks = report.find("peaks");
  if (report.value("probe", "") != "compute" || peaks == report.end() || !peaks->is_object())
    fail(path, "is not the --json copy of `trainbench probe compute` (expected \"probe\": \"compute\" and \"peaks\")");
  const auto peak = peaks->find(dtype);
  if (peak == peaks->end() || !peak->contains("flops_per_second") || !(*peak)["flops_per_second"].is_number() ||
      (*peak)["flops_per_second"].get<double>() <= 0)
    fail(path, "has no measured " + dtype + " peak (peaks." + dtype + ".flops_per_second)");
  return (*peak)["flops_per_second"].get<double>();
}

}  // namespace trainbench::probes
