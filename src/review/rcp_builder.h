#pragma once
// Makes an RCP table (the mlcommons/logging layout that parse_rcp_table reads) from reference runs of our
// own, e.g. the `mini` preset's: one record per global batch size, listing the convergence point (epoch_num,
// or train_samples for BERT) of every compliant, converged run. Runs that do not qualify are reported and
// left out, so the table only holds evidence a reviewer can trace back to a log.
#include <string>
#include <vector>

#include "review/compliance.h"

namespace trainbench::review {

struct RcpTableDraft {
  std::string json;               // the table, or "" when no run qualified
  std::vector<Finding> findings;  // runs left out and why; too few runs per batch size
};

// `minimum_runs` is the count the rules want per RCP (twice the benchmark's run count).
RcpTableDraft make_rcp_table(const std::vector<RunReview>& runs, const std::string& benchmark,
                             const std::string& preset, const std::string& creator, const std::string& platform,
                             int minimum_runs);

}  // namespace trainbench::review
