#include "review/compliance.h"

#include "review/checker_configs.h"
#include "util/mllog_keys.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>

namespace trainbench::review {

namespace {

using nlohmann::json;

std::string key_name(const std::string& key) { return "'" + printable(key, 80) + "'"; }

std::string minutes_text(double ms) { return format_number(std::round(ms / 600.0) / 100.0) + " minutes"; }

// Python's round(value, decimals), which the rcp_checker applies to epoch_num: the exact binary value rounded
// to the nearest decimal, ties to even. printf rounds the exact value the same way.
double round_like_python(double value, int decimals) {
  char text[512];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return std::strtod(text, nullptr);
}

// A number, or the one number in a one-element list (Graphcore logs train_samples as [3872218]; the
// rcp_checker's numpy mean reads it as that number).
std::optional<double> single_number(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_array() && value.size() == 1 && value[0].is_number()) return value[0].get<double>();
  return std::nullopt;
}

// Events of the log indexed by key, in file order.
class EventIndex {
 public:
  explicit EventIndex(const std::vector<LogEvent>& events) : events_(events) {
    for (size_t i = 0; i < events.size(); ++i) by_key_[events[i].key].push_back(i);
  }

  const std::vector<size_t>& positions(const std::string& key) const {
    static const std::vector<size_t> none;
    const auto found = by_key_.find(key);
    return found == by_key_.end() ? none : found->second;
  }

  const LogEvent* first(const std::string& key) const {
    const auto& found = positions(key);
    return found.empty() ? nullptr : &events_[found.front()];
  }

  std::optional<size_t> first_position(const std::string& key) const {
    const auto& found = positions(key);
    return found.empty() ? std::nullopt : std::optional<size_t>(found.front());
  }

  std::string first_string(const std::string& key) const {
    const LogEvent* event = first(key);
    return event && event->value.is_string() ? event->value.get<std::string>() : "";
  }

  const LogEvent& at(size_t position) const { return events_[position]; }

 private:
  const std::vector<LogEvent>& events_;
  std::map<std::string, std::vector<size_t>> by_key_;
};

class LogChecker {
 public:
  LogChecker(const ParsedLog& log, const Ruleset& ruleset, const LogCheckOptions& options, RunReview& review)
      : log_(log), ruleset_(ruleset), options_(options), review_(review), index_(log.events) {}

  void run() {
    if (!ruleset_.checked_natively(index_.first_string(mllog_keys::kSubmissionBenchmark))) {
      run_round_checker();
      extract_results();
      return;
    }
    resolve_configs();
    for (const auto& [key, rule] : rules_) check_key(rule);
    apply_preset_target();
    check_target();
    check_clock();
    // A preset trains its own model, so the reference model's tensor list does not apply to it.
    if (tensors_ && review_.preset.empty()) check_tensors(*tensors_);
    extract_results();
  }

 private:
  void add(Severity severity, int line, const std::string& message) {
    review_.findings.push_back({severity, log_.path, line, message});
  }

  // The round's official rule files, run as its compliance checker runs them.
  void run_round_checker() {
    const CheckerRound& round = load_checker_round(ruleset_.version, ruleset_.rules_dir);
    CheckerVerdict verdict = run_checker(round, log_);
    review_.findings.insert(review_.findings.end(), verdict.findings.begin(), verdict.findings.end());
    review_.configs = std::move(verdict.configs);
    review_.target_reached = verdict.target_reached;
    review_.target_description = std::move(verdict.target_description);
    read_run_stop_status();
  }

