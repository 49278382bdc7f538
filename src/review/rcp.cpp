#include "review/rcp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::review {

namespace {

// Continued fraction of the incomplete beta function, evaluated with the modified Lentz method.
double incomplete_beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEpsilon = 1e-15;
  const auto guard = [](double value) { return std::fabs(value) < kTiny ? kTiny : value; };
  double c = 1.0;
  double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
  double result = d;
  for (int m = 1; m <= 500; ++m) {
    const double two_m = 2.0 * m;
    const double even = m * (b - m) * x / ((a - 1.0 + two_m) * (a + two_m));
    d = 1.0 / guard(1.0 + even * d);
    c = guard(1.0 + even / c);
    result *= d * c;
    const double odd = -(a + m) * (a + b + m) * x / ((a + two_m) * (a + 1.0 + two_m));
    d = 1.0 / guard(1.0 + odd * d);
    c = guard(1.0 + odd / c);
    const double step = d * c;
    result *= step;
    if (std::fabs(step - 1.0) < kEpsilon) break;
  }
  return result;
}

// Regularized incomplete beta function I_x(a, b).
double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  // The fraction converges fast only below the mean of the distribution; use the symmetry above it.
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * incomplete_beta_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * incomplete_beta_fraction(b, a, 1.0 - x) / b;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string format_batch(double batch_size) { return fixed(batch_size, batch_size == std::floor(batch_size) ? 0 : 2); }

}  // namespace

double student_t_cdf(double t, double dof) {
  if (std::isnan(t) || !(dof > 0)) return std::nan("");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * regularized_incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t));
  return t < 0 ? tail : 1.0 - tail;
}

OlympicStats olympic_stats(std::vector<double> values, int drop_each_side) {
  OlympicStats stats;
  if (static_cast<int>(values.size()) <= 2 * drop_each_side) return stats;
  std::sort(values.begin(), values.end());
  const auto first = values.begin() + drop_each_side;
  const auto last = values.end() - drop_each_side;
  stats.samples = static_cast<int>(last - first);
  stats.mean = std::accumulate(first, last, 0.0) / stats.samples;
  double squares = 0;
  for (auto it = first; it != last; ++it) squares += (*it - stats.mean) * (*it - stats.mean);
  stats.stdev = std::sqrt(squares / stats.samples);
  return stats;
}

double min_acceptable_mean(double mean, double stdev, int reference_samples, int submission_samples, double alpha,
                           double tolerance) {
  if (stdev == 0) return mean;
  const double scale = stdev * std::sqrt(1.0 / reference_samples + 1.0 / submission_samples);
  const double dof = reference_samples + submission_samples - 2.0;
  double low = 0, high = mean;
  double middle = (low + high) / 2;
  while (high - low > tolerance) {
    // One-sided p-value that the submission converges faster than the reference.
    const double p_value = student_t_cdf((middle - mean) / scale, dof);
    if (p_value > alpha)
      high = middle;
    else
      low = middle;
    middle = (low + high) / 2;
  }
  return middle;
}

