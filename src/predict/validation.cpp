#include "predict/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>

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

namespace {

// A Markdown table: the first column text, the others numbers (right-aligned); an empty cell stays empty.
std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string out = "|", rule = "|";
  for (size_t i = 0; i < header.size(); ++i) {
    out += " " + header[i] + " |";
    rule += i == 0 ? "---|" : "---:|";
  }
  out += "\n" + rule + "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const auto& cell : row) out += cell.empty() ? " |" : " " + cell + " |";
    out += "\n";
  }
  return out;
}

struct ChartPoint {
  double nodes = 1, predicted = 0, published = 0;
};
// One colour on the chart: a solid line through the published minutes, a dashed one through the predicted.
struct ChartSeries {
  std::string name;
  std::vector<ChartPoint> points;
};

struct ChartRange {
  double min_nodes = INFINITY, max_nodes = 1, min_minutes = INFINITY, max_minutes = 0;
  size_t longest_name = 0;
};

ChartRange chart_range(const std::vector<ChartSeries>& series) {
  ChartRange range;
  for (const auto& line : series) {
    range.longest_name = std::max(range.longest_name, line.name.size());
    for (const auto& point : line.points) {
      range.min_nodes = std::min(range.min_nodes, point.nodes);
      range.max_nodes = std::max(range.max_nodes, point.nodes);
      for (const double minutes : {point.predicted, point.published}) {
        range.min_minutes = std::min(range.min_minutes, minutes);
        range.max_minutes = std::max(range.max_minutes, minutes);
      }
    }
  }
  if (!(range.max_minutes > 0)) range.min_minutes = 0.1, range.max_minutes = 1;
  if (!(range.min_nodes <= range.max_nodes)) range.min_nodes = 1;
  return range;
}

// A series' line and name in the legend's column at `legend_x`.
std::string legend_entry(const std::string& name, const std::string& color, double legend_x, double legend_y) {
  return "<line x1=\"" + format("%.1f", legend_x) + "\" y1=\"" + format("%.1f", legend_y) + "\" x2=\"" +
         format("%.1f", legend_x + 20) + "\" y2=\"" + format("%.1f", legend_y) + "\" stroke=\"" + color +
         "\" stroke-width=\"1.5\"/><text x=\"" + format("%.1f", legend_x + 24) + "\" y=\"" +
         format("%.1f", legend_y + 4) + "\">" + name + "</text>\n";
}

// Minutes against nodes, both axes logarithmic in whole decades, drawn as the HTML report draws its charts; the
// legend's column widens for long names.
std::string scaling_svg(const std::vector<ChartSeries>& series) {
  const ChartRange range = chart_range(series);
  constexpr double kWidth = 640, kHeight = 360, kLeft = 64, kTop = 16, kBottom = 44;
  const double right = std::max(120.0, 40 + 6.5 * static_cast<double>(range.longest_name));
  const double x_begin = std::floor(std::log10(range.min_nodes)), x_end = std::ceil(std::log10(range.max_nodes));
  const double y_begin = std::floor(std::log10(range.min_minutes)), y_end = std::ceil(std::log10(range.max_minutes));
  const auto to_x = [&](double nodes) {
    return kLeft + (std::log10(nodes) - x_begin) / std::max(x_end - x_begin, 1.0) * (kWidth - kLeft - right);
  };
  const auto to_y = [&](double minutes) {
    return kTop + (y_end - std::log10(minutes)) / std::max(y_end - y_begin, 1.0) * (kHeight - kTop - kBottom);
  };
  std::string svg = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 640 360\" role=\"img\" "
                    "aria-label=\"predicted and published minutes against nodes\">\n"
                    "<style>text{font:11px sans-serif;fill:#444}.grid{stroke:#e5e5e5;stroke-width:1}</style>\n";
  for (int decade = static_cast<int>(x_begin); decade <= x_end; ++decade) {
    const double x = to_x(std::pow(10.0, decade));
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", x) + "\" y1=\"" + format("%.1f", kTop) + "\" x2=\"" +
           format("%.1f", x) + "\" y2=\"" + format("%.1f", kHeight - kBottom) + "\"/>";
    svg += "<text x=\"" + format("%.1f", x) + "\" y=\"" + format("%.1f", kHeight - kBottom + 16) +
           "\" text-anchor=\"middle\">" + format("%.0f", std::pow(10.0, decade)) + "</text>\n";
  }
  for (int decade = static_cast<int>(y_begin); decade <= y_end; ++decade) {
    const double value = std::pow(10.0, decade), y = to_y(value);
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", kLeft) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
           format("%.1f", kWidth - right) + "\" y2=\"" + format("%.1f", y) + "\"/>";
    svg += "<text x=\"" + format("%.1f", kLeft - 6) + "\" y=\"" + format("%.1f", y + 4) + "\" text-anchor=\"end\">" +
           format(decade < 0 ? "%.1f" : "%.0f", value) + "</text>\n";
  }
  svg += "<text x=\"" + format("%.1f", (kLeft + kWidth - right) / 2) + "\" y=\"" + format("%.1f", kHeight - 6) +
         "\" text-anchor=\"middle\">nodes (8 devices each; log scale)</text>\n";
  svg += "<text x=\"14\" y=\"" + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         ")\">minutes (log scale)</text>\n";
  const auto& palette = review::chart_palette();
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string color = palette[i % palette.size()], name = review::html_escape(series[i].name);
    std::string published, predicted;
    for (const auto& point : series[i].points) {
      const std::string x = format("%.1f", to_x(point.nodes));
      published += (published.empty() ? "" : " ") + x + "," + format("%.1f", to_y(point.published));
      predicted += (predicted.empty() ? "" : " ") + x + "," + format("%.1f", to_y(point.predicted));
    }
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + published +
           "\"><title>" + name + " published</title></polyline>\n";
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\" points=\"" +
           predicted + "\"><title>" + name + " predicted</title></polyline>\n";
    svg += legend_entry(name, color, kWidth - right + 10, kTop + 14 * i + 8);
  }
  const double key_y = kTop + 14 * series.size() + 16;
  svg += "<text x=\"" + format("%.1f", kWidth - right + 10) + "\" y=\"" + format("%.1f", key_y) +
         "\">solid: published</text>\n<text x=\"" + format("%.1f", kWidth - right + 10) + "\" y=\"" +
         format("%.1f", key_y + 14) + "\">dashed: predicted</text>\n";
  return svg + "</svg>\n";
}

}  // namespace