  // Applies the entry configs and every config a logged value pulls in, merging key rules by key.
  void resolve_configs() {
    std::deque<std::string> queue(ruleset_.entry_configs.begin(), ruleset_.entry_configs.end());
    std::set<std::string> applied;
    while (!queue.empty()) {
      const std::string name = queue.front();
      queue.pop_front();
      if (!applied.insert(name).second) continue;
      const RuleConfig& config = ruleset_.configs.at(name);
      review_.configs.push_back(name);
      for (const KeyRule& rule : config.keys) rules_[rule.key] = rule;
      if (config.target) target_ = config.target;
      if (config.tensors) tensors_ = config.tensors;
      for (const KeyRule& rule : config.keys) {
        if (rule.enqueue.empty()) continue;
        const LogEvent* event = index_.first(rule.key);
        if (!event || !event->value.is_string()) continue;
        if (rule.value && check_value(*rule.value, event->value)) continue;  // reported by check_key
        std::string next = rule.enqueue;
        const size_t at = next.find("{value}");
        if (at != std::string::npos) next.replace(at, 7, event->value.get<std::string>());
        if (ruleset_.configs.count(next))
          queue.push_back(next);
        else
          add(Severity::kError, event->line, "ruleset " + ruleset_.version + " has no rules named " + key_name(next));
      }
    }
  }

  void check_key(const KeyRule& rule) {
    const auto& positions = index_.positions(rule.key);
    const std::string origin = " (rule " + rule.config + ")";
    const std::string name = key_name(rule.key);
    switch (rule.requirement) {
      case Requirement::kExactlyOne:
      case Requirement::kAtLeastOne:
        if (positions.empty())
          add(Severity::kError, 0,
              name + " is required " +
                  (rule.requirement == Requirement::kExactlyOne ? "exactly once" : "at least once") +
                  " but is not logged" + origin);
        break;
      case Requirement::kAtLeastOneOr:
        if (positions.empty() && index_.positions(rule.alternative_key).empty())
          add(Severity::kError, 0,
              "neither " + name + " nor " + key_name(rule.alternative_key) + " is logged" + origin);
        break;
      case Requirement::kNone:
        break;
    }
    if (rule.requirement == Requirement::kExactlyOne && positions.size() > 1) check_repeats(rule, positions, origin);
    for (const size_t position : positions) check_event(rule, position, origin);
  }

  // The v1.1 checker warns when an EXACTLY_ONE key repeats with the same value and fails when it differs.
  void check_repeats(const KeyRule& rule, const std::vector<size_t>& positions, const std::string& origin) {
    const LogEvent& first = index_.at(positions.front());
    for (size_t i = 1; i < positions.size(); ++i) {
      const LogEvent& other = index_.at(positions[i]);
      if (!same_value(first.value, other.value)) {
        add(Severity::kError, other.line,
            key_name(rule.key) + " must be logged exactly once; line " + std::to_string(first.line) + " has " +
                describe(first.value) + ", this line has " + describe(other.value) + origin);
        return;
      }
    }
    add(Severity::kWarning, index_.at(positions[1]).line,
        key_name(rule.key) + " is logged " + std::to_string(positions.size()) +
            " times with the same value (first on line " + std::to_string(first.line) + "); the rules expect it once" +
            origin);
  }

  void check_event(const KeyRule& rule, size_t position, const std::string& origin) {
    const LogEvent& event = index_.at(position);
    const std::string name = key_name(rule.key);
    if (rule.value && !(rule.preset_scaled && scaled_preset_run()) && !preset_own_dataset_key(rule.key))
      if (auto problem = check_value(*rule.value, event.value))
        add(Severity::kError, event.line, name + ": " + *problem + origin);
    for (const auto& [field, check] : rule.metadata) {
      const auto found = event.metadata.find(field);
      if (found == event.metadata.end()) {
        add(Severity::kError, event.line, name + " has no metadata " + key_name(field) + origin);
      } else if (auto problem = check_value(check, *found)) {
        add(Severity::kError, event.line, name + " metadata " + key_name(field) + ": " + *problem + origin);
      }
    }
    for (const auto& earlier : rule.after) {
      const auto first = index_.first_position(earlier);
      if (!first || *first > position)
        add(Severity::kError, event.line, name + " is logged before any " + key_name(earlier) + origin);
    }
    for (const auto& later : rule.not_after) {
      const auto first = index_.first_position(later);
      if (first && *first < position)
        add(Severity::kError, event.line,
            name + " is logged after " + key_name(later) + " (line " + std::to_string(index_.at(*first).line) + ")" +
                origin);
    }
    if (!rule.within_ms_of_first_key.empty()) {
      if (const LogEvent* first = index_.first(rule.within_ms_of_first_key)) {
        const double elapsed = event.time_ms - first->time_ms;
        if (!(elapsed < rule.within_ms))
          add(Severity::kError, event.line,
              name + " is " + minutes_text(elapsed) + " after the first " + key_name(rule.within_ms_of_first_key) +
                  "; the limit is " + format_number(rule.within_ms / 60000.0) + " minutes" + origin);
        else if (rule.rules_text)
          check_rules_text(*rule.rules_text, event, name, rule.within_ms);
      }
    }
  }

