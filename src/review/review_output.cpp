#include "review/review_output.h"

#include <cstdio>
#include <filesystem>

#include "review/system_description.h"
#include "util/mllog_keys.h"

namespace trainbench::review {

namespace {

using nlohmann::ordered_json;

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

// "1 run", "3 runs".
std::string counted(size_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string run_verdict(const RunReview& run) {
  const int errors = count_findings(run.findings, Severity::kError);
  if (errors > 0) return "FAIL (" + counted(errors, "error") + ")";
  return run.converged() ? "ok" : "ok, not converged";
}

void append_findings(std::string& out, const std::vector<Finding>& findings, const std::string& indent) {
  for (const auto& finding : findings) out += indent + format_finding(finding) + "\n";
}

ordered_json findings_to_json(const std::vector<Finding>& findings) {
  ordered_json list = ordered_json::array();
  for (const auto& finding : findings) {
    list.push_back({{"severity", severity_name(finding.severity)},
                    {"file", printable(finding.file, 400)},
                    {"line", finding.line},
                    {"message", finding.message}});
  }
  return list;
}

template <typename T>
ordered_json optional_number(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

std::string score_text(const BenchmarkReview& benchmark) {
  const auto& score = benchmark.score;
  if (!score.mean_minutes) return "no score";
  const int counted = score.runs - 2 * score.drop_each_side;
  char factor[32] = "";
  if (score.scaling_factor) std::snprintf(factor, sizeof factor, "%.6f", *score.scaling_factor);
  return format_minutes(*score.mean_minutes) + " min (olympic mean of " + std::to_string(counted) +
         (counted == 1 ? " run, " : " runs, ") + std::to_string(score.drop_each_side) + " dropped at each end" +
         (score.scaling_factor ? std::string(", times scaling_factor ") + factor : "") + ")";
}

// "RCP found, RCP test PASSED (epoch_num): mean 35.0000 >= minimum ..." plus whether it counts.
std::string rcp_text(const RcpVerdict& rcp) {
  return rcp.summary() + (rcp.unit.empty() ? "" : " (" + rcp.unit + ")") +
         (rcp.explanation.empty() ? "" : ": " + rcp.explanation) + (rcp.required ? "" : " [not required]");
}

}  // namespace

std::string format_minutes(double minutes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", minutes);
  return text;
}

std::string format_convergence(const RunReview& run) {
  if (!run.convergence) return "";
  char text[48];
  if (run.convergence_unit == mllog_keys::kTrainSamples || run.convergence_unit == kSamplesCountUnit)
    std::snprintf(text, sizeof text, "%.0f samples", *run.convergence);
  else if (run.convergence_unit == kStepNumUnit)
    std::snprintf(text, sizeof text, "step %.0f", *run.convergence);
  else
    std::snprintf(text, sizeof text, "epoch %g", *run.convergence);
  return text;
}

std::string format_run_text(const RunReview& run) {
  const int errors = count_findings(run.findings, Severity::kError);
  std::string out = printable(run.path, 400) + ": ";
  if (errors > 0)
    out += "NOT compliant (" + counted(errors, "error") + "), not scored\n";
  else
    out += run.converged() ? "compliant, converged\n" : "compliant, did not converge\n";
  if (!run.benchmark.empty())
    out += "  benchmark     " + printable(run.benchmark, 40) + " (" + printable(run.division, 20) + " division)\n";
  if (!run.target_description.empty())
    out += "  target        " + run.target_description +
           (run.preset.empty() ? "" : " (" + printable(run.preset, 40) + " preset)") + "\n";
  if (run.minutes) out += "  minutes       " + format_minutes(*run.minutes) + " (run_start to run_stop)\n";
  if (run.convergence)
    out += std::string(run.converged() ? "  converged at  " : "  last eval at  ") + format_convergence(run) + "\n";
  out += "  run_stop      " +
         (run.run_stop_status.empty() ? std::string("(missing)") : printable(run.run_stop_status, 40)) + "\n";
  append_findings(out, run.findings, "  ");
  return out;
}

std::string format_submission_text(const SubmissionReview& review) {
  std::string out =
      "trainbench review of " + printable(review.root, 400) + " (ruleset " + review.ruleset_version + ")\n";
  append_findings(out, review.findings, "  ");
  int runs = 0, benchmarks = 0, rcp_failures = 0, errors = count_findings(review.findings, Severity::kError);
  int warnings = count_findings(review.findings, Severity::kWarning);
  for (const auto& system : review.systems) {
    out += "\nsystem " + printable(system.name, 100);
    const std::string hardware = hardware_label(system.description);
    if (!hardware.empty()) out += " (" + printable(hardware, 100) + ")";
    out += "\n";
    if (!system.description_path.empty())
      out += "  " + printable(system.description_path, 400) + ": " + (has_errors(system.findings) ? "INVALID" : "ok") +
             "\n";
    append_findings(out, system.findings, "  ");
    errors += count_findings(system.findings, Severity::kError);
    warnings += count_findings(system.findings, Severity::kWarning);
    for (const auto& benchmark : system.benchmarks) {
      ++benchmarks;
      out += "\n  " + printable(benchmark.benchmark, 60) + ": " + verdict_name(benchmark.verdict()) + ", " +
             score_text(benchmark) + "\n";
      for (const auto& reason : benchmark.invalid_reasons()) out += "    reason: " + reason + "\n";
      out += "    " + pad("run", 16) + pad("verdict", 20) + pad("minutes", 10) + "converged at\n";
      for (const auto& run : benchmark.runs) {
        ++runs;
        out += "    " + pad(printable(file_name(run.path), 60), 16) + pad(run_verdict(run), 20) +
               pad(run.minutes ? format_minutes(*run.minutes) : "-", 10) +
               (run.converged() ? format_convergence(run) : "-") + "\n";
      }
      for (const auto& run : benchmark.runs) {
        append_findings(out, run.findings, "    ");
        errors += count_findings(run.findings, Severity::kError);
        warnings += count_findings(run.findings, Severity::kWarning);
      }
      if (benchmark.rcp) out += "    RCP check: " + rcp_text(*benchmark.rcp) + "\n";
      if (benchmark.verdict() == Verdict::kRcpFailed) ++rcp_failures;
      append_findings(out, benchmark.findings, "    ");
      errors += count_findings(benchmark.findings, Severity::kError);
      warnings += count_findings(benchmark.findings, Severity::kWarning);
    }
  }
  out += "\n" + std::string(verdict_name(review.verdict())) + ": " + counted(review.systems.size(), "system") + ", " +
         counted(benchmarks, "benchmark") + ", " + counted(runs, "run") + "; " + counted(errors, "error") + ", " +
         counted(rcp_failures, "failed RCP check") + ", " + counted(warnings, "warning") + "\n";
  return out;
}

ordered_json run_to_json(const RunReview& run) {
  ordered_json out;
  out["path"] = printable(run.path, 400);
  out["compliant"] = run.compliant();
  out["converged"] = run.converged();
  out["target_reached"] = run.target_reached;
  out["benchmark"] = printable(run.benchmark, 60);
  out["division"] = printable(run.division, 60);
  out["preset"] = printable(run.preset, 60);
  out["target"] = run.target_description;
  out["run_stop_status"] = printable(run.run_stop_status, 60);
  out["minutes"] = optional_number(run.minutes);
  out["convergence"] = optional_number(run.convergence);
  out["convergence_unit"] = run.convergence_unit;
  out["global_batch_size"] = optional_number(run.global_batch_size);
  out["findings"] = findings_to_json(run.findings);
  return out;
}

ordered_json submission_to_json(const SubmissionReview& review) {
  ordered_json out;
  out["root"] = printable(review.root, 400);
  out["ruleset"] = review.ruleset_version;
  out["valid"] = review.valid();
  out["verdict"] = verdict_name(review.verdict());
  out["package_layout"] = review.package_layout;
  out["findings"] = findings_to_json(review.findings);
  out["systems"] = ordered_json::array();
  for (const auto& system : review.systems) {
    ordered_json system_json;
    system_json["name"] = printable(system.name, 200);
    system_json["description"] = printable(system.description_path, 400);
    system_json["hardware"] = printable(hardware_label(system.description), 200);
    system_json["valid"] = system.valid();
    system_json["verdict"] = verdict_name(system.verdict());
    system_json["findings"] = findings_to_json(system.findings);
    system_json["benchmarks"] = ordered_json::array();
    for (const auto& benchmark : system.benchmarks) {
      ordered_json entry;
      entry["benchmark"] = printable(benchmark.benchmark, 60);
      entry["valid"] = benchmark.valid();
      entry["verdict"] = verdict_name(benchmark.verdict());
      entry["invalid_reasons"] = benchmark.invalid_reasons();
      entry["score_minutes"] = optional_number(benchmark.score.mean_minutes);
      entry["runs_scored"] = benchmark.score.runs;
      entry["non_converged"] = benchmark.score.non_converged;
      entry["drop_each_side"] = benchmark.score.drop_each_side;
      if (benchmark.score.scaling_factor) entry["scaling_factor"] = *benchmark.score.scaling_factor;
      if (benchmark.rcp) {
        entry["rcp"] = {{"passed", benchmark.rcp->passed},
                        {"bypassed", benchmark.rcp->bypassed},
                        {"required", benchmark.rcp->required},
                        {"summary", benchmark.rcp->summary()},
                        {"unit", benchmark.rcp->unit},
                        {"outcome", benchmark.rcp->outcome},
                        {"explanation", benchmark.rcp->explanation},
                        {"submission_mean", optional_number(benchmark.rcp->submission_mean)}};
        if (benchmark.rcp->normalization_factor)
          entry["rcp"]["normalization_factor"] = *benchmark.rcp->normalization_factor;
        if (benchmark.rcp->reference) {
          const RcpPoint& point = *benchmark.rcp->reference;
          entry["rcp"]["reference"] = {
              {"name", point.name},   {"batch_size", point.batch_size}, {"mean", point.mean},
              {"stdev", point.stdev}, {"min_epochs", point.min_epochs}, {"max_speedup", point.max_speedup()}};
        }
      }
      entry["findings"] = findings_to_json(benchmark.findings);
      entry["runs"] = ordered_json::array();
      for (const auto& run : benchmark.runs) entry["runs"].push_back(run_to_json(run));
      system_json["benchmarks"].push_back(std::move(entry));
    }
    out["systems"].push_back(std::move(system_json));
  }
  return out;
}

}  // namespace trainbench::review
