#include "harness/workload.h"

#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace trainbench {

namespace {
// Fractional epochs (0.05 per block) are not exact in binary; boundaries snap to a 1e-9 grid so that
// 20 blocks make exactly one epoch and epoch_num logs as 1.1, not 1.1000000000000001.
double snap(double epochs) { return std::round(epochs * 1e9) / 1e9; }

std::string format_value(double value, const char* format = "%.4f") {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}
}  // namespace

const char* unit_name(ScheduleUnit unit) {
  switch (unit) {
    case ScheduleUnit::kEpochs: return "epoch";
    case ScheduleUnit::kSamples: return "samples";
    case ScheduleUnit::kTokens:
      return "tokens";
    case ScheduleUnit::kGenerations: return "generation";
  }
  return "epoch";
}

std::string describe_position(ScheduleUnit unit, double position) {
  char text[64];
  if (unit == ScheduleUnit::kSamples || unit == ScheduleUnit::kTokens)
    std::snprintf(text, sizeof text, "%.0f %s", position, unit_name(unit));
  else
    std::snprintf(text, sizeof text, "%s %g", unit_name(unit), position);
  return text;
}

double Block::last_epoch_num() const { return snap(first_epoch_num + epoch_count - (positional ? 0 : 1)); }

std::vector<Block> EvalSchedule::blocks() const {
  std::vector<Block> result;
  double next = 1;
  double length = first_block;
  while (length > 0 && next < snap(max_epochs + 1)) {  // blocks end by max_epochs
    const double count = snap(std::min(length, max_epochs - next + 1));
    result.push_back({next, count, positional});
    next = snap(next + count);
    length = interval;
  }
  return result;
}

Metric Metric::named(std::vector<Part> parts) {
  for (const Part& part : parts)
    if (part.name.empty()) fail("metric", "a named part needs a name");
  Metric metric;
  metric.parts_ = std::move(parts);
  return metric;
}

double Metric::part(const std::string& name) const {
  for (const Part& part : parts_)
    if (part.name == name) return part.value;
  fail("metric " + text(), "has no part '" + name + "'");
}

nlohmann::json Metric::to_json() const {
  if (is_scalar()) return parts_[0].value;
  nlohmann::json object = nlohmann::json::object();
  for (const Part& part : parts_) object[part.name] = part.value;
  return object;
}

std::string Metric::text() const {
  if (is_scalar()) return format_value(parts_[0].value);
  std::string text;
  for (const Part& part : parts_) text += (text.empty() ? "" : ", ") + part.name + " " + format_value(part.value);
  return text;
}

QualityTarget QualityTarget::from_config(const Config& config) {
  QualityTarget target;
  const nlohmann::json& values = config.values();
  if (!values.contains("target")) fail(config.name(), "missing setting 'target'");
  const nlohmann::json& threshold = values.at("target");
  if (threshold.is_number()) {
    target.threshold = threshold.get<double>();
  } else if (threshold.is_object() && !threshold.empty()) {
    std::vector<Metric::Part> parts;
    for (const auto& [name, value] : threshold.items()) {
      if (!value.is_number()) fail(config.name() + ": target." + name, "expected a number");
      parts.push_back({name, value.get<double>()});
    }
    target.threshold = Metric::named(std::move(parts));
  } else {
    fail(config.name() + ": target", "expected a number or an object of named thresholds, e.g. {\"BBOX\": 0.377}");
  }
  if (values.contains("target_direction")) {
    const std::string direction = config.string("target_direction");
    if (direction != "higher" && direction != "lower")
      fail(config.name() + ": target_direction", "expected \"higher\" or \"lower\", got \"" + direction + "\"");
    target.higher_is_better = direction == "higher";
  }
  if (values.contains("target_metric")) target.metric = config.string("target_metric");
  return target;
}

bool QualityTarget::reached(const Metric& value) const {
  if (threshold.is_scalar() != value.is_scalar())
    fail(metric + " " + value.text(), "does not have the target's form (" + text() + ")");
  for (const Metric::Part& part : threshold.parts()) {
    const double measured = value.part(part.name);
    if (!(higher_is_better ? measured >= part.value : measured <= part.value)) return false;  // NaN never reaches
  }
  return true;
}

std::string QualityTarget::text() const {
  const char* relation = higher_is_better ? " >= " : " <= ";
  if (threshold.is_scalar()) return metric + relation + format_value(threshold.parts()[0].value, "%g");
  std::string text = metric;
  bool first = true;
  for (const Metric::Part& part : threshold.parts()) {
    text += (first ? " " : " and ") + part.name + relation + format_value(part.value, "%g");
    first = false;
  }
  return text;
}

void Workload::save_weights(const std::string& path) const {
  fail("--save-model " + path, describe().benchmark + " cannot write its model as a state dict yet (docs/checkpoints.md)");
}

}  // namespace trainbench