std::string validation_markdown(const std::vector<BenchmarkValidation>& validations) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& validation : validations) {
    const Calibration& calibration = validation.calibration;
    rows.push_back({validation.benchmark, "1 (calibration)", format("%.0f", calibration.global_batch),
                    format("%.2f", calibration.per_device_batch()), "",
                    format("%.2f", calibration.published_minutes.value_or(0)), "", "", "",
                    format("%.1f", calibration.fixed_seconds),
                    format("%.2f", calibration.units_to_converge.value_or(0))});
    for (const auto& row : validation.rows) {
      const Prediction& prediction = row.prediction;
      rows.push_back({validation.benchmark, std::to_string(prediction.nodes), format("%.0f", prediction.global_batch),
                      format("%.2f", prediction.per_device_batch), format("%.2f", prediction.minutes),
                      format("%.2f", row.published_minutes), format("%+.0f%%", 100 * row.error()),
                      format("%.1f", prediction.compute_seconds), format("%.1f", prediction.evaluation_seconds),
                      format("%.1f", prediction.fixed_seconds), format("%.2f", prediction.units)});
    }
  }
  return markdown_table({"benchmark", "nodes", "global batch", "per-device batch", "predicted min", "published min",
                         "error", "compute s", "evaluation s", "fixed s", "converges at"},
                        rows);
}

