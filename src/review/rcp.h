#pragma once
// Reference convergence points (training rules §2, v1.1 rcp_checker). An RCP table lists, per global batch
// size, how many epochs (samples for BERT) reference runs needed to converge. A submission converges
// suspiciously fast when its olympic mean is below the smallest mean that a one-sided, equal-variance
// two-sample Student t-test (alpha 0.05) would not reject, found by bisection; batch sizes between RCPs are
// linearly interpolated, sizes above all RCPs are a "Missing RCP", sizes below all are compared with the
// smallest one.
#include <optional>
#include <string>
#include <vector>

namespace trainbench::review {

// P(T <= t) for Student's t distribution with `dof` degrees of freedom.
double student_t_cdf(double t, double dof);

// Mean and population standard deviation after dropping `drop_each_side` values from each end.
struct OlympicStats {
  double mean = 0;
  double stdev = 0;
  int samples = 0;  // values left after the drop
};
OlympicStats olympic_stats(std::vector<double> values, int drop_each_side);

// The smallest submission mean not rejected by the one-sided t-test against a reference with this mean and
// stdev, assuming the submission has the same stdev. Bisection on [0, mean] to `tolerance`.
double min_acceptable_mean(double mean, double stdev, int reference_samples, int submission_samples,
                           double alpha = 0.05, double tolerance = 1e-4);

struct RcpPoint {
  std::string name;
  double batch_size = 0;
  std::vector<double> epochs;  // empty for an interpolated point
  double mean = 0;
  double stdev = 0;
  double min_epochs = 0;  // minimum acceptable submission mean
  double max_speedup() const { return min_epochs > 0 ? mean / min_epochs : 0; }
};

struct RcpParameters {
  int submission_runs = 5;  // the benchmark's run count; the t-test assumes submission_runs - 2 samples
  int drop_each_side = 1;
  double alpha = 0.05;
  double tolerance = 1e-4;
  bool prune_on_mean = false;      // from 4.0.0: pruning ranks points by RCP mean, not minimum acceptable mean
  bool stdev_of_all_runs = false;  // from 4.1.0: a point's stdev is over all its runs; its mean stays olympic
  double minimum_offset = 0;       // taken off the minimum acceptable mean in the comparison (BenchmarkRules)
};

struct RcpTable {
  std::string benchmark;
  std::string origin;
  std::vector<RcpPoint> points;  // sorted by batch size
};

// Parses a table in the mlcommons/logging layout ({"name": {"Benchmark", "BS", "Epochs to converge"}, ...});
// top-level "note" fields are skipped. Throws trainbench::Error naming `origin`.
RcpTable parse_rcp_table(const std::string& json_text, const std::string& origin, const RcpParameters& parameters);

// Linear interpolation of mean and stdev between two points; min_epochs is recomputed with
// 2 * submission_runs reference samples, as the v1.1 checker does.
RcpPoint interpolate_rcp(double batch_size, const RcpPoint& low, const RcpPoint& high, const RcpParameters& parameters);

// The 3.0.0 rcp_checker's pruned table (its default --rcp_pass pruned_rcps): the batch sizes below the one
// whose minimum acceptable mean is smallest are dropped, then every inner point whose minimum is above the
// interpolation of its neighbours, so a larger batch size never allows faster convergence than a smaller one.
RcpTable prune_rcp_table(const RcpTable& table, const RcpParameters& parameters);

struct RcpVerdict {
  bool passed = false;
  bool bypassed = false;    // failed, but --rcp-bypass turned it into a pass
  // Whether the verdict counts: the v1.1 package checker checks RCPs of closed-division results only, and
  // not for benchmarks without RCPs (MiniGo). The others still get the rcp_checker's own verdict, for
  // information.
  bool required = true;
  std::string unit;         // what the convergence points count: "epoch_num" or "train_samples"
  std::string outcome;      // "RCP found", "RCP Interpolation", "RCP not found but ...", "Missing RCP", ...
  std::string explanation;  // one sentence with the numbers
  std::optional<RcpPoint> reference;
  std::optional<double> submission_mean;
  // A pass with a submission mean below the RCP mean: RCP mean / submission mean, the factor the 3.0.0
  // rcp_checker normalizes the score by (the package checker writes it to scaling.json).
  std::optional<double> normalization_factor;

  // The rcp_checker's last line: "RCP found, RCP test PASSED".
  std::string summary() const { return outcome + ", RCP test " + (passed ? "PASSED" : "FAILED"); }
};

// `convergence` has one entry per run: the epochs (or samples) it converged at, or nothing when it did not.
// A table without points (a benchmark without RCPs) gives "Cannot find any RCPs".
RcpVerdict check_rcp(const RcpTable& table, double batch_size, const std::vector<std::optional<double>>& convergence,
                     const RcpParameters& parameters, bool bypass, bool bypass_covers_missing);

}  // namespace trainbench::review