RcpTable parse_rcp_table(const std::string& json_text, const std::string& origin, const RcpParameters& parameters) {
  using nlohmann::json;
  json root;
  check_json_nesting(json_text, origin);
  try {
    root = json::parse(json_text);
  } catch (const json::exception& error) {
    fail(origin, std::string("invalid JSON: ") + error.what());
  }
  if (!root.is_object()) fail(origin, "an RCP table must be a JSON object of records");
  RcpTable table;
  table.origin = origin;
  for (const auto& [name, record] : root.items()) {
    if (name == "note") continue;
    const std::string where = origin + ": " + name;
    if (!record.is_object()) fail(where, "must be an object");
    const auto benchmark = record.find("Benchmark");
    const auto batch = record.find("BS");
    // The language models' tables (4.0.0 on) count samples: "samples to converge".
    auto epochs = record.find("Epochs to converge");
    if (epochs == record.end()) epochs = record.find("samples to converge");
    if (benchmark == record.end() || !benchmark->is_string()) fail(where, "needs a string 'Benchmark'");
    if (batch == record.end() || !batch->is_number() || !(batch->get<double>() > 0))
      fail(where, "needs a positive 'BS'");
    if (epochs == record.end() || !epochs->is_array())
      fail(where, "needs a list 'Epochs to converge' (or 'samples to converge')");
    if (table.benchmark.empty())
      table.benchmark = benchmark->get<std::string>();
    else if (table.benchmark != benchmark->get<std::string>())
      fail(where, "mixes benchmarks in one table");
    RcpPoint point;
    point.name = name;
    point.batch_size = batch->get<double>();
    for (const auto& value : *epochs) {
      if (!value.is_number()) fail(where, "'Epochs to converge' must hold numbers");
      point.epochs.push_back(value.get<double>());
    }
    if (static_cast<int>(point.epochs.size()) <= 2 * parameters.drop_each_side)
      fail(where, "needs more than " + std::to_string(2 * parameters.drop_each_side) + " runs");
    const OlympicStats stats = olympic_stats(point.epochs, parameters.drop_each_side);
    point.mean = stats.mean;
    point.stdev = parameters.stdev_of_all_runs ? olympic_stats(point.epochs, 0).stdev : stats.stdev;
    point.min_epochs = min_acceptable_mean(stats.mean, point.stdev, stats.samples, parameters.submission_runs - 2,
                                           parameters.alpha, parameters.tolerance);
    for (const auto& other : table.points)
      if (other.batch_size == point.batch_size)
        fail(where, "batch size " + format_batch(point.batch_size) + " appears twice");
    table.points.push_back(std::move(point));
  }
  if (table.points.empty()) fail(origin, "holds no RCP records");
  std::sort(table.points.begin(), table.points.end(),
            [](const RcpPoint& a, const RcpPoint& b) { return a.batch_size < b.batch_size; });
  return table;
}

RcpPoint interpolate_rcp(double batch_size, const RcpPoint& low, const RcpPoint& high,
                         const RcpParameters& parameters) {
  const double weight = (batch_size - low.batch_size) / (high.batch_size - low.batch_size);
  RcpPoint point;
  point.name = "interpolated between " + low.name + " and " + high.name;
  point.batch_size = batch_size;
  point.mean = low.mean + weight * (high.mean - low.mean);
  point.stdev = low.stdev + weight * (high.stdev - low.stdev);
  point.min_epochs = min_acceptable_mean(point.mean, point.stdev, 2 * parameters.submission_runs,
                                         parameters.submission_runs - 2, parameters.alpha, parameters.tolerance);
  return point;
}