std::string validation_svg(const std::vector<BenchmarkValidation>& validations) {
  std::vector<ChartSeries> series;
  for (const auto& validation : validations) {
    ChartSeries line{validation.benchmark, {}};
    // Both lines start at the calibration's published score.
    if (const auto& minutes = validation.calibration.published_minutes) line.points.push_back({1, *minutes, *minutes});
    for (const auto& row : validation.rows)
      line.points.push_back({static_cast<double>(row.prediction.nodes), row.prediction.minutes, row.published_minutes});
    series.push_back(std::move(line));
  }
  return scaling_svg(series);
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

namespace {

// Every <org>/results/<system>/<benchmark>/ folder under `root` (an <org> folder itself, or a folder of them).
std::vector<fs::path> results_folders(const fs::path& root, const std::string& benchmark) {
  std::vector<fs::path> folders;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it.depth() >= 3) it.disable_recursion_pending();
    const fs::path& path = it->path();
    if (it->is_directory() && path.filename() == benchmark && path.parent_path().parent_path().filename() == "results")
      folders.push_back(path);
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

std::string organization_of(const fs::path& folder) {
  return folder.parent_path().parent_path().parent_path().filename().string();
}

LayoutValidationRow predict_folder(const fs::path& folder, Calibration published, const LayoutCheck& check,
                                   const DeviceCalibration& calibration, const review::RcpTable& rcp) {
  LayoutValidationRow row;
  row.organization = organization_of(folder);
  row.published = std::move(published);
  std::error_code ignored;
  row.calibration = fs::equivalent(folder, check.calibrate, ignored);
  Cluster cluster = check.cluster;
  cluster.nodes = row.published.nodes;
  cluster.devices_per_node = row.published.devices_per_node;
  cluster.intra = row.published.intra;
  cluster.inter = row.published.inter;
  ModelRun run = check.run;
  run.global_batch = row.published.global_batch;
  if (const auto problem = layout_problem(run, cluster, check.layout))
    fail("--layout", folder.string() + ": " + check.layout.describe() + " at " + std::to_string(cluster.devices()) +
                         " devices: " + problem->what);
  row.prediction = predict_three_d(calibration, run, cluster, check.layout, rcp);
  return row;
}

}  // namespace

LayoutValidation validate_layout(const std::string& root, const review::Ruleset& ruleset, const LayoutCheck& check) {
  const Calibration logs = calibrate_from_logs(check.calibrate, ruleset);
  LayoutValidation validation;
  validation.benchmark = logs.benchmark;
  validation.layout = check.layout;
  // As `predict` calibrates: on the logs' own system, its links as described.
  validation.calibration = calibrate_from_run(logs, check.run, check.calibration_layout, cluster_of(logs));
  const review::RcpTable rcp = rcp_table_for(ruleset, logs.benchmark);
  for (const auto& folder : results_folders(root, logs.benchmark)) {
    Calibration published = calibrate_from_logs(folder.string(), ruleset);
    // The calibration is one device's FLOP rate: another accelerator's results are not predicted from it.
    if (published.accelerator != logs.accelerator) {
      const std::string accelerator =
          published.accelerator.empty() ? "no accelerator_model_name described" : published.accelerator;
      validation.other_accelerators.push_back(organization_of(folder) + " `" +
                                              folder.parent_path().filename().string() + "` (" + accelerator + ")");
      continue;
    }
    if (published.published_minutes)
      validation.rows.push_back(predict_folder(folder, std::move(published), check, validation.calibration, rcp));
  }
  if (validation.rows.empty()) fail(root, "holds no scored <org>/results/<system>/" + logs.benchmark + "/ folder");
  std::stable_sort(validation.rows.begin(), validation.rows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.organization, a.published.nodes) < std::tie(b.organization, b.published.nodes);
  });
  return validation;
}

std::string layout_validation_markdown(const LayoutValidation& validation) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : validation.rows) {
    const ThreeDPrediction& prediction = row.prediction;
    rows.push_back({row.organization + " `" + row.published.system + "`" + (row.calibration ? " (calibration)" : ""),
                    std::to_string(row.published.nodes), format("%.0f", prediction.global_batch),
                    std::to_string(prediction.cost.micro_batches), format("%.3f", prediction.cost.step.seconds()),
                    format("%.0f", prediction.steps), format("%.2f", prediction.minutes),
                    format("%.3f", *row.published.published_minutes), format("%+.1f%%", 100 * row.error())});
  }
  std::string table = markdown_table({"results", "nodes", "global batch", "micro-batches", "step s (predicted)",
                                      "steps", "predicted min", "published min", "error"},
                                     rows);
  if (!validation.other_accelerators.empty()) {
    table += "\nNot predicted, another accelerator than the calibration's:";
    for (const auto& system : validation.other_accelerators) table += " " + system + ";";
    table.back() = '\n';
  }
  return table;
}

std::string layout_validation_svg(const LayoutValidation& validation) {
  std::vector<ChartSeries> series;
  for (const auto& row : validation.rows) {
    const std::string name = validation.benchmark + " " + row.organization;
    if (series.empty() || series.back().name != name) series.push_back({name, {}});
    series.back().points.push_back(
        {static_cast<double>(row.published.nodes), row.prediction.minutes, *row.published.published_minutes});
  }
  return scaling_svg(series);
}

nlohmann::ordered_json to_json(const LayoutValidation& validation) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : validation.rows)
    rows.push_back({{"organization", row.organization},
                    {"system", row.published.system},
                    {"source", row.published.source},
                    {"calibration", row.calibration},
                    {"published_minutes", *row.published.published_minutes},
                    {"error", row.error()},
                    {"prediction", to_json(row.prediction)}});
  return {{"benchmark", validation.benchmark},
          {"layout", validation.layout.describe()},
          {"calibration", to_json(validation.calibration)},
          {"rows", rows},
          {"other_accelerators", validation.other_accelerators}};
}

}  // namespace trainbench::predict