  // Only reached when the checker's own limit holds, so the text's stricter limit is the only question.
  void check_rules_text(const RulesTextLimit& text, const LogEvent& event, const std::string& name,
                        double checker_ms) {
    const LogEvent* first = index_.first(text.within_ms_of_first_key);
    if (!first) return;
    const double elapsed = event.time_ms - first->time_ms;
    if (elapsed < text.within_ms) return;
    add(options_.strict ? Severity::kError : Severity::kWarning, event.line,
        name + " is " + minutes_text(elapsed) + " after the first " + key_name(text.within_ms_of_first_key) +
            ": the rules text says \"" + text.quote + "\" (" + text.source +
            "), the v1.1 compliance checker allows " + format_number(checker_ms / 60000.0) + " minutes" +
            (options_.strict ? " (--strict)" : "; an error with --strict"));
  }

  // A log of a trainbench preset other than the rules' configuration (e.g. "mini").
  bool scaled_preset_run() const {
    const PresetRule& preset = ruleset_.preset;
    if (preset.key.empty()) return false;
    const LogEvent* event = index_.first(preset.key);
    if (!event || !event->value.is_string()) return false;
    const auto& reference = preset.reference_values;
    return std::find(reference.begin(), reference.end(), event->value.get<std::string>()) == reference.end();
  }

  // A key whose fixed value is the rules' dataset size, in the log of a preset that trains on its own dataset.
  bool preset_own_dataset_key(const std::string& key) const {
    const auto& keys = ruleset_.preset.own_dataset_keys;
    return std::find(keys.begin(), keys.end(), key) != keys.end() && scaled_preset_run();
  }

  // A trainbench preset (e.g. "mini") trains to its own, lower target and logs it; the run is held to that.
  void apply_preset_target() {
    const PresetRule& preset = ruleset_.preset;
    if (preset.key.empty() || !target_) return;
    const LogEvent* event = index_.first(preset.key);
    if (!event) return;
    if (!event->value.is_string()) {
      add(Severity::kError, event->line, key_name(preset.key) + " must be a string, not " + describe(event->value));
      return;
    }
    const std::string name = event->value.get<std::string>();
    const auto& reference = preset.reference_values;
    if (std::find(reference.begin(), reference.end(), name) != reference.end()) return;
    review_.preset = name;
    const LogEvent* target_event = index_.first(preset.target_key);
    const std::string before = target_text(*target_);
    if (target_event && target_->threshold && target_event->value.is_number()) {
      target_->threshold = target_event->value.get<double>();
    } else if (target_event && !target_->field_thresholds.empty() && target_event->value.is_object()) {
      for (auto& [field, threshold] : target_->field_thresholds) {
        const auto found = target_event->value.find(field);
        if (found == target_event->value.end() || !found->is_number()) {
          add(Severity::kError, target_event->line,
              key_name(preset.target_key) + " has no number for " + key_name(field));
          return;
        }
        threshold = found->get<double>();
      }
    } else {
      add(Severity::kError, target_event ? target_event->line : event->line,
          "preset " + key_name(name) + " needs a numeric " + key_name(preset.target_key) + " line with its target");
      return;
    }
    add(Severity::kNote, event->line,
        printable(name, 40) + " preset: target " + target_text(*target_) + " (reference target " + before +
            " not applicable)");
  }

