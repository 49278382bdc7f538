#pragma once
// Olympic scoring of repeated runs (training rules §2): sort the run times, drop the fastest and slowest
// `drop_each_side` (1 for most benchmarks, 4 for UNet3D), and average the rest. A run that did not converge
// counts as infinitely slow, so it is the first to be dropped; more non-converged runs than can be dropped
// make the score invalid.
#include <optional>
#include <vector>

namespace trainbench::review {

struct RunTime {
  double minutes = 0;
  bool converged = true;
};

struct OlympicScore {
  std::optional<double> mean_minutes;  // empty when the score is invalid
  int runs = 0;
  int non_converged = 0;
  int drop_each_side = 1;
  // The result summarizer's scaling (3.0.0: scaling.json); mean_minutes already includes it.
  std::optional<double> scaling_factor;
};

OlympicScore olympic_score(const std::vector<RunTime>& runs, int drop_each_side = 1);

}  // namespace trainbench::review
