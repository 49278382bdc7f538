#include "review/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "review/review_output.h"
#include "review/system_description.h"
#include "util/atomic_file.h"
#include "util/mllog_keys.h"

namespace trainbench::review {

namespace {

// The MLPerf results pages' column order; benchmarks outside it follow alphabetically.
const std::vector<std::string> kBenchmarkOrder = {"resnet", "ssd",  "maskrcnn", "rnnt",
                                                  "unet3d", "bert", "dlrm",     "minigo"};

// The common ten-colour category palette; runs past ten reuse it in order.
const std::vector<std::string> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                           "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

struct Row {
  size_t input = 0;  // index into the inputs
  std::string folder;
  std::string system;
  std::string hardware;
  std::map<std::string, const BenchmarkReview*> results;
};

struct Comparison {
  std::string benchmark;
  const BenchmarkReview* first = nullptr;
  const BenchmarkReview* second = nullptr;
  std::optional<double> speedup;  // first minutes / second minutes: > 1 means the second is faster
};

struct Series {
  std::string label;
  std::vector<CurvePoint> points;
};

std::string text(const std::string& value, size_t max_bytes = 200) { return html_escape(printable(value, max_bytes)); }

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string run_name(const RunReview& run) { return std::filesystem::path(run.path).stem().string(); }

std::vector<std::string> benchmark_order(const std::vector<Row>& rows) {
  std::vector<std::string> found;
  for (const auto& row : rows)
    for (const auto& [benchmark, review] : row.results)
      if (std::find(found.begin(), found.end(), benchmark) == found.end()) found.push_back(benchmark);
  const auto rank = [](const std::string& name) {
    const auto it = std::find(kBenchmarkOrder.begin(), kBenchmarkOrder.end(), name);
    return static_cast<size_t>(it - kBenchmarkOrder.begin());
  };
  std::sort(found.begin(), found.end(),
            [&](const std::string& a, const std::string& b) { return rank(a) != rank(b) ? rank(a) < rank(b) : a < b; });
  return found;
}

std::vector<Row> collect_rows(const std::vector<ReportInput>& inputs) {
  std::vector<Row> rows;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& system : inputs[i].review.systems) {
      Row row;
      row.input = i;
      row.folder = inputs[i].label;
      row.system = system.name;
      row.hardware = hardware_label(system.description);
      for (const auto& benchmark : system.benchmarks) row.results[benchmark.benchmark] = &benchmark;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<Comparison> compare(const std::vector<Row>& rows, const std::vector<std::string>& benchmarks) {
  std::vector<Comparison> pairs;
  for (const auto& benchmark : benchmarks) {
    std::vector<std::pair<const Row*, const BenchmarkReview*>> first, second;
    for (const auto& row : rows) {
      const auto found = row.results.find(benchmark);
      if (found == row.results.end()) continue;
      (row.input == 0 ? first : second).emplace_back(&row, found->second);
    }
    // One result on each side pairs directly (two software versions on one system); otherwise by system name.
    for (const auto& [row_a, review_a] : first) {
      for (const auto& [row_b, review_b] : second) {
        if (!(first.size() == 1 && second.size() == 1) && row_a->system != row_b->system) continue;
        Comparison pair{benchmark, review_a, review_b, std::nullopt};
        if (review_a->score.mean_minutes && review_b->score.mean_minutes && *review_b->score.mean_minutes > 0)
          pair.speedup = *review_a->score.mean_minutes / *review_b->score.mean_minutes;
        pairs.push_back(pair);
      }
    }
  }
  return pairs;
}

std::string score_cell(const BenchmarkReview* review) {
  if (!review) return "";
  std::string cell = review->score.mean_minutes ? format_minutes(*review->score.mean_minutes) : "no score";
  // A preset's minutes are not comparable with the benchmark's own: say which preset they come from.
  if (!review->runs.empty() && !review->runs.front().preset.empty()) cell += " (" + review->runs.front().preset + " preset)";
  return cell;
}

std::string csv_field(const std::string& value) {
  const std::string clean = printable(value, 400);
  if (clean.find_first_of(",\"\n") == std::string::npos) return clean;
  std::string quoted = "\"";
  for (const char c : clean) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string markdown_cell(const std::string& value) {
  std::string out;
  for (const char c : printable(value, 200)) {
    if (c == '|' || c == '\\' || c == '*' || c == '_' || c == '`' || c == '<' || c == '>' || c == '[' || c == ']')
      out += '\\';
    out += c;
  }
  return out;
}

// Round numbers for axis ticks: 1, 2 or 5 times a power of ten.
double tick_step(double range) {
  if (!(range > 0)) return 1;
  const double raw = range / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0})
    if (raw <= factor * magnitude) return factor * magnitude;
  return 10 * magnitude;
}

std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, std::fabs(value) < step * 1e-6 ? 0.0 : value);
  return buffer;
}