  static std::string target_text(const TargetRule& target) {
    const std::string relation = target.higher_is_better ? " >= " : " <= ";
    std::string text;
    if (target.threshold) {
      text = target.key + relation + format_number(*target.threshold);
    } else {
      for (const auto& [field, threshold] : target.field_thresholds)
        text += (text.empty() ? "" : " and ") + target.key + "." + field + relation + format_number(threshold);
    }
    if (target.bound)
      text += std::string(" and ") + (target.higher_is_better ? "< " : "> ") + format_number(*target.bound);
    return text;
  }

  bool meets(const TargetRule& target, double value, double threshold) const {
    if (std::isnan(value)) return false;
    const bool reaches = target.higher_is_better ? value >= threshold : value <= threshold;
    const bool inside = !target.bound || (target.higher_is_better ? value < *target.bound : value > *target.bound);
    return reaches && inside;
  }

  bool reaches_target(const TargetRule& target, const json& value) const {
    if (target.threshold) {
      const auto number = value.is_boolean() ? std::nullopt : number_of(value);
      return number && meets(target, *number, *target.threshold);
    }
    if (!value.is_object()) return false;
    for (const auto& [field, threshold] : target.field_thresholds) {
      const auto found = value.find(field);
      if (found == value.end() || !found->is_number() || !meets(target, found->get<double>(), threshold)) return false;
    }
    return true;
  }

  // How far a metric line is short of the target: the largest shortfall of its parts, in the metric's units
  // (negative once every part is past its threshold). Empty when a part is missing or not a finite number.
  std::optional<double> shortfall(const TargetRule& target, const json& value) const {
    const auto short_of = [&](const json& part, double threshold) -> std::optional<double> {
      const auto number = part.is_boolean() ? std::nullopt : number_of(part);
      if (!number || !std::isfinite(*number)) return std::nullopt;
      return target.higher_is_better ? threshold - *number : *number - threshold;
    };
    if (target.threshold) return short_of(value, *target.threshold);
    if (!value.is_object() || target.field_thresholds.empty()) return std::nullopt;
    std::optional<double> worst;
    for (const auto& [field, threshold] : target.field_thresholds) {
      const auto found = value.find(field);
      const auto part = found == value.end() ? std::nullopt : short_of(*found, threshold);
      if (!part) return std::nullopt;
      worst = std::max(worst.value_or(*part), *part);
    }
    return worst;
  }

  std::optional<BestEvaluation> best_evaluation(const TargetRule& target) const {
    const LogEvent* best = nullptr;
    std::optional<double> best_shortfall;
    for (const size_t position : index_.positions(target.key)) {
      const auto distance = shortfall(target, index_.at(position).value);
      if (distance && (!best_shortfall || *distance < *best_shortfall)) {
        best = &index_.at(position);
        best_shortfall = distance;
      }
    }
    if (!best) return std::nullopt;
    BestEvaluation evaluation;
    evaluation.line = best->line;
    if (target.threshold) {
      evaluation.value = format_number(*number_of(best->value));
    } else {
      for (const auto& [field, threshold] : target.field_thresholds)
        evaluation.value += (evaluation.value.empty() ? "" : ", ") + printable(field, 40) + " " +
                            format_number(*number_of(best->value.at(field)));
    }
    const auto epoch = best->metadata.find(mllog_keys::kEpochNum);
    if (epoch != best->metadata.end() && epoch->is_number()) evaluation.epoch_num = epoch->get<double>();
    return evaluation;
  }

  void read_run_stop_status() {
    const LogEvent* run_stop = index_.first(mllog_keys::kRunStop);
    if (!run_stop) return;
    const auto status = run_stop->metadata.find(mllog_keys::kStatus);
    if (status != run_stop->metadata.end() && status->is_string()) review_.run_stop_status = status->get<std::string>();
  }