RcpTable prune_rcp_table(const RcpTable& table, const RcpParameters& parameters) {
  RcpTable pruned = table;
  auto& points = pruned.points;  // sorted by batch size
  if (points.empty()) return pruned;
  // Until 3.1.0 the checker prunes on the minimum acceptable mean, from 4.0.0 on the RCP mean.
  const auto key = [&](const RcpPoint& point) { return parameters.prune_on_mean ? point.mean : point.min_epochs; };
  // The first of equals, as Python's min() picks it.
  const auto fastest = std::min_element(points.begin(), points.end(),
                                        [&](const RcpPoint& a, const RcpPoint& b) { return key(a) < key(b); });
  points.erase(points.begin(), fastest);
  for (size_t i = 1; i + 1 < points.size();) {
    const RcpPoint between = interpolate_rcp(points[i].batch_size, points[i - 1], points[i + 1], parameters);
    if (key(points[i]) > key(between))
      points.erase(points.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  return pruned;
}

RcpVerdict check_rcp(const RcpTable& table, double batch_size, const std::vector<std::optional<double>>& convergence,
                     const RcpParameters& parameters, bool bypass, bool bypass_covers_missing) {
  RcpVerdict verdict;
  const int not_converged = static_cast<int>(std::count(convergence.begin(), convergence.end(), std::nullopt));
  if (not_converged > parameters.drop_each_side) {
    verdict.outcome = "Insufficient convergence";
    verdict.explanation = std::to_string(not_converged) + " runs did not converge; at most " +
                          std::to_string(parameters.drop_each_side) + " may";
    return verdict;
  }
  // A run that did not converge counts as infinitely slow (1e9), so the olympic drop removes it first.
  std::vector<double> values;
  for (const auto& value : convergence) values.push_back(value.value_or(1e9));
  const OlympicStats submission = olympic_stats(values, parameters.drop_each_side);
  if (submission.samples == 0) {
    verdict.outcome = "Too few runs";
    verdict.explanation = "the RCP check needs more than " + std::to_string(2 * parameters.drop_each_side) + " runs";
    return verdict;
  }
  verdict.submission_mean = submission.mean;

  const RcpPoint* exact = nullptr;
  const RcpPoint* below = nullptr;  // largest batch size under the submission's
  const RcpPoint* above = nullptr;  // smallest batch size over it
  for (const auto& point : table.points) {
    if (point.batch_size == batch_size)
      exact = &point;
    else if (point.batch_size < batch_size)
      below = &point;
    else if (!above)
      above = &point;
  }
  const auto compare = [&](const RcpPoint& reference) {
    verdict.reference = reference;
    // The checker compares with RCP mean / max speedup, i.e. mean / (mean / min): the same number up to the
    // last bit, which decides a mean that sits exactly on the minimum.
    const double minimum = reference.min_epochs - parameters.minimum_offset;
    verdict.passed = submission.mean >= reference.mean / (reference.mean / minimum);
    if (verdict.passed && submission.mean < reference.mean)
      verdict.normalization_factor = reference.mean / submission.mean;
    const std::string offset =
        parameters.minimum_offset != 0 ? " - " + fixed(parameters.minimum_offset, 0) + " (the ruleset's offset)" : "";
    verdict.explanation = "mean " + fixed(submission.mean, 4) + " " + (verdict.passed ? ">=" : "<") + " minimum " +
                          fixed(reference.min_epochs, 4) + offset + " (" + reference.name + ", BS " +
                          format_batch(reference.batch_size) + ": RCP mean " + fixed(reference.mean, 4) + ", stdev " +
                          fixed(reference.stdev, 4) + ", max speedup " + fixed(reference.max_speedup(), 4) + ")";
  };
  // --rcp-bypass covers a failed comparison with a found or interpolated RCP, and a missing RCP only where
  // the ruleset says so; never a table without RCPs.
  bool bypassable = false;
  const auto missing = [&] {
    verdict.outcome = "Missing RCP, please submit RCP with BS = " + format_batch(batch_size);
    bypassable = bypass_covers_missing;
  };
  if (table.points.empty()) {
    verdict.outcome = "Cannot find any RCPs";
    verdict.explanation = "the ruleset has no RCP table for this benchmark";
  } else if (exact) {
    verdict.outcome = "RCP found";
    bypassable = true;
    compare(*exact);
  } else if (below && above) {
    verdict.outcome = "RCP Interpolation";
    bypassable = true;
    compare(interpolate_rcp(batch_size, *below, *above, parameters));
  } else if (above) {
    // Below every RCP: passes when it converges no faster than the smallest batch size allows.
    compare(table.points.front());
    if (verdict.passed)
      verdict.outcome = "RCP not found but slower convergence on smaller batch size";
    else
      missing();
  } else {
    missing();
    verdict.explanation = "batch size " + format_batch(batch_size) + " is above every RCP (largest " +
                          format_batch(table.points.back().batch_size) + ")";
  }
  if (!verdict.passed && bypass && bypassable) {
    verdict.passed = true;
    verdict.bypassed = true;
    verdict.outcome += " passed using rcp_bypass";
  }
  return verdict;
}

}  // namespace trainbench::review
