#pragma once
// Time-to-train at N nodes from a calibration (what one measured configuration showed) and the scale-out
// inputs (links, gradient size, input rate). The prediction, with every part named:
//   minutes = (fixed + steps x step + evaluations x evaluation) / 60
//   steps   = units to converge at the new global batch x samples per unit / global batch
//   units   = calibration units x RCP mean(new batch) / RCP mean(calibration batch)
//   step    = compute(per-device batch) + exposed gradient exchange + input wait
// docs/predict.md derives each term and says what is not modelled.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "predict/collectives.h"
#include "review/rcp.h"
#include "util/mllog_keys.h"

namespace trainbench::predict {

// One measured configuration: from a result log (calibrate.h) or from `trainbench bench --json`.
struct Calibration {
  std::string benchmark;
  std::string source;  // the log folder, file or bench JSON it came from
  std::string system;  // the system name, or "" when unknown
  std::string accelerator;  // the system description's accelerator_model_name, or "" when unknown
  int nodes = 1;
  int devices_per_node = 1;
  double global_batch = 0;
  // What convergence is counted in, as the RCP tables count it: "epoch_num" (then samples_per_unit is
  // the epoch's train_samples) or "train_samples" (BERT; samples_per_unit 1).
  std::string unit = mllog_keys::kEpochNum;
  double samples_per_unit = 1;
  std::optional<double> units_to_converge;  // olympic mean over converged runs; none from a bench
  double samples_per_second_per_device = 0;  // while training: evaluation and the fixed start excluded
  double evaluations_per_unit = 0;
  double seconds_per_evaluation = 0;  // 0 when the log does not time evaluations (they stay in training)
  double fixed_seconds = 0;           // run_start to the first block or epoch: the timed start-up
  std::optional<double> published_minutes;  // the olympic score of the runs, with the rules' drop
  int runs = 0;
  Link intra;  // from the system description beside the results, where one was found
  Link inter;
  std::vector<std::string> notes;  // what could not be read and what was assumed instead

  int devices() const { return nodes * devices_per_node; }
  double per_device_batch() const { return global_batch / devices(); }
};

struct ScaleOut {
  int nodes = 1;
  int devices_per_node = 1;
  double per_device_batch = 0;
  Link intra;
  Link inter;
  double gradient_bytes = 0;                // exchanged by all-reduce every step; 0: not modelled
  double all_to_all_bytes_per_sample = 0;   // exchanged by all-to-all (DLRM's embeddings); 0: none
  double overlap = 2.0 / 3.0;               // share of the compute an exchange can hide behind (backward)
  double step_overhead_seconds = 0;         // the part of a step that does not shrink with the batch
  double input_samples_per_second_per_node = 0;  // `probe storage`'s read rate; 0: input never waits
  bool evaluation_scales = true;            // evaluation shards over the devices (false: host-side scoring)
  std::optional<double> units_to_converge;  // given instead of the RCP ratio (benchmarks without RCPs)
};

struct Prediction {
  std::string benchmark;
  int nodes = 0, devices_per_node = 0;
  double global_batch = 0, per_device_batch = 0;
  std::string unit;
  double units = 0;
  std::string units_source;  // how the units were found, with the RCP numbers
  double steps = 0;
  double compute_seconds_per_step = 0;
  double exchange_seconds_per_step = 0;  // the whole exchange, hidden or not
  double exposed_exchange_seconds_per_step = 0;
  double input_wait_seconds_per_step = 0;
  double evaluations = 0;
  double seconds_per_evaluation = 0;
  // The parts, in seconds; they add up to minutes x 60.
  double fixed_seconds = 0, compute_seconds = 0, exchange_seconds = 0, input_wait_seconds = 0, evaluation_seconds = 0;
  double minutes = 0;
  std::vector<std::string> notes;
};

// `value` with `decimals` digits after the point, as the predictions print their numbers.
std::string format_decimals(double value, int decimals);

// The mean units to converge at `batch` in an RCP table: the point's mean, linear between neighbours,
// the smallest point's below them all and the last two points' line above them all.
double rcp_mean_units(const review::RcpTable& table, double batch);

// `rcp` may be null or empty (a benchmark without RCPs): then the units stay the calibration's unless the
// scale-out gives them. Throws trainbench::Error when the inputs cannot make a prediction.
Prediction predict_time_to_train(const Calibration& calibration, const ScaleOut& scale_out, const review::RcpTable* rcp);

nlohmann::ordered_json to_json(const Prediction& prediction);
nlohmann::ordered_json to_json(const Calibration& calibration);
std::string format_prediction_text(const Prediction& prediction);

}  // namespace trainbench::predict
