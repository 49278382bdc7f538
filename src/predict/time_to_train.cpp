#include "predict/time_to_train.h"

#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace trainbench::predict {

namespace {

double exchange_seconds(const ScaleOut& scale_out, int nodes, int devices_per_node, double per_device_batch,
                        const Link& intra, const Link& inter) {
  const double all_reduce = hierarchical_all_reduce_seconds(scale_out.gradient_bytes, nodes, devices_per_node, intra, inter);
  const double all_to_all = scale_out.all_to_all_bytes_per_sample > 0
                                ? all_to_all_seconds(scale_out.all_to_all_bytes_per_sample * per_device_batch, nodes,
                                                     devices_per_node, intra, inter)
                                : 0;
  return all_reduce + all_to_all;
}

// A link the calibration's system description did not give is taken to be the scale-out's (same hardware).
Link known_or(const Link& link, const Link& fallback) {
  return link.bytes_per_second > 0 ? link : fallback;
}

}  // namespace

std::string format_decimals(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

double rcp_mean_units(const review::RcpTable& table, double batch) {
  const auto& points = table.points;
  if (points.empty()) fail(table.origin, "holds no RCP points");
  if (batch <= points.front().batch_size) return points.front().mean;
  for (size_t i = 1; i < points.size(); ++i)
    if (batch <= points[i].batch_size) {
      const double weight = (batch - points[i - 1].batch_size) / (points[i].batch_size - points[i - 1].batch_size);
      return points[i - 1].mean + weight * (points[i].mean - points[i - 1].mean);
    }
  if (points.size() == 1) return points.front().mean;
  const auto& low = points[points.size() - 2];
  const auto& high = points.back();
  return high.mean + (batch - high.batch_size) * (high.mean - low.mean) / (high.batch_size - low.batch_size);
}

Prediction predict_time_to_train(const Calibration& calibration, const ScaleOut& scale_out, const review::RcpTable* rcp) {
  const std::string where = "predict " + calibration.benchmark;
  if (scale_out.nodes < 1 || scale_out.devices_per_node < 1) fail(where, "nodes and devices per node must be at least 1");
  if (!(scale_out.per_device_batch > 0)) fail(where, "the per-device batch must be positive");
  if (!(calibration.samples_per_second_per_device > 0))
    fail(calibration.source, "the calibration has no training throughput (samples per second per device)");
  if (!(calibration.global_batch > 0)) fail(calibration.source, "the calibration has no global batch size");

  Prediction prediction;
  prediction.benchmark = calibration.benchmark;
  prediction.nodes = scale_out.nodes;
  prediction.devices_per_node = scale_out.devices_per_node;
  prediction.per_device_batch = scale_out.per_device_batch;
  prediction.global_batch = scale_out.per_device_batch * scale_out.nodes * scale_out.devices_per_node;
  prediction.unit = calibration.unit;
  prediction.notes = calibration.notes;

  // Units to converge: given, or the calibration's scaled by how the RCP means grow with the batch, or
  // (a calibration that did not train to the target, e.g. a bench) the RCP mean itself.
  const bool has_rcp = rcp && !rcp->points.empty();
  if (scale_out.units_to_converge) {
    prediction.units = *scale_out.units_to_converge;
    prediction.units_source = "given";
  } else if (calibration.units_to_converge && has_rcp) {
    const double at_new = rcp_mean_units(*rcp, prediction.global_batch);
    const double at_calibration = rcp_mean_units(*rcp, calibration.global_batch);
    prediction.units = *calibration.units_to_converge * at_new / at_calibration;
    prediction.units_source = "calibration " + format_decimals(*calibration.units_to_converge, 2) + " x RCP mean " +
                              format_decimals(at_new, 2) + " at batch " + format_decimals(prediction.global_batch, 0) +
                              " / " + format_decimals(at_calibration, 2) + " at batch " +
                              format_decimals(calibration.global_batch, 0);
  } else if (calibration.units_to_converge) {
    prediction.units = *calibration.units_to_converge;
    prediction.units_source = "calibration (no RCP table: the units do not grow with the batch)";
    prediction.notes.push_back("no RCP table for " + calibration.benchmark + ": units to converge kept at the calibration's");
  } else if (has_rcp) {
    prediction.units = rcp_mean_units(*rcp, prediction.global_batch);
    prediction.units_source = "RCP mean at batch " + format_decimals(prediction.global_batch, 0);
  } else {
    fail(where, "neither the calibration nor an RCP table says how long " + calibration.benchmark +
                    " takes to converge: give the units to converge (--converge-at)");
  }
  if (has_rcp && !scale_out.units_to_converge && prediction.global_batch > rcp->points.back().batch_size)
    prediction.notes.push_back("batch " + format_decimals(prediction.global_batch, 0) +
                               " is above every RCP (largest " + format_decimals(rcp->points.back().batch_size, 0) +
                               "): the RCP mean is extrapolated");
  if (!(calibration.samples_per_unit > 0))
    fail(where, "the calibration does not say how many samples an epoch holds (--samples-per-epoch)");
  prediction.steps = std::ceil(prediction.units * calibration.samples_per_unit / prediction.global_batch);

  // Compute per step: the calibration's step less its own exposed exchange, split into a fixed overhead and
  // a part proportional to the per-device batch.
  const double calibration_step = calibration.per_device_batch() / calibration.samples_per_second_per_device;
  const double calibration_exchange =
      exchange_seconds(scale_out, calibration.nodes, calibration.devices_per_node, calibration.per_device_batch(),
                       known_or(calibration.intra, scale_out.intra), known_or(calibration.inter, scale_out.inter));
  double calibration_compute = calibration_step;
  if (calibration_exchange > scale_out.overlap * calibration_step && scale_out.overlap < 1)
    calibration_compute = (calibration_step - calibration_exchange) / (1 - scale_out.overlap);
  if (!(calibration_compute > scale_out.step_overhead_seconds))
    fail(where, "the calibration's step (" + format_decimals(calibration_step * 1e3, 3) +
                    " ms) leaves no compute after its "
                    "modelled gradient exchange (" +
                    format_decimals(calibration_exchange * 1e3, 3) + " ms) and step overhead (" +
                    format_decimals(scale_out.step_overhead_seconds * 1e3, 3) + " ms)");
  const double seconds_per_sample = (calibration_compute - scale_out.step_overhead_seconds) / calibration.per_device_batch();
  prediction.compute_seconds_per_step = scale_out.step_overhead_seconds + seconds_per_sample * scale_out.per_device_batch;

  prediction.exchange_seconds_per_step = exchange_seconds(scale_out, scale_out.nodes, scale_out.devices_per_node,
                                                          scale_out.per_device_batch, scale_out.intra, scale_out.inter);
  prediction.exposed_exchange_seconds_per_step =
      exposed_seconds(prediction.exchange_seconds_per_step, prediction.compute_seconds_per_step, scale_out.overlap);
  if (scale_out.gradient_bytes <= 0)
    prediction.notes.push_back("no gradient size given (--gradient-bytes): the gradient exchange is not modelled");

  const double step = prediction.compute_seconds_per_step + prediction.exposed_exchange_seconds_per_step;
  if (scale_out.input_samples_per_second_per_node > 0) {
    const double input = scale_out.per_device_batch * scale_out.devices_per_node / scale_out.input_samples_per_second_per_node;
    prediction.input_wait_seconds_per_step = std::max(0.0, input - step);
  }

  prediction.evaluations = prediction.units * calibration.evaluations_per_unit;
  prediction.seconds_per_evaluation =
      scale_out.evaluation_scales
          ? calibration.seconds_per_evaluation * calibration.devices() / (scale_out.nodes * scale_out.devices_per_node)
          : calibration.seconds_per_evaluation;

  prediction.fixed_seconds = calibration.fixed_seconds;
  prediction.compute_seconds = prediction.steps * prediction.compute_seconds_per_step;
  prediction.exchange_seconds = prediction.steps * prediction.exposed_exchange_seconds_per_step;
  prediction.input_wait_seconds = prediction.steps * prediction.input_wait_seconds_per_step;
  prediction.evaluation_seconds = prediction.evaluations * prediction.seconds_per_evaluation;
  prediction.minutes = (prediction.fixed_seconds + prediction.compute_seconds + prediction.exchange_seconds +
                        prediction.input_wait_seconds + prediction.evaluation_seconds) /
                       60.0;
  return prediction;
}

nlohmann::ordered_json to_json(const Prediction& prediction) {
  return {{"benchmark", prediction.benchmark},
          {"minutes", prediction.minutes},
          {"parts",
           {{"fixed_seconds", prediction.fixed_seconds},
            {"training_compute_seconds", prediction.compute_seconds},
            {"gradient_exchange_seconds", prediction.exchange_seconds},
            {"input_wait_seconds", prediction.input_wait_seconds},
            {"evaluation_seconds", prediction.evaluation_seconds}}},
          {"nodes", prediction.nodes},
          {"devices_per_node", prediction.devices_per_node},
          {"per_device_batch", prediction.per_device_batch},
          {"global_batch", prediction.global_batch},
          {"convergence",
           {{"unit", prediction.unit}, {"to_converge", prediction.units}, {"source", prediction.units_source}}},
          {"steps", prediction.steps},
          {"step_seconds",
           {{"compute", prediction.compute_seconds_per_step},
            {"exchange", prediction.exchange_seconds_per_step},
            {"exposed_exchange", prediction.exposed_exchange_seconds_per_step},
            {"input_wait", prediction.input_wait_seconds_per_step}}},
          {"evaluations", prediction.evaluations},
          {"seconds_per_evaluation", prediction.seconds_per_evaluation},
          {"notes", prediction.notes}};
}

nlohmann::ordered_json to_json(const Calibration& calibration) {
  const auto optional_number = [](const std::optional<double>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json();
  };
  return {{"benchmark", calibration.benchmark},
          {"source", calibration.source},
          {"system", calibration.system},
          {"accelerator", calibration.accelerator},
          {"nodes", calibration.nodes},
          {"devices_per_node", calibration.devices_per_node},
          {"global_batch", calibration.global_batch},
          {"unit", calibration.unit},
          {"samples_per_unit", calibration.samples_per_unit},
          {"units_to_converge", optional_number(calibration.units_to_converge)},
          {"samples_per_second_per_device", calibration.samples_per_second_per_device},
          {"evaluations_per_unit", calibration.evaluations_per_unit},
          {"seconds_per_evaluation", calibration.seconds_per_evaluation},
          {"fixed_seconds", calibration.fixed_seconds},
          {"published_minutes", optional_number(calibration.published_minutes)},
          {"runs", calibration.runs},
          {"intra_node_bytes_per_second", calibration.intra.bytes_per_second},
          {"inter_node_bytes_per_second", calibration.inter.bytes_per_second}};
}

std::string format_prediction_text(const Prediction& prediction) {
  std::string out = prediction.benchmark + " on " + std::to_string(prediction.nodes) + " node(s) x " +
                    std::to_string(prediction.devices_per_node) + " device(s), per-device batch " +
                    format_decimals(prediction.per_device_batch, 2) + " (global " +
                    format_decimals(prediction.global_batch, 0) + "): " + format_decimals(prediction.minutes, 3) +
                    " minutes\n";
  const auto part = [&](const char* name, double seconds, const std::string& how) {
    out += std::string("  ") + name + std::string(22 - std::string(name).size(), ' ') + format_decimals(seconds, 1) +
           " s  " + how + "\n";
  };
  part("fixed", prediction.fixed_seconds, "run_start to the first step, as calibrated");
  part("training compute", prediction.compute_seconds,
       format_decimals(prediction.steps, 0) + " steps x " +
           format_decimals(prediction.compute_seconds_per_step * 1e3, 3) + " ms");
  part("gradient exchange", prediction.exchange_seconds,
       "exposed " + format_decimals(prediction.exposed_exchange_seconds_per_step * 1e3, 3) + " ms of " +
           format_decimals(prediction.exchange_seconds_per_step * 1e3, 3) + " ms per step");
  part("input wait", prediction.input_wait_seconds,
       format_decimals(prediction.input_wait_seconds_per_step * 1e3, 3) + " ms per step");
  part("evaluation", prediction.evaluation_seconds,
       format_decimals(prediction.evaluations, 1) + " x " + format_decimals(prediction.seconds_per_evaluation, 3) +
           " s");
  out += "  converges at " + format_decimals(prediction.units, 2) + " " + prediction.unit + " (" +
         prediction.units_source + ")\n";
  for (const auto& note : prediction.notes) out += "  note: " + note + "\n";
  return out;
}

}  // namespace trainbench::predict