  void check_target() {
    read_run_stop_status();
    const LogEvent* run_stop = index_.first(mllog_keys::kRunStop);
    if (!target_) return;
    review_.target_description = target_text(*target_);
    review_.target_threshold = target_->threshold;
    if (!target_->threshold && !target_->field_thresholds.empty())  // the part the curve plots (Mask R-CNN: BBOX)
      review_.target_threshold = target_->field_thresholds.begin()->second;
    review_.higher_is_better = target_->higher_is_better;
    const LogEvent* reached_at = nullptr;
    for (const size_t position : index_.positions(target_->key)) {
      if (reaches_target(*target_, index_.at(position).value)) {
        reached_at = &index_.at(position);
        break;
      }
    }
    review_.target_reached = reached_at != nullptr;
    reached_at_ = reached_at;
    review_.best_evaluation = best_evaluation(*target_);
    const std::string status =
        review_.run_stop_status.empty() ? "missing" : "'" + printable(review_.run_stop_status, 40) + "'";
    const std::string best =
        review_.best_evaluation ? "best " + review_.best_evaluation->text() : "no evaluation logged a number";
    if (!reached_at && review_.run_stop_status == mllog_keys::kSuccess) {
      add(target_->severity, run_stop ? run_stop->line : 0,
          "run_stop says success but no " + key_name(target_->key) + " reached the target (" +
              review_.target_description + "); " + best);
    } else if (!reached_at) {
      add(Severity::kWarning, run_stop ? run_stop->line : 0,
          "the run did not converge (run_stop status " + status + "; target " + review_.target_description +
              " not reached, " + best + "); it counts as a dropped run");
    } else if (review_.run_stop_status != mllog_keys::kSuccess) {
      add(Severity::kWarning, run_stop ? run_stop->line : 0,
          "the target was reached on line " + std::to_string(reached_at->line) + " but run_stop status is " + status +
              "; the run counts as not converged");
    }
  }

  // The score is run_stop's time less run_start's, so the clock must run forwards between them: run_stop after
  // run_start, no line of the timed region dated before run_start, and run_stop no earlier than the evaluation
  // that reached the target. Published logs are looser than "every line after the one before" (Habana's BERT
  // writes its evaluations after later blocks and dates run_stop at the passing one; SSD logs from several
  // threads 1 ms apart), and MiniGo's rules evaluate after training and date run_stop at the passing model's
  // save; none of the v1.1 or v3.0 logs breaks these three.
  void check_clock() {
    const auto run_start = index_.first_position(mllog_keys::kRunStart);
    if (!run_start) return;
    const LogEvent& start = index_.at(*run_start);
    const auto run_stop = index_.first_position(mllog_keys::kRunStop);
    const size_t end = run_stop.value_or(log_.events.size());
    const auto dated = [](const LogEvent& event) {
      return "line " + std::to_string(event.line) + " (time_ms " + std::to_string(std::llround(event.time_ms)) + ")";
    };
    if (run_stop && index_.at(*run_stop).time_ms < start.time_ms) {
      add(Severity::kError, index_.at(*run_stop).line,
          "run_stop is dated before run_start, " + dated(start) + ": the clock runs backwards");
      return;
    }
    for (size_t position = *run_start + 1; position < end; ++position)
      if (index_.at(position).time_ms < start.time_ms) {
        add(Severity::kError, index_.at(position).line,
            key_name(index_.at(position).key) + " is dated before run_start, " + dated(start) +
                ": the clock runs backwards inside the timed region");
        return;
      }
    const BenchmarkRules* benchmark = ruleset_.benchmark(index_.first_string(mllog_keys::kSubmissionBenchmark));
    if (run_stop && reached_at_ && !(benchmark && benchmark->evaluated_after_training) &&
        index_.at(*run_stop).time_ms < reached_at_->time_ms)
      add(Severity::kError, index_.at(*run_stop).line,
          "run_stop is dated before the evaluation that reached the target, " + dated(*reached_at_) +
              ": the clock stopped before the run converged");
  }