std::string render_chart(const std::string& benchmark, const std::vector<Series>& series, std::optional<double> target,
                         const std::string& metric) {
  constexpr double kWidth = 640, kHeight = 320, kLeft = 64, kRight = 16, kTop = 16, kBottom = 44;
  double max_x = 0, min_y = target.value_or(INFINITY), max_y = target.value_or(-INFINITY);
  for (const auto& line : series) {
    for (const auto& point : line.points) {
      max_x = std::max(max_x, point.minutes);
      min_y = std::min(min_y, point.value);
      max_y = std::max(max_y, point.value);
    }
  }
  if (!(max_x > 0)) max_x = 1;
  if (!std::isfinite(min_y)) min_y = 0, max_y = 1;
  if (max_y - min_y < 1e-9) min_y -= 0.5, max_y += 0.5;
  const double x_step = tick_step(max_x), y_step = tick_step(max_y - min_y);
  const double x_end = std::ceil(max_x / x_step) * x_step;
  const double y_begin = std::floor(min_y / y_step) * y_step, y_end = std::ceil(max_y / y_step) * y_step;
  const auto to_x = [&](double minutes) { return kLeft + minutes / x_end * (kWidth - kLeft - kRight); };
  const auto to_y = [&](double value) {
    return kTop + (y_end - value) / (y_end - y_begin) * (kHeight - kTop - kBottom);
  };

  std::string svg =
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 640 320\" role=\"img\" aria-label=\"" +
      text(benchmark) + " convergence\">\n";
  for (int i = 0; i * x_step <= x_end + 1e-9; ++i) {
    const double x = to_x(i * x_step);
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", x) + "\" y1=\"" + format("%.1f", kTop) + "\" x2=\"" +
           format("%.1f", x) + "\" y2=\"" + format("%.1f", kHeight - kBottom) + "\"/>";
    svg += "<text x=\"" + format("%.1f", x) + "\" y=\"" + format("%.1f", kHeight - kBottom + 16) +
           "\" text-anchor=\"middle\">" + tick_label(i * x_step, x_step) + "</text>\n";
  }
  for (int i = 0; y_begin + i * y_step <= y_end + y_step * 1e-6; ++i) {
    const double value = y_begin + i * y_step, y = to_y(value);
    svg += "<line class=\"grid\" x1=\"" + format("%.1f", kLeft) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
           format("%.1f", kWidth - kRight) + "\" y2=\"" + format("%.1f", y) + "\"/>";
    svg += "<text x=\"" + format("%.1f", kLeft - 6) + "\" y=\"" + format("%.1f", y + 4) + "\" text-anchor=\"end\">" +
           tick_label(value, y_step) + "</text>\n";
  }
  svg += "<text x=\"" + format("%.1f", (kLeft + kWidth - kRight) / 2) + "\" y=\"" + format("%.1f", kHeight - 6) +
         "\" text-anchor=\"middle\">minutes since run_start</text>\n";
  svg += "<text x=\"14\" y=\"" + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + format("%.1f", (kTop + kHeight - kBottom) / 2) +
         ")\">" + text(metric) + "</text>\n";
  if (target) {
    const double y = to_y(*target);
    svg += "<line class=\"target\" x1=\"" + format("%.1f", kLeft) + "\" y1=\"" + format("%.1f", y) + "\" x2=\"" +
           format("%.1f", kWidth - kRight) + "\" y2=\"" + format("%.1f", y) + "\"/>";
    svg += "<text class=\"target-label\" x=\"" + format("%.1f", kWidth - kRight - 4) + "\" y=\"" +
           format("%.1f", y - 4) + "\" text-anchor=\"end\">target " + tick_label(*target, y_step / 100) + "</text>\n";
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string color = kPalette[i % kPalette.size()];
    std::string points;
    for (const auto& point : series[i].points)
      points +=
          (points.empty() ? "" : " ") + format("%.1f", to_x(point.minutes)) + "," + format("%.1f", to_y(point.value));
    svg += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + points + "\"><title>" +
           text(series[i].label) + "</title></polyline>\n";
  }
  return svg + "</svg>\n";
}

