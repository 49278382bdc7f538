#pragma once
// Generates Criteo-format day files (data/criteo.h) whose labels come from a planted model, so a DLRM can
// learn them and the best possible AUC is known. Per sample:
//   dense I_j:  floor(exp(N(mu_j, 1))) - 1 >= 0; I2 is -1 now and then (as in Criteo; the reader clamps it
//               to 0); each field is empty with probability missing_dense
//   sparse C_f: a Zipf(zipf_exponent) id over 0 .. cardinality_f - 1, printed as %08x; empty with
//               probability missing_sparse, which the planted model (like the reader) treats as id 0
//   label:      Bernoulli(sigmoid(logit)) with the hidden
//     logit = bias + sum_j w_j (log(1 + I_j) - mu_j)              dense effects
//                  + sum_f a_f[C_f]                                per-id effects (some features have none)
//                  + sum_(f,g) in pairs  u_f[C_f] . u_g[C_g]       low-rank pairwise interactions
// The last day is the eval split. The ceiling is the AUC of the true probabilities against the drawn eval
// labels: no model can expect to beat it. Output is a pure function of the options.
//
//   <out_dir>/day_0 ... day_<days-1>   (plain text, or gzip with `gzip`)
//   <out_dir>/planted.json             {"eval_auc_ceiling": ..., "eval_positive_rate": ..., ...}
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::data {

struct CriteoSyntheticOptions {
  int days = 4;                          // the last one is the eval split
  int64_t samples_per_day = 100000;      // training days
  int64_t eval_samples = 50000;          // the last day
  std::vector<int64_t> cardinalities;    // 26 values, each >= 1
  double zipf_exponent = 1.1;
  double missing_dense = 0.1;
  double missing_sparse = 0.05;
  double bias = -1.0;
  bool gzip = false;
  uint64_t seed = 1;
};

struct CriteoSyntheticSummary {
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
  double eval_auc_ceiling = 0;
  double eval_positive_rate = 0;
};

// Writes the day files and planted.json into out_dir (created if needed). Each file appears atomically.
CriteoSyntheticSummary make_criteo_synthetic(const std::string& out_dir, const CriteoSyntheticOptions& options);

}  // namespace trainbench::data
