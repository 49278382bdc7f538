#pragma once
// The model checked against a submitter's own scaling: for each benchmark, calibrate on its one-node
// results only, predict every multi-node system's time-to-train at that system's node count, devices per
// node and global batch (what a planner chooses, not what the run measured), and compare with the olympic
// score of the multi-node runs, computed from their logs by the review layer's scoring.
#include <string>
#include <vector>

#include "predict/calibrate.h"
#include "predict/three_d.h"

namespace trainbench::predict {

struct ValidationRow {
  std::string system;
  Prediction prediction;
  double published_minutes = 0;
  double error() const { return prediction.minutes / published_minutes - 1; }
};

struct BenchmarkValidation {
  std::string benchmark;
  Calibration calibration;  // the one-node results
  std::vector<ValidationRow> rows;  // by node count
};

// Where evaluation work shards over the devices (device-side metrics) and where it does not: SSD's and
// Mask R-CNN's COCO scoring runs on the host, so their evaluation time is kept at the calibration's.
bool evaluation_scales_with_devices(const std::string& benchmark);

// `organization` is a submission's <org> folder with results/ and systems/. Benchmarks without a one-node
// system or without a multi-node one are left out. `template_scale_out` supplies what the logs do not
// (gradient size, overlap, step overhead); links come from each system's description.
std::vector<BenchmarkValidation> validate_scaling(const std::string& organization, const review::Ruleset& ruleset,
                                                  const ScaleOut& template_scale_out);

// A Markdown table: benchmark, nodes, global batch, predicted and published minutes, error, the parts.
std::string validation_markdown(const std::vector<BenchmarkValidation>& validations);
// An SVG chart of minutes against nodes (both axes logarithmic), drawn as the HTML report draws its charts:
// per benchmark one colour, published scores as a solid line, predictions dashed.
std::string validation_svg(const std::vector<BenchmarkValidation>& validations);
nlohmann::ordered_json to_json(const std::vector<BenchmarkValidation>& validations);

// The 3-D model (three_d.h) checked against published results: calibrated on one results folder at its layout,
// every <org>/results/<system>/<benchmark>/ folder of the calibration's benchmark under a root is predicted at its
// system's nodes, devices and links and its logs' global batch, under one layout, and compared with the review
// layer's olympic score of its runs. Folders of another accelerator than the calibration's are left out (named).
struct LayoutCheck {
  std::string calibrate;  // the calibration's results folder (or one result log)
  Layout calibration_layout, layout;
  ModelRun run;     // the shape, unit and optimizer; the batch is each folder's
  Cluster cluster;  // in-network reduction and device memory; nodes, devices and links are each folder's
};

struct LayoutValidationRow {
  std::string organization;
  Calibration published;  // the folder's logs: system, nodes, batch, links and olympic score
  bool calibration = false;
  ThreeDPrediction prediction;
  double error() const { return prediction.minutes / published.published_minutes.value_or(0) - 1; }
};

struct LayoutValidation {
  std::string benchmark;
  DeviceCalibration calibration;
  Layout layout;
  std::vector<LayoutValidationRow> rows;        // by organization, then nodes
  std::vector<std::string> other_accelerators;  // folders left out: "<org> `<system>` (<accelerator>)"
};

// Throws Error naming the flag or folder when a folder's layout does not divide or fit, or nothing is found.
LayoutValidation validate_layout(const std::string& root, const review::Ruleset& ruleset, const LayoutCheck& check);
std::string layout_validation_markdown(const LayoutValidation& validation);
// validation_svg's chart, one line pair an organization.
std::string layout_validation_svg(const LayoutValidation& validation);
nlohmann::ordered_json to_json(const LayoutValidation& validation);

// The RCP table of a benchmark in the ruleset, or an empty table (MiniGo).
review::RcpTable rcp_table_for(const review::Ruleset& ruleset, const std::string& benchmark);

}  // namespace trainbench::predict