// The time split's parts in the harness's order, each with its colour in the stacked bars; a part a later
// version logs takes the last colour.
const std::vector<std::pair<std::string, std::string>> kSplitColors = {{mllog_keys::kTrainingCompute, "#1f77b4"},
                                                                       {mllog_keys::kInputWait, "#ff7f0e"},
                                                                       {mllog_keys::kEvaluation, "#2ca02c"},
                                                                       {mllog_keys::kRankWait, "#d62728"},
                                                                       {mllog_keys::kOther, "#7f7f7f"}};

std::string split_color(const std::string& part) {
  for (const auto& [name, color] : kSplitColors)
    if (name == part) return color;
  return "#bcbd22";
}

std::string split_part_name(std::string part) {
  std::replace(part.begin(), part.end(), '_', ' ');
  return part;
}

// One run's timed region as a horizontal bar whose segments are its parts' shares; each segment's tooltip
// has its seconds, and a segment wide enough carries its percentage.
std::string render_split_bar(const std::vector<std::pair<std::string, double>>& parts, double wall) {
  constexpr double kWidth = 360, kHeight = 18, kLabelMinWidth = 34;
  std::string svg = "<svg class=\"split\" xmlns=\"http://www.w3.org/2000/svg\" width=\"360\" height=\"18\" "
                    "viewBox=\"0 0 360 18\" role=\"img\" aria-label=\"time split\">";
  double x = 0;
  for (const auto& [part, seconds] : parts) {
    const double width = wall > 0 ? seconds / wall * kWidth : 0;
    if (!(width > 0)) continue;
    const std::string share = format("%.1f%%", 100 * seconds / wall);
    svg += "<rect x=\"" + format("%.1f", x) + "\" y=\"0\" width=\"" + format("%.1f", width) + "\" height=\"" +
           format("%.0f", kHeight) + "\" fill=\"" + split_color(part) + "\"><title>" + text(split_part_name(part)) +
           format(" %.3f s", seconds) + " (" + share + ")</title></rect>";
    if (width >= kLabelMinWidth)
      svg += "<text x=\"" + format("%.1f", x + width / 2) + "\" y=\"13\" text-anchor=\"middle\">" +
             format("%.0f%%", 100 * seconds / wall) + "</text>";
    x += width;
  }
  return svg + "</svg>";
}

// What others took of a run's CPUs: the whole share and the CPUs ("6.1% of CPUs 0-1"), and its two parts
// ("other processes 6.0%, steal 0.1%").
std::pair<std::string, std::string> contention_text(const RunReview::CpuContention& contention) {
  const auto share = [&](double seconds) {
    return format("%.1f%%", contention.capacity > 0 ? 100 * seconds / contention.capacity : 0);
  };
  const bool one_cpu = contention.cpus.find_first_of(",-") == std::string::npos;
  return {format("%.1f%%", 100 * contention.share()) + " of " + (one_cpu ? "CPU " : "CPUs ") + contention.cpus,
          "other processes " + share(contention.other_processes) + ", steal " + share(contention.steal)};
}

const char* kStyle =
    R"(body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.invalid{color:#b00020}.valid{color:#1b7f3b}.muted{color:#666;font-size:.9em}