  void check_tensors(const TensorSetRule& rule) {
    std::set<std::string> logged;
    for (const size_t position : index_.positions(rule.key)) {
      const LogEvent& event = index_.at(position);
      const auto field = event.metadata.find(rule.metadata_field);
      if (field == event.metadata.end() || !field->is_string()) {
        add(rule.severity, event.line, key_name(rule.key) + " has no string metadata " + key_name(rule.metadata_field));
        continue;
      }
      logged.insert(field->get<std::string>());
    }
    const std::set<std::string> expected(rule.expected.begin(), rule.expected.end());
    if (logged.empty()) {
      add(rule.severity, 0,
          "no " + key_name(rule.key) + " lines; the rules expect " + std::to_string(expected.size()) + " tensors");
      return;
    }
    std::vector<std::string> missing, unexpected;
    std::set_difference(expected.begin(), expected.end(), logged.begin(), logged.end(), std::back_inserter(missing));
    std::set_difference(logged.begin(), logged.end(), expected.begin(), expected.end(), std::back_inserter(unexpected));
    const auto sample = [](const std::vector<std::string>& names) {
      std::string text;
      for (size_t i = 0; i < names.size() && i < 3; ++i) text += (i ? ", " : "") + printable(names[i], 60);
      return text + (names.size() > 3 ? ", ..." : "");
    };
    if (!missing.empty())
      add(rule.severity, 0,
          std::to_string(missing.size()) + " expected tensors have no " + key_name(rule.key) +
              " line: " + sample(missing));
    if (!unexpected.empty())
      add(rule.severity, 0,
          std::to_string(unexpected.size()) + " initialized tensors are not in the rules' list: " + sample(unexpected));
  }

  void extract_results() {
    review_.benchmark = index_.first_string(mllog_keys::kSubmissionBenchmark);
    review_.division = index_.first_string(mllog_keys::kSubmissionDivision);
    review_.org = index_.first_string(mllog_keys::kSubmissionOrg);
    review_.platform = index_.first_string(mllog_keys::kSubmissionPlatform);
    review_.submission_status = index_.first_string(mllog_keys::kSubmissionStatus);
    if (const LogEvent* batch = index_.first(mllog_keys::kGlobalBatchSize); batch && batch->value.is_number())
      review_.global_batch_size = batch->value.get<double>();

    const auto run_start = index_.first_position(mllog_keys::kRunStart);
    const auto run_stop = index_.first_position(mllog_keys::kRunStop);
    const double start_ms = run_start ? index_.at(*run_start).time_ms : 0;
    if (run_start && run_stop && *run_stop > *run_start)
      review_.minutes = (index_.at(*run_stop).time_ms - start_ms) / 60000.0;

    const std::string metric = target_ ? target_->key : mllog_keys::kEvalAccuracy;
    extract_convergence(metric, run_stop.value_or(log_.events.size()));
    if (run_start) {
      const std::string plotted_field =
          target_ && !target_->field_thresholds.empty() ? target_->field_thresholds.begin()->first : "";
      for (const size_t position : index_.positions(metric)) {
        if (position < *run_start || position > run_stop.value_or(log_.events.size())) continue;
        const LogEvent& event = index_.at(position);
        const json& value =
            plotted_field.empty() || !event.value.is_object() ? event.value : event.value.value(plotted_field, json());
        const auto number = value.is_boolean() ? std::nullopt : number_of(value);
        if (number && std::isfinite(*number)) review_.curve.push_back({(event.time_ms - start_ms) / 60000.0, *number});
      }
    }
    for (const size_t position : index_.positions(mllog_keys::kSeed)) {
      const LogEvent& event = index_.at(position);
      review_.seeds.push_back({event.value, event.metadata, event.line});
    }
    if (const LogEvent* split = index_.first(mllog_keys::kTrainbenchTimeSplit); split && split->value.is_object()) {
      // The harness's parts in its order, then any others a later version logs.
      static const std::vector<std::string> kParts = {mllog_keys::kTrainingCompute, mllog_keys::kInputWait,
                                                      mllog_keys::kEvaluation, mllog_keys::kRankWait,
                                                      mllog_keys::kOther};
      for (const std::string& part : kParts)
        if (const auto found = split->value.find(part); found != split->value.end() && found->is_number())
          review_.time_split.emplace_back(part, found->get<double>());
      for (const auto& [part, seconds] : split->value.items())
        if (seconds.is_number() && std::find(kParts.begin(), kParts.end(), part) == kParts.end())
          review_.time_split.emplace_back(part, seconds.get<double>());
    }
    extract_cpu_contention();
  }

