#include "predict/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "review/report.h"
#include "util/error.h"

namespace trainbench::predict {

namespace fs = std::filesystem;

namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

}  // namespace

bool evaluation_scales_with_devices(const std::string& benchmark) { return benchmark != "ssd" && benchmark != "maskrcnn"; }

review::RcpTable rcp_table_for(const review::Ruleset& ruleset, const std::string& benchmark) {
  const review::BenchmarkRules* rules = ruleset.benchmark(benchmark);
  if (!rules || rules->rcp_table.empty()) return {};
  const auto text = review::read_ruleset_file(ruleset, rules->rcp_table);
  if (!text) fail(rules->rcp_table, "the RCP table named by ruleset " + ruleset.version + " is missing");
  review::RcpParameters parameters;
  parameters.submission_runs = rules->runs;
  parameters.drop_each_side = rules->drop_each_side;
  return review::parse_rcp_table(*text, rules->rcp_table, parameters);
}

std::vector<BenchmarkValidation> validate_scaling(const std::string& organization, const review::Ruleset& ruleset,
                                                  const ScaleOut& template_scale_out) {
  const fs::path results = fs::path(organization) / "results";
  if (!fs::is_directory(results)) fail(organization, "has no results/ folder (expected a submission's <org> folder)");
  // benchmark -> the systems' calibrations, one-node first after sorting by node count
  std::map<std::string, std::vector<Calibration>> by_benchmark;
  std::vector<fs::path> folders;
  for (const auto& system : fs::directory_iterator(results))
    if (system.is_directory())
      for (const auto& benchmark : fs::directory_iterator(system.path()))
        if (benchmark.is_directory()) folders.push_back(benchmark.path());
  std::sort(folders.begin(), folders.end());
  for (const auto& folder : folders) {
    Calibration calibration = calibrate_from_logs(folder.string(), ruleset);
    by_benchmark[calibration.benchmark].push_back(std::move(calibration));
  }
  std::vector<BenchmarkValidation> validations;
  for (auto& [benchmark, systems] : by_benchmark) {
    std::stable_sort(systems.begin(), systems.end(),
                     [](const Calibration& a, const Calibration& b) { return a.nodes < b.nodes; });
    if (systems.size() < 2 || systems.front().nodes != 1) continue;
    BenchmarkValidation validation;
    validation.benchmark = benchmark;
    validation.calibration = systems.front();
    const review::RcpTable rcp = rcp_table_for(ruleset, benchmark);
    for (size_t i = 1; i < systems.size(); ++i) {
      const Calibration& target = systems[i];
      if (!target.published_minutes) continue;
      ScaleOut scale_out = template_scale_out;
      scale_out.nodes = target.nodes;
      scale_out.devices_per_node = target.devices_per_node;
      scale_out.per_device_batch = target.per_device_batch();
      scale_out.intra = target.intra;
      scale_out.inter = target.inter;
      scale_out.evaluation_scales = evaluation_scales_with_devices(benchmark);
      ValidationRow row;
      row.system = target.system;
      row.prediction = predict_time_to_train(validation.calibration, scale_out, &rcp);
      row.published_minutes = *target.published_minutes;
      validation.rows.push_back(std::move(row));
    }
    validations.push_back(std::move(validation));
  }
  if (validations.empty())
    fail(organization, "has no benchmark with both a one-node and a multi-node system to validate against");
  return validations;
}

std::string validation_markdown(const std::vector<BenchmarkValidation>& validations) {
  std::string out =
      "| benchmark | nodes | global batch | per-device batch | predicted min | published min | error | "
      "compute s | evaluation s | fixed s | converges at |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& validation : validations) {
    const Calibration& calibration = validation.calibration;
    out += "| " + validation.benchmark + " | 1 (calibration) | " + format("%.0f", calibration.global_batch) + " | " +
           format("%.2f", calibration.per_device_batch()) + " | | " +
           format("%.2f", calibration.published_minutes.value_or(0)) + " | | | | " +
           format("%.1f", calibration.fixed_seconds) + " | " + format("%.2f", calibration.units_to_converge.value_or(0)) +
           " |\n";
    for (const auto& row : validation.rows) {
      const Prediction& prediction = row.prediction;
      out += "| " + validation.benchmark + " | " + std::to_string(prediction.nodes) + " | " +
             format("%.0f", prediction.global_batch) + " | " + format("%.2f", prediction.per_device_batch) + " | " +
             format("%.2f", prediction.minutes) + " | " + format("%.2f", row.published_minutes) + " | " +
             format("%+.0f%%", 100 * row.error()) + " | " + format("%.1f", prediction.compute_seconds) + " | " +
             format("%.1f", prediction.evaluation_seconds) + " | " + format("%.1f", prediction.fixed_seconds) + " | " +
             format("%.2f", prediction.units) + " |\n";
    }
  }
  return out;
}