.chart{width:100%;max-width:640px;height:auto;font-size:11px}.chart text{fill:#444}
.chart .grid{stroke:#e5e5e5;stroke-width:1}.chart .target{stroke:#b00020;stroke-dasharray:6 4;stroke-width:1}
.chart .target-label{fill:#b00020}
ul.legend{list-style:none;padding:0;margin:0 0 1em 0;columns:2}ul.legend li{font-size:.9em}
.swatch{display:inline-block;width:1.2em;height:.35em;margin-right:.4em;vertical-align:middle}
.split{display:block;font-size:11px}.split text{fill:#fff}ul.split-legend{columns:auto;display:flex;gap:1.5em}
.split-legend .swatch{height:.9em}.split-parts{display:block;max-width:360px}.busy{color:#b00020;font-weight:bold}
)";

// What the page shows, worked out once from the inputs; the renderers below only format it, so the HTML,
// Markdown and CSV files cannot disagree.

// One benchmark a row has a result for; the page lists them row by row, benchmarks in column order.
struct Result {
  size_t row = 0;  // index into ReportModel::rows
  std::string benchmark;
  const BenchmarkReview* review = nullptr;
};

// A run that logged where its timed region went (trainbench_time_split).
struct SplitRun {
  size_t result = 0;  // index into ReportModel::results
  const RunReview* run = nullptr;
  double wall = 0;  // the parts' sum: its run_start to run_stop
};

// One convergence chart: a benchmark and trainbench preset (a preset has its own target, so its runs would be
// misread against the rules' target line), one line per run.
struct Chart {
  std::string title;
  std::vector<Series> series;
  std::optional<double> target;
  std::string metric = mllog_keys::kEvalAccuracy;
};

struct BenchmarkCharts {
  std::string benchmark;
  std::vector<Chart> charts;  // the rules' own target first, then presets by name; empty: no evaluations logged
};

struct ReportModel {
  std::string title;
  std::string ruleset_versions;  // each once, in input order
  std::vector<Row> rows;
  std::vector<std::string> benchmarks;
  std::vector<Result> results;
  bool comparing = false;
  std::string first_label, second_label;
  std::vector<Comparison> comparisons;
  std::vector<SplitRun> split_runs;
  std::vector<BenchmarkCharts> convergence;
};

const BenchmarkReview* result_of(const Row& row, const std::string& benchmark) {
  const auto found = row.results.find(benchmark);
  return found == row.results.end() ? nullptr : found->second;
}

std::string ruleset_versions(const std::vector<ReportInput>& inputs) {
  std::string versions;
  for (const auto& input : inputs)
    if (versions.find(input.review.ruleset_version) == std::string::npos)
      versions += (versions.empty() ? "" : ", ") + input.review.ruleset_version;
  return versions;
}

std::vector<Result> collect_results(const std::vector<Row>& rows, const std::vector<std::string>& benchmarks) {
  std::vector<Result> results;
  for (size_t i = 0; i < rows.size(); ++i)
    for (const auto& benchmark : benchmarks)
      if (const BenchmarkReview* review = result_of(rows[i], benchmark)) results.push_back({i, benchmark, review});
  return results;
}

std::vector<SplitRun> collect_split_runs(const std::vector<Result>& results) {
  std::vector<SplitRun> runs;
  for (size_t i = 0; i < results.size(); ++i) {
    for (const auto& run : results[i].review->runs) {
      if (run.time_split.empty()) continue;
      double wall = 0;
      for (const auto& part : run.time_split) wall += part.second;
      runs.push_back({i, &run, wall});
    }
  }
  return runs;
}

std::vector<BenchmarkCharts> collect_charts(const std::vector<Row>& rows, const std::vector<std::string>& benchmarks,
                                            bool name_folders) {
  std::vector<BenchmarkCharts> all;
  for (const auto& benchmark : benchmarks) {
    std::map<std::string, Chart> by_preset;  // "" (the rules' own target) sorts first
    for (const auto& row : rows) {
      const BenchmarkReview* review = result_of(row, benchmark);
      if (!review) continue;
      for (const auto& run : review->runs) {
        if (run.curve.empty()) continue;
        Chart& chart = by_preset[run.preset];
        std::string label = row.system + " / " + run_name(run);
        if (name_folders) label = row.folder + " / " + label;
        chart.series.push_back({label, run.curve});
        if (!chart.target && run.target_threshold) chart.target = run.target_threshold;
        if (!run.target_description.empty())
          chart.metric = run.target_description.substr(0, run.target_description.find(' '));
      }
    }
    BenchmarkCharts charts{benchmark, {}};
    for (auto& [preset, chart] : by_preset) {
      chart.title = preset.empty() ? benchmark : benchmark + " (" + preset + " preset)";
      charts.charts.push_back(std::move(chart));
    }
    all.push_back(std::move(charts));
  }
  return all;
}

ReportModel build_model(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  ReportModel model;
  model.title = options.title;
  model.ruleset_versions = ruleset_versions(inputs);
  model.rows = collect_rows(inputs);
  model.benchmarks = benchmark_order(model.rows);
  model.results = collect_results(model.rows, model.benchmarks);
  model.comparing = options.compare && inputs.size() == 2;
  if (model.comparing) {
    model.first_label = inputs[0].label;
    model.second_label = inputs[1].label;
    model.comparisons = compare(model.rows, model.benchmarks);
  }
  model.split_runs = collect_split_runs(model.results);
  model.convergence = collect_charts(model.rows, model.benchmarks, inputs.size() > 1);
  return model;
}

// The texts both renderers show, escaped by each for its format.

// " INVALID" (or " RCP FAILED") after an invalid result's minutes.
std::string invalid_marker(const BenchmarkReview& review) {
  return review.valid() ? "" : std::string(" ") + verdict_name(review.verdict());
}

std::string rcp_text(const BenchmarkReview& review) {
  return review.rcp ? (review.rcp->passed ? "pass" : "fail") + std::string(" (") + review.rcp->outcome + ")" : "";
}

std::string speedup_text(const Comparison& pair) { return pair.speedup ? format("%.3f", *pair.speedup) + "x" : ""; }

std::string split_amount(double seconds, double wall) {
  return format("%.3f s", seconds) + format(" (%.1f%%)", wall > 0 ? 100 * seconds / wall : 0);
}

std::pair<std::string, std::string> run_contention_text(const RunReview& run) {
  return run.cpu_contention ? contention_text(*run.cpu_contention) : std::pair<std::string, std::string>();
}

// A time-split run as both renderers show it: where it is from, its parts ("training compute", "12.000 s (45.0%)")
// and what others took of its CPUs; the renderers escape and lay it out.
struct SplitLine {
  const Row& row;
  const Result& result;
  const RunReview& run;
  std::vector<std::pair<std::string, std::string>> parts;
  std::pair<std::string, std::string> taken;  // the amount, and its parts
};

SplitLine split_line(const ReportModel& model, const SplitRun& split) {
  const Result& result = model.results[split.result];
  SplitLine line{model.rows[result.row], result, *split.run, {}, run_contention_text(*split.run)};
  for (const auto& [part, seconds] : line.run.time_split)
    line.parts.emplace_back(split_part_name(part), split_amount(seconds, split.wall));
  return line;
}

// "name amount, name amount", each name escaped by `escape`.
template <typename Escape>
std::string joined_parts(const SplitLine& line, Escape escape) {
  std::string joined;
  for (const auto& [name, amount] : line.parts) joined += (joined.empty() ? "" : ", ") + escape(name) + " " + amount;
  return joined;
}

// The HTML page.

std::string html_score_cell(const BenchmarkReview* review) {
  if (!review) return "<td></td>";
  const std::string cell = score_cell(review);
  if (review->valid()) return "<td class=\"num\">" + text(cell) + "</td>";
  std::string reasons;
  for (const auto& reason : review->invalid_reasons()) reasons += (reasons.empty() ? "" : "\n") + reason;
  return "<td class=\"num invalid\" title=\"" + text(reasons, 2000) + "\">" + text(cell) + invalid_marker(*review) +
         "</td>";
}

// Systems as rows, benchmarks as columns.
std::string html_results(const ReportModel& model) {
  std::string html = "<h2>Results</h2>\n<table>\n<tr><th>Folder</th><th>System</th><th>Accelerators</th>";
  for (const auto& benchmark : model.benchmarks) html += "<th>" + text(benchmark) + "</th>";
  html += "</tr>\n";
  for (const auto& row : model.rows) {
    html += "<tr><td>" + text(row.folder) + "</td><td>" + text(row.system) + "</td><td>" + text(row.hardware) + "</td>";
    for (const auto& benchmark : model.benchmarks) html += html_score_cell(result_of(row, benchmark));
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

// Validity, with the reasons for every invalid result.
std::string html_review(const ReportModel& model) {
  std::string html =
      "<h2>Review</h2>\n<table>\n<tr><th>Folder</th><th>System</th><th>Benchmark</th><th>Verdict</th><th>Runs</"
      "th><th>RCP</th><th>Reasons</th></tr>\n";
  for (const Result& result : model.results) {
    const Row& row = model.rows[result.row];
    const BenchmarkReview& review = *result.review;
    std::string reasons;
    for (const auto& reason : review.invalid_reasons()) reasons += (reasons.empty() ? "" : "<br>") + text(reason, 300);
    html += "<tr><td>" + text(row.folder) + "</td><td>" + text(row.system) + "</td><td>" + text(result.benchmark) +
            "</td><td class=\"" + (review.valid() ? "valid" : "invalid") + "\">" + verdict_name(review.verdict()) +
            "</td><td class=\"num\">" + std::to_string(review.runs.size()) + "</td><td>" + text(rcp_text(review)) +
            "</td><td>" + reasons + "</td></tr>\n";
  }
  return html + "</table>\n";
}

std::string html_comparison(const ReportModel& model) {
  if (!model.comparing) return "";
  std::string html =
      "<h2>Comparison</h2>\n<p>Speedup of <b>" + text(model.second_label) + "</b> over <b>" +
      text(model.first_label) +
      "</b> (minutes of the first divided by minutes of the second; above 1 means the second is faster).</p>\n"
      "<table>\n<tr><th>Benchmark</th><th>System (first)</th><th>Minutes (first)</th><th>System (second)</th>"
      "<th>Minutes (second)</th><th>Speedup</th></tr>\n";
  for (const auto& pair : model.comparisons)
    html += "<tr><td>" + text(pair.benchmark) + "</td><td>" + text(pair.first->system) + "</td><td class=\"num\">" +
            text(score_cell(pair.first)) + "</td><td>" + text(pair.second->system) + "</td><td class=\"num\">" +
            text(score_cell(pair.second)) + "</td><td class=\"num\">" + speedup_text(pair) + "</td></tr>\n";
  if (model.comparisons.empty()) html += "<tr><td colspan=\"6\">no benchmark appears in both folders</td></tr>\n";
  return html + "</table>\n";
}

// Where each trainbench run's timed region went, and what other processes took of its CPUs meanwhile (runs
// that logged trainbench_cpu_contention).
std::string html_time_split(const ReportModel& model) {
  if (model.split_runs.empty()) return "";
  std::string html = "<h2>Where the time went</h2>\n<ul class=\"legend split-legend\">\n";
  for (const auto& [part, color] : kSplitColors)
    html += "<li><span class=\"swatch\" style=\"background:" + color + "\"></span>" + split_part_name(part) + "</li>\n";
  html += "</ul>\n<table>\n<tr><th>Folder</th><th>System</th><th>Benchmark</th><th>Run</th><th>Seconds</th>"
          "<th>Timed region</th><th>CPU taken by others</th></tr>\n";
  for (const SplitRun& split : model.split_runs) {
    const SplitLine line = split_line(model, split);
    const std::string parts = joined_parts(line, [](const std::string& name) { return text(name); });
    const bool warned = line.run.cpu_contention && line.run.cpu_contention->warned();
    html += "<tr><td>" + text(line.row.folder) + "</td><td>" + text(line.row.system) + "</td><td>" +
            text(line.result.benchmark) + "</td><td>" + text(run_name(line.run)) + "</td><td class=\"num\">" +
            format("%.1f", split.wall) + "</td><td>" + render_split_bar(line.run.time_split, split.wall) +
            "<span class=\"muted split-parts\">" + parts + "</span></td><td><span" + (warned ? " class=\"busy\"" : "") +
            ">" + text(line.taken.first) + "</span><br><span class=\"muted\">" + text(line.taken.second) +
            "</span></td></tr>\n";
  }
  return html + "</table>\n";
}

std::string html_chart(const Chart& chart) {
  std::string html = "<h3>" + text(chart.title) + "</h3>\n" +
                     render_chart(chart.title, chart.series, chart.target, chart.metric) + "<ul class=\"legend\">\n";
  for (size_t i = 0; i < chart.series.size(); ++i)
    html += "<li><span class=\"swatch\" style=\"background:" + kPalette[i % kPalette.size()] + "\"></span>" +
            text(chart.series[i].label) + "</li>\n";
  return html + "</ul>\n";
}

std::string html_convergence(const ReportModel& model) {
  std::string html = "<h2>Convergence</h2>\n";
  for (const BenchmarkCharts& benchmark : model.convergence) {
    if (benchmark.charts.empty())
      html += "<h3>" + text(benchmark.benchmark) + "</h3>\n<p class=\"muted\">no evaluations logged</p>\n";
    for (const Chart& chart : benchmark.charts) html += html_chart(chart);
  }
  return html;
}

std::string render_html(const ReportModel& model) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + text(model.title) +
         "</title>\n<style>\n" + kStyle + "</style>\n</head>\n<body>\n<h1>" + text(model.title) + "</h1>\n" +
         "<p class=\"muted\">Olympic mean of run_start to run_stop in minutes; reviewed with trainbench ruleset " +
         text(model.ruleset_versions) + ". Results marked INVALID failed the review.</p>\n" + html_results(model) +
         html_review(model) + html_comparison(model) + html_time_split(model) + html_convergence(model) +
         "</body>\n</html>\n";
}

// The Markdown page: the same tables, without the charts.

std::string markdown_results(const ReportModel& model) {
  std::string md = "## Results\n\n| Folder | System | Accelerators |";
  for (const auto& benchmark : model.benchmarks) md += " " + markdown_cell(benchmark) + " |";
  md += "\n|---|---|---|";
  for (size_t i = 0; i < model.benchmarks.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto& row : model.rows) {
    md += "| " + markdown_cell(row.folder) + " | " + markdown_cell(row.system) + " | " + markdown_cell(row.hardware) +
          " |";
    for (const auto& benchmark : model.benchmarks) {
      const BenchmarkReview* review = result_of(row, benchmark);
      md += review ? " " + markdown_cell(score_cell(review)) + invalid_marker(*review) + " |" : " |";
    }
    md += "\n";
  }
  return md + "\n";
}

std::string markdown_review(const ReportModel& model) {
  std::string md =
      "## Review\n\n| Folder | System | Benchmark | Verdict | Runs | RCP | Reasons |\n|---|---|---|---|---:|---|---|\n";
  for (const Result& result : model.results) {
    const Row& row = model.rows[result.row];
    const BenchmarkReview& review = *result.review;
    std::string reasons;
    for (const auto& reason : review.invalid_reasons())
      reasons += (reasons.empty() ? "" : "; ") + markdown_cell(reason);
    md += "| " + markdown_cell(row.folder) + " | " + markdown_cell(row.system) + " | " +
          markdown_cell(result.benchmark) + " | " + verdict_name(review.verdict()) + " | " +
          std::to_string(review.runs.size()) + " | " + markdown_cell(rcp_text(review)) + " | " + reasons + " |\n";
  }
  return md + "\n";
}

std::string markdown_comparison(const ReportModel& model) {
  if (!model.comparing) return "";
  std::string md = "## Comparison\n\nSpeedup of " + markdown_cell(model.second_label) + " over " +
                   markdown_cell(model.first_label) +
                   " (minutes of the first divided by minutes of the second; above 1 means the second is faster).\n\n"
                   "| Benchmark | System (first) | Minutes (first) | System (second) | Minutes (second) | Speedup "
                   "|\n|---|---|---:|---|---:|---:|\n";
  for (const auto& pair : model.comparisons)
    md += "| " + markdown_cell(pair.benchmark) + " | " + markdown_cell(pair.first->system) + " | " +
          score_cell(pair.first) + " | " + markdown_cell(pair.second->system) + " | " + score_cell(pair.second) +
          " | " + speedup_text(pair) + " |\n";
  if (model.comparisons.empty()) md += "| no benchmark appears in both folders | | | | | |\n";
  return md + "\n";
}

std::string markdown_time_split(const ReportModel& model) {
  if (model.split_runs.empty()) return "";
  std::string md = "## Where the time went\n\n| Folder | System | Benchmark | Run | Seconds | Timed region | CPU taken "
                   "by others |\n|---|---|---|---|---:|---|---|\n";
  for (const SplitRun& split : model.split_runs) {
    const SplitLine line = split_line(model, split);
    const auto& [taken, taken_parts] = line.taken;
    md += "| " + markdown_cell(line.row.folder) + " | " + markdown_cell(line.row.system) + " | " +
          markdown_cell(line.result.benchmark) + " | " + markdown_cell(run_name(line.run)) + " | " +
          format("%.1f", split.wall) + " | " + joined_parts(line, markdown_cell) + " | " +
          markdown_cell(taken.empty() ? "" : taken + " (" + taken_parts + ")") + " |\n";
  }
  return md + "\n";
}

std::string render_markdown(const ReportModel& model) {
  return "# " + markdown_cell(model.title) + "\n\n" +
         "Olympic mean of run_start to run_stop in minutes; reviewed with trainbench ruleset " +
         markdown_cell(model.ruleset_versions) + ". Results marked INVALID failed the review.\n\n" +
         markdown_results(model) + markdown_review(model) + markdown_comparison(model) + markdown_time_split(model);
}

// The CSV files: one row per result, and per compared pair.

std::string results_csv(const ReportModel& model) {
  std::string csv = "folder,system,hardware,benchmark,valid,minutes,runs,non_converged,rcp\n";
  for (const Result& result : model.results) {
    const Row& row = model.rows[result.row];
    const BenchmarkReview& review = *result.review;
    const RcpVerdict* rcp = review.rcp ? &*review.rcp : nullptr;
    csv += csv_field(row.folder) + "," + csv_field(row.system) + "," + csv_field(row.hardware) + "," +
           csv_field(result.benchmark) + "," + (review.valid() ? "true" : "false") + "," +
           (review.score.mean_minutes ? format_minutes(*review.score.mean_minutes) : "") + "," +
           std::to_string(review.runs.size()) + "," + std::to_string(review.score.non_converged) + "," +
           csv_field(rcp ? (rcp->passed ? "pass: " : "fail: ") + rcp->outcome : "") + "\n";
  }
  return csv;
}

std::string comparison_csv(const ReportModel& model) {
  if (!model.comparing) return "";
  std::string csv = "benchmark,system_first,minutes_first,system_second,minutes_second,speedup\n";
  for (const auto& pair : model.comparisons)
    csv += csv_field(pair.benchmark) + "," + csv_field(pair.first->system) + "," + score_cell(pair.first) + "," +
           csv_field(pair.second->system) + "," + score_cell(pair.second) + "," +
           (pair.speedup ? format("%.3f", *pair.speedup) : "") + "\n";
  return csv;
}

}  // namespace

const std::vector<std::string>& chart_palette() { return kPalette; }

std::string html_escape(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

ReportFiles render_report(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  const ReportModel model = build_model(inputs, options);
  return {render_html(model), render_markdown(model), results_csv(model), comparison_csv(model)};
}

// Every file or none: each is opened (a directory or device at its name is refused there) and written in full
// before the first is moved into place; files not committed remove themselves.
std::vector<std::string> write_report(const ReportFiles& files, const std::string& folder) {
  std::vector<std::pair<std::string, const std::string*>> contents = {
      {"report.html", &files.html}, {"report.md", &files.markdown}, {"report.csv", &files.csv}};
  if (!files.comparison_csv.empty()) contents.emplace_back("comparison.csv", &files.comparison_csv);
  std::vector<std::unique_ptr<AtomicFile>> outputs;
  for (const auto& [name, content] : contents) {
    outputs.push_back(std::make_unique<AtomicFile>((std::filesystem::path(folder) / name).string()));
    outputs.back()->write(*content);
  }
  std::vector<std::string> written;
  for (const auto& output : outputs) {
    output->commit();
    written.push_back(output->path());
  }
  return written;
}

}  // namespace trainbench::review