  void extract_cpu_contention() {
    const LogEvent* logged = index_.first(mllog_keys::kTrainbenchCpuContention);
    if (!logged || !logged->value.is_object()) return;
    const auto number = [](const json& object, const char* field) {
      const auto found = object.find(field);
      return found != object.end() && found->is_number() ? found->get<double>() : 0.0;
    };
    RunReview::CpuContention contention;
    contention.other_processes = number(logged->value, mllog_keys::kOtherProcesses);
    contention.steal = number(logged->value, mllog_keys::kSteal);
    contention.capacity = number(logged->metadata, mllog_keys::kCapacity);
    contention.warning_share = number(logged->metadata, mllog_keys::kWarningShare);
    if (const auto cpus = logged->metadata.find(mllog_keys::kCpus); cpus != logged->metadata.end() && cpus->is_string())
      contention.cpus = printable(cpus->get<std::string>(), 100);
    review_.cpu_contention = contention;
  }

  // The convergence point as the v1.1 rcp_checker reads it: the value current at run_stop, from the last
  // metric line (its epoch_num, rounded) or, for BERT with --bert-train-samples, the last train_samples line.
  void extract_convergence(const std::string& metric, size_t run_stop) {
    const BenchmarkRules* benchmark = ruleset_.benchmark(review_.benchmark);
    review_.convergence_unit = benchmark ? benchmark->convergence : mllog_keys::kEpochNum;
    if (benchmark && benchmark->train_samples_convergence && options_.bert_train_samples)
      review_.convergence_unit = mllog_keys::kTrainSamples;
    if (review_.convergence_unit == mllog_keys::kTrainSamples) {
      for (const size_t position : index_.positions(mllog_keys::kTrainSamples))
        if (position < run_stop)
          if (const auto samples = single_number(index_.at(position).value)) review_.convergence = samples;
      return;
    }
    if (benchmark && !benchmark->first_passing_step.empty())
      return extract_first_passing_step(metric, run_stop, benchmark->first_passing_step);
    // From 4.0.0 the language models converge at the last evaluation's samples_count, not rounded.
    const bool epochs = review_.convergence_unit == mllog_keys::kEpochNum;
    for (const size_t position : index_.positions(metric)) {
      const auto& metadata = index_.at(position).metadata;
      const auto point = metadata.find(review_.convergence_unit);
      if (position >= run_stop || point == metadata.end() || !point->is_number()) continue;
      const int decimals = epochs ? ruleset_.rcp.epoch_decimals : -1;
      review_.convergence = decimals < 0 ? point->get<double>() : round_like_python(point->get<double>(), decimals);
    }
  }

  // Stable diffusion logs FID and CLIP as separate evaluation lines (metadata.metric) of one step; the run
  // converges at the smallest step whose latest value of every metric meets its bound
  // (rcp_checker.py@4.0.0-rc3-rcp-prunning:77,101-106). The checker raises on a step missing a metric, or on no
  // passing step; here such a run has no convergence point, which fails the RCP check.
  void extract_first_passing_step(const std::string& metric, size_t run_stop,
                                  const std::map<std::string, MetricBound>& bounds) {
    std::map<double, std::map<std::string, double>> steps;
    for (const size_t position : index_.positions(metric)) {
      const LogEvent& event = index_.at(position);
      const auto step = event.metadata.find(review_.convergence_unit);
      const auto name = event.metadata.find("metric");
      const auto value = number_of(event.value);
      if (position >= run_stop || step == event.metadata.end() || !step->is_number() || name == event.metadata.end() ||
          !name->is_string() || !value)
        continue;
      steps[step->get<double>()][name->get<std::string>()] = *value;
    }
    for (const auto& [step, values] : steps) {
      const bool passes = std::all_of(bounds.begin(), bounds.end(), [&](const auto& bound) {
        const auto found = values.find(bound.first);
        return found != values.end() && bound.second.met_by(found->second);
      });
      if (passes) {
        review_.convergence = step;
        return;
      }
    }
  }