std::string validation_svg(const std::vector<BenchmarkValidation>& validations) {
  constexpr double kWidth = 640, kHeight = 360, kLeft = 64, kRight = 120, kTop = 16, kBottom = 44;
  double max_nodes = 1, min_minutes = INFINITY, max_minutes = 0;
  for (const auto& validation : validations) {
    if (validation.calibration.published_minutes) {
      min_minutes = std::min(min_minutes, *validation.calibration.published_minutes);
      max_minutes = std::max(max_minutes, *validation.calibration.published_minutes);
    }
    for (const auto& row : validation.rows) {
      max_nodes = std::max(max_nodes, static_cast<double>(row.prediction.nodes));
      for (const double minutes : {row.prediction.minutes, row.published_minutes}) {
        min_minutes = std::min(min_minutes, minutes);
        max_minutes = std::max(max_minutes, minutes);
      }
    }
  }
  if (!(max_minutes > 0)) min_minutes = 0.1, max_minutes = 1;
  // Decades on both axes.
  const double x_end = std::ceil(std::log10(max_nodes));
  const double y_begin = std::floor(std::log10(min_minutes)), y_end = std::ceil(std::log10(max_minutes));
  const auto to_x = [&](double nodes) { return kLeft + std::log10(nodes) / std::max(x_end, 1.0) * (kWidth - kLeft - kRight); };
  const auto to_y = [&](double minutes) {
    return kTop + (y_end - std::log10(minutes)) / std::max(y_end - y_begin, 1.0) * (kHeight - kTop - kBottom);
  };
  std::string svg = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 640 360\" role=\"img\" "
                    "aria-label=\"predicted and published minutes against nodes\">\n"
                    "<style>text{font:11px sans-serif;fill:#444}.grid{stroke:#e5e5e5;stroke-width:1}</style>\n";
  for (int decade = 0; decade <= x_end; ++decade) {
    const double x = to_x(std::pow(10.0, decade));
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", x) + "\" y1=\"" + format("%.1f", kTop) + "\" x2=\"" +
           format("%.1f", x) + "\" y2=\"" + format("%.1f", kHeight - kBottom) + "\"/>";
    svg += "<text x=\"" + format("%.1f", x) + "\" y=\"" + format("%.1f", kHeight - kBottom + 16) +
           "\" text-anchor=\"middle\">" + format("%.0f", std::pow(10.0, decade)) + "</text>\n";
  }
  for (int decade = static_cast<int>(y_begin); decade <= y_end; ++decade) {
    const double value = std::pow(10.0, decade), y = to_y(value);
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", kLeft) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
           format("%.1f", kWidth - kRight) + "\" y2=\"" + format("%.1f", y) + "\"/>";
    svg += "<text x=\"" + format("%.1f", kLeft - 6) + "\" y=\"" + format("%.1f", y + 4) + "\" text-anchor=\"end\">" +
           format(decade < 0 ? "%.1f" : "%.0f", value) + "</text>\n";
  }
  svg += "<text x=\"" + format("%.1f", (kLeft + kWidth - kRight) / 2) + "\" y=\"" + format("%.1f", kHeight - 6) +
         "\" text-anchor=\"middle\">nodes (8 devices each; log scale)</text>\n";
  svg += "<text x=\"14\" y=\"" + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         ")\">minutes (log scale)</text>\n";
  const auto& palette = review::chart_palette();
  for (size_t i = 0; i < validations.size(); ++i) {
    const auto& validation = validations[i];
    const std::string color = palette[i % palette.size()];
    const std::string start = validation.calibration.published_minutes
                                  ? format("%.1f", to_x(1)) + "," + format("%.1f", to_y(*validation.calibration.published_minutes))
                                  : "";
    std::string published = start, predicted = start;
    for (const auto& row : validation.rows) {
      const std::string x = format("%.1f", to_x(row.prediction.nodes));
      published += (published.empty() ? "" : " ") + x + "," + format("%.1f", to_y(row.published_minutes));
      predicted += (predicted.empty() ? "" : " ") + x + "," + format("%.1f", to_y(row.prediction.minutes));
    }
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + published + "\"><title>" +
           review::html_escape(validation.benchmark) + " published</title></polyline>\n";
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\" points=\"" +
           predicted + "\"><title>" + review::html_escape(validation.benchmark) + " predicted</title></polyline>\n";
    const double legend_y = kTop + 14 * i + 8;
    svg += "<line x1=\"" + format("%.1f", kWidth - kRight + 10) + "\" y1=\"" + format("%.1f", legend_y) + "\" x2=\"" +
           format("%.1f", kWidth - kRight + 30) + "\" y2=\"" + format("%.1f", legend_y) + "\" stroke=\"" + color +
           "\" stroke-width=\"1.5\"/><text x=\"" + format("%.1f", kWidth - kRight + 34) + "\" y=\"" +
           format("%.1f", legend_y + 4) + "\">" + review::html_escape(validation.benchmark) + "</text>\n";
  }
  const double key_y = kTop + 14 * validations.size() + 16;
  svg += "<text x=\"" + format("%.1f", kWidth - kRight + 10) + "\" y=\"" + format("%.1f", key_y) +
         "\">solid: published</text>\n<text x=\"" + format("%.1f", kWidth - kRight + 10) + "\" y=\"" +
         format("%.1f", key_y + 14) + "\">dashed: predicted</text>\n";
  return svg + "</svg>\n";
}

nlohmann::ordered_json to_json(const std::vector<BenchmarkValidation>& validations) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& validation : validations) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& row : validation.rows)
      rows.push_back({{"system", row.system},
                      {"published_minutes", row.published_minutes},
                      {"error", row.error()},
                      {"prediction", to_json(row.prediction)}});
    out.push_back({{"benchmark", validation.benchmark}, {"calibration", to_json(validation.calibration)}, {"rows", rows}});
  }
  return out;
}

}  // namespace trainbench::predict
