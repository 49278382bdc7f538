#include "review/rcp_builder.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "util/mllog_keys.h"

namespace trainbench::review {

RcpTableDraft make_rcp_table(const std::vector<RunReview>& runs, const std::string& benchmark,
                             const std::string& preset, const std::string& creator, const std::string& platform,
                             int minimum_runs) {
  RcpTableDraft draft;
  const auto leave_out = [&](const RunReview& run, const std::string& why) {
    draft.findings.push_back({Severity::kWarning, run.path, 0, "left out of the RCP table: " + why});
  };
  struct Record {
    std::vector<double> convergence;
    std::vector<std::string> logs;
  };
  std::map<double, Record> by_batch_size;
  for (const auto& run : runs) {
    if (run.benchmark != benchmark)
      leave_out(run, "benchmark '" + printable(run.benchmark, 40) + "', not '" + benchmark + "'");
    else if (run.preset != preset)
      leave_out(run, "preset '" + printable(run.preset, 40) + "', not '" + preset + "'");
    else if (!run.compliant())
      leave_out(run, "it fails its checks");
    else if (!run.converged())
      leave_out(run, "it did not converge");
    else if (!run.convergence || !run.global_batch_size)
      leave_out(run, "no convergence point or global_batch_size");
    else {
      Record& record = by_batch_size[*run.global_batch_size];
      record.convergence.push_back(*run.convergence);
      record.logs.push_back(printable(run.path, 400));
    }
  }
  if (by_batch_size.empty()) return draft;
  nlohmann::ordered_json table;
  const std::string label = preset.empty() ? benchmark : benchmark + "_" + preset;
  const std::string unit =
      runs.front().convergence_unit.empty() ? mllog_keys::kEpochNum : runs.front().convergence_unit;
  table["note"] = "Made by `trainbench rcp-table` from compliant, converged " + label +
                  " runs; 'Epochs to converge' is each run's " + unit + " at its last evaluation. See docs/review.md.";
  for (const auto& [batch_size, record] : by_batch_size) {
    char name[96];
    std::snprintf(name, sizeof name, "%s_ref_%.0f", label.c_str(), batch_size);
    if (static_cast<int>(record.convergence.size()) < minimum_runs)
      draft.findings.push_back(
          {Severity::kWarning, name, 0,
           std::to_string(record.convergence.size()) + (record.convergence.size() == 1 ? " run" : " runs") +
               "; the rules ask for at least " + std::to_string(minimum_runs) + " per reference convergence point"});
    const nlohmann::ordered_json batch = batch_size == std::floor(batch_size)
                                             ? nlohmann::ordered_json(static_cast<long long>(batch_size))
                                             : nlohmann::ordered_json(batch_size);
    table[name] = {{"Benchmark", benchmark},
                   {"Creator", creator},
                   {"Platform", platform},
                   {"Preset", preset},
                   {"BS", batch},
                   {"Logs", record.logs},
                   {"Epochs to converge", record.convergence}};
  }
  draft.json = table.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  return draft;
}

}  // namespace trainbench::review