  const ParsedLog& log_;
  const Ruleset& ruleset_;
  const LogCheckOptions& options_;
  RunReview& review_;
  EventIndex index_;
  std::map<std::string, KeyRule> rules_;
  std::optional<TargetRule> target_;
  const LogEvent* reached_at_ = nullptr;  // the first metric line that reached the target
  std::optional<TensorSetRule> tensors_;
};

}  // namespace

std::string BestEvaluation::text() const {
  return value + (epoch_num ? " at epoch " + format_number(*epoch_num) : "") + " on line " + std::to_string(line);
}

std::string RunReview::not_converged_reason() const {
  if (converged()) return "";
  const int errors = count_findings(findings, Severity::kError);
  if (errors > 0) return "failed its checks (" + std::to_string(errors) + (errors == 1 ? " error)" : " errors)");
  if (!target_reached) {
    const std::string target = target_description.empty() ? "its target" : target_description;
    return "did not reach " + target + ": " +
           (best_evaluation ? "best " + best_evaluation->text() : "no evaluation logged a number");
  }
  return "reached its target but run_stop status is " +
         (run_stop_status.empty() ? std::string("missing") : "'" + printable(run_stop_status, 40) + "'");
}

RunReview review_log(const ParsedLog& log, const Ruleset& ruleset, const LogCheckOptions& options) {
  RunReview review;
  review.path = log.path;
  review.findings = log.findings;
  review.unparsed_lines = static_cast<int>(log.findings.size());
  LogChecker(log, ruleset, options, review).run();
  std::stable_sort(review.findings.begin(), review.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.line < b.line; });
  return review;
}

std::set<std::string> keys_read_by_review(const Ruleset& ruleset) {
  std::set<std::string> keys = {
      mllog_keys::kSubmissionBenchmark, mllog_keys::kSubmissionDivision, mllog_keys::kSubmissionOrg,
      mllog_keys::kSubmissionPlatform,  mllog_keys::kSubmissionStatus,   mllog_keys::kGlobalBatchSize,
      mllog_keys::kRunStart,            mllog_keys::kRunStop,            mllog_keys::kTrainSamples,
      mllog_keys::kSeed,                mllog_keys::kEvalAccuracy,       mllog_keys::kTrainbenchTimeSplit,
      mllog_keys::kTrainbenchCpuContention};
  for (const auto& [name, config] : ruleset.configs) {
    for (const auto& rule : config.keys) {
      keys.insert(rule.key);
      if (!rule.alternative_key.empty()) keys.insert(rule.alternative_key);
      keys.insert(rule.after.begin(), rule.after.end());
      keys.insert(rule.not_after.begin(), rule.not_after.end());
      if (!rule.within_ms_of_first_key.empty()) keys.insert(rule.within_ms_of_first_key);
      if (rule.rules_text) keys.insert(rule.rules_text->within_ms_of_first_key);
    }
    if (config.target) keys.insert(config.target->key);
    if (config.tensors) keys.insert(config.tensors->key);
  }
  if (!ruleset.preset.key.empty()) keys.insert({ruleset.preset.key, ruleset.preset.target_key});
  if (has_checker_round(ruleset.version, ruleset.rules_dir)) {
    const auto checked = load_checker_round(ruleset.version, ruleset.rules_dir).keys();
    keys.insert(checked.begin(), checked.end());
  }
  return keys;
}

RunReview review_log_file(const std::string& path, const Ruleset& ruleset, const LogCheckOptions& options) {
  ParseLimits limits;
  const std::set<std::string> keys = keys_read_by_review(ruleset);
  limits.keep_key = [&keys](const std::string& key) { return keys.count(key) > 0; };
  return review_log(parse_log_file(path, limits), ruleset, options);
}

}  // namespace trainbench::review
