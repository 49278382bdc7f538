#include "review/checker_configs.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "review/ruleset.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace trainbench::review {

namespace rc = rule_code;
using json = nlohmann::json;

namespace {

std::string round_folder(const std::string& version) { return "training_" + version + "/checker/"; }

struct Manifest {
  std::string base, source;
  std::vector<std::string> files;
  json engine;
};

Manifest read_manifest(const std::string& version, const std::string& rules_dir) {
  const std::string path = round_folder(version) + "checker.json";
  const auto text = read_rules_file(rules_dir, path);
  if (!text) fail(path, "no compliance-checker rules for round " + version);
  try {
    const json manifest = json::parse(*text);
    return {manifest.at("base").get<std::string>(), manifest.at("source").get<std::string>(),
            manifest.at("files").get<std::vector<std::string>>(), manifest.value("engine", json::object())};
  } catch (const json::exception& error) {
    fail(path, std::string("expected {\"base\", \"source\", \"files\", \"engine\"}: ") + error.what());
  }
}

std::string scalar(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) fail(where, "expected a string");
  return node.as<std::string>();
}

// CHECK may be one string or a list of them.
std::vector<std::pair<std::string, rc::Expression>> expressions(const YAML::Node& node, const std::string& where) {
  std::vector<std::pair<std::string, rc::Expression>> parsed;
  const auto add = [&](const YAML::Node& item) {
    const std::string text = scalar(item, where);
    parsed.emplace_back(text, rc::parse_expression(text, where));
  };
  if (node.IsSequence())
    for (const auto& item : node) add(item);
  else
    add(node);
  return parsed;
}

void read_requirement(CheckerKey& key, const std::string& where) {
  const std::string& req = key.requirement;
  const auto inside = [&](const std::string& prefix) {
    return req.substr(prefix.size(), req.size() - prefix.size() - 1);
  };
  if (req.empty() || req == "OPTIONAL" || req == "EXACTLY_ONE" || req == "AT_LEAST_ONE") return;
  if (req.rfind("AT_LEAST_ONE_OR(", 0) == 0 && req.back() == ')') {
    std::string rest = inside("AT_LEAST_ONE_OR(");
    for (size_t start = 0; start <= rest.size();) {
      const size_t comma = std::min(rest.find(',', start), rest.size());
      std::string name = rest.substr(start, comma - start);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      key.alternatives.push_back(name);
      start = comma + 1;
    }
    return;
  }
  if (req.rfind("AT_LEAST(", 0) == 0 && req.back() == ')') {
    try {
      key.at_least = std::stoi(inside("AT_LEAST("));
      return;
    } catch (const std::exception&) {
    }
  }
  fail(where, "REQ '" + printable(req, 60) +
                  "' is none of OPTIONAL, EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST(n), AT_LEAST_ONE_OR(...)");
}

CheckerKey read_key(const YAML::Node& record, const std::string& file) {
  CheckerKey key;
  key.name = scalar(record["NAME"], file + ": KEY without NAME");
  const std::string where = file + ", KEY " + key.name;
  for (const auto& field : record) {
    const std::string name = field.first.as<std::string>();
    const std::string at = where + ", " + name;
    if (name == "NAME") continue;
    if (name == "REQ")
      key.requirement = scalar(field.second, at);
    else if (name == "PRE")
      key.pre = rc::parse_program(scalar(field.second, at), at);
    else if (name == "POST")
      key.post = rc::parse_program(scalar(field.second, at), at);
    else if (name == "CHECK")
      key.checks = expressions(field.second, at);
    else if (name == "FIRST_CHECK")
      key.first_checks = expressions(field.second, at);
    else if (name == "ATLEAST_ONE_CHECK") {
      const std::string text = scalar(field.second, at);
      key.at_least_one_check.emplace(text, rc::parse_expression(text, at));
    } else
      fail(at, "unknown field of a KEY record (expected NAME, REQ, PRE, CHECK, POST, FIRST_CHECK, ATLEAST_ONE_CHECK)");
  }
  read_requirement(key, where + ", REQ");
  return key;
}

CheckerConfig read_config(const std::string& file, const std::string& text, const std::string& where) {
  CheckerConfig config;
  config.file = file;
  YAML::Node records;
  try {
    records = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    fail(where, std::string("not YAML: ") + error.what());
  }
  if (records.IsNull()) return config;
  if (!records.IsSequence()) fail(where, "expected a list of BEGIN, KEY and END records");
  for (const auto& record : records) {
    if (!record.IsMap() || record.size() != 1) fail(where, "each record is one of BEGIN:, KEY:, END:");
    const std::string kind = record.begin()->first.as<std::string>();
    const YAML::Node body = record.begin()->second;
    if (kind == "KEY") {
      config.keys.push_back(read_key(body, where));
    } else if (kind == "BEGIN") {
      config.begin = rc::parse_program(scalar(body["CODE"], where + ", BEGIN CODE"), where + ", BEGIN CODE");
    } else if (kind == "END") {
      if (body["PRE"])
        config.end_pre = rc::parse_program(scalar(body["PRE"], where + ", END PRE"), where + ", END PRE");
      if (body["CHECK"]) config.end_checks = expressions(body["CHECK"], where + ", END CHECK");
    } else {
      fail(where, "unknown record '" + printable(kind, 40) + "' (expected BEGIN, KEY or END)");
    }
  }
  return config;
}

CheckerRound read_round(const std::string& version, const std::string& rules_dir) {
  const Manifest manifest = read_manifest(version, rules_dir);
  CheckerRound round;
  round.version = version;
  round.source = manifest.source;
  try {
    round.submission_keys_once = manifest.engine.value("submission_keys_once", true);
    round.weights_initialization_warnings = manifest.engine.value("weights_initialization_warnings", false);
  } catch (const json::exception& error) {
    fail(round_folder(version) + "checker.json: engine", std::string("expected true or false: ") + error.what());
  }
  for (const std::string& file : manifest.files) {
    const std::string where = "rules " + round_folder(version) + file;
    const auto text = read_round_file(version, "checker/" + file, rules_dir);
    if (!text) fail(round_folder(version) + file, "listed in checker.json but stored in no round it builds on");
    round.configs.emplace(file, read_config(file, *text, where));
  }
  if (!round.configs.count("common.yaml")) fail(round_folder(version) + "checker.json", "lists no common.yaml");
  return round;
}

rc::Scope line_scope(const rc::Value& state, const rc::Value& line);

const char* const kWeightsWarning =
    "the initialized tensors are not the reference model's (the 1.1.0 checker: can be ignored for 1.1.0)";

std::string first_word(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t\n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find_first_of(" \t\n", start) - start);
}

// mlp_compliance.py's ComplianceChecker for one log: messages a later config may overwrite (by key), those
// it may not, and warnings, exactly as that class keeps them.
class CheckerRun {
 public:
  CheckerRun(const CheckerRound& round, const ParsedLog& log) : round_(round), log_(log) {
    lines_ = rc::Value::list();
    for (const LogEvent& event : log.events) lines_.items().push_back(log_line(event));
  }

  CheckerVerdict run() {
    if (log_.events.empty()) error(0, "no :::MLLOG lines detected");
    std::deque<std::string> queue = {"common.yaml"};
    while (!queue.empty()) {
      const std::string file = queue.front();
      queue.pop_front();
      const auto found = round_.configs.find(file);
      if (found == round_.configs.end()) {
        // The official checker reports the missing file, then crashes opening it: nothing else is checked.
        error(0, "ruleset " + round_.version + " has no rule file '" + printable(file, 80) + "'");
        break;
      }
      verdict_.configs.push_back(file);
      run_config(found->second, queue);
    }
    for (auto& [key, finding] : overwritable_) verdict_.findings.push_back(finding);
    for (auto& [key, finding] : warnings_) verdict_.findings.push_back(finding);
    verdict_.findings.insert(verdict_.findings.end(), fixed_.begin(), fixed_.end());
    verdict_.target_reached = target_checked_ && !target_failed_;
    return verdict_;
  }

 private:
  static rc::Value log_line(const LogEvent& event) {
    rc::Value value = rc::Value::dict();
    value.set("value", rc::from_json(event.value));
    value.set("metadata", rc::from_json(event.metadata));
    return rc::Value::object("LogLine", {{"full_string", rc::Value::string("")},
                                         {"timestamp", rc::Value::real(event.time_ms)},
                                         {"key", rc::Value::string(event.key)},
                                         {"value", value},
                                         {"lineno", rc::Value::integer(event.line)}});
  }

  void error(int line, const std::string& message) { fixed_.push_back({Severity::kError, log_.path, line, message}); }
  void keyed_error(const std::string& key, int line, const std::string& message) {
    overwritable_[key] = {Severity::kError, log_.path, line, message};
  }

  // The checker's globals for one config file: a fresh `s`, math, and its two functions.
  static rc::Value fresh_state(std::deque<std::string>& queue) {
    rc::Value state = rc::Value::dict();
    state.set("s", rc::Value::dict());
    state.set("math", rc::math_module());
    state.set("is_integer", rc::Value::function("is_integer", is_integer));
    state.set("enqueue_config", rc::Value::function("enqueue_config", [&queue](std::vector<rc::Value>& args) {
                if (args.size() != 1 || args[0].kind() != rc::Value::Kind::kString)
                  throw rc::PythonError("TypeError", "enqueue_config() takes one path");
                // Rounds name their own folder ('training_2.1.0/closed_bert.yaml'); the file is looked up
                // in the round being checked, whose manifest lists every file it has.
                const std::string& path = args[0].as_string();
                queue.push_back(path.substr(path.find_last_of('/') + 1));
                return rc::Value();
              }));
    return state;
  }

  // mlp_compliance.py's is_integer: abs(round(value) - value) < 0.00001.
  static rc::Value is_integer(std::vector<rc::Value>& args) {
    if (args.size() != 1) throw rc::PythonError("TypeError", "is_integer() takes 1 positional argument");
    if (!args[0].is_number())
      throw rc::PythonError("TypeError", "type " + rc::python_type_name(args[0]) + " doesn't define __round__ method");
    const double value = args[0].as_double();
    if (std::isnan(value)) throw rc::PythonError("ValueError", "cannot convert float NaN to integer");
    if (std::isinf(value)) throw rc::PythonError("OverflowError", "cannot convert float infinity to integer");
    return rc::Value::boolean(std::abs(std::nearbyint(value) - value) < 0.00001);
  }

  int line_of(const rc::Value& line) const { return static_cast<int>(line.get_attr("lineno")->as_int()); }
  std::string key_of(const rc::Value& line) const { return line.get_attr("key")->as_string(); }

  // A CHECK: false or raising are both a failure of this key (run_check_eval).
  void check(const std::string& key, const rc::Value& line, const std::pair<std::string, rc::Expression>& test,
             const rc::Value& state) {
    rc::Scope scope = line_scope(state, line);
    try {
      if (!rc::truthy(rc::evaluate(test.second, scope)))
        keyed_error(key, line_of(line),
                    "CHECK for '" + printable(key, 80) + "' failed: " + printable(trimmed(test.first), 300));
    } catch (const rc::PythonError& raised) {
      keyed_error(key, line_of(line),
                  "CHECK for '" + printable(key, 80) + "' raised " + raised.type + " (" +
                      printable(raised.message, 120) + "): " + printable(trimmed(test.first), 300));
    }
  }

  void exec(const std::string& key, const rc::Value& line, const rc::Program& code, const rc::Value& state,
            const char* part) {
    rc::Scope scope = line_scope(state, line);
    try {
      rc::execute(code, scope);
    } catch (const rc::PythonError& raised) {
      keyed_error(key, line_of(line),
                  std::string(part) + " code of '" + printable(key, 80) + "' raised " + raised.type + " (" +
                      printable(raised.message, 120) + ")");
    }
  }

  static std::string trimmed(const std::string& text) {
    const size_t first = text.find_first_not_of(" \n\t"), last = text.find_last_not_of(" \n\t");
    return first == std::string::npos ? "" : text.substr(first, last - first + 1);
  }

  void run_config(const CheckerConfig& config, std::deque<std::string>& queue);
  void check_lines(const std::map<std::string, const CheckerKey*>& records, rc::Value& state,
                   std::map<std::string, std::vector<rc::Value>>& reported);
  void check_requirements(const std::map<std::string, const CheckerKey*>& records,
                          const std::map<std::string, std::vector<rc::Value>>& reported);
  void run_end(const CheckerConfig& config, rc::Value& state);

  const CheckerRound& round_;
  const ParsedLog& log_;
  rc::Value lines_;
  CheckerVerdict verdict_;
  std::map<std::string, Finding> overwritable_, warnings_;
  std::vector<Finding> fixed_;
  bool target_checked_ = false, target_failed_ = false;
};

rc::Scope line_scope(const rc::Value& state, const rc::Value& line) {
  rc::Value locals = rc::Value::dict();
  locals.set("ll", line);
  locals.set("v", *line.get_attr("value"));
  return {state, locals};
}

void CheckerRun::run_config(const CheckerConfig& config, std::deque<std::string>& queue) {
  rc::Value state = fresh_state(queue);
  std::map<std::string, const CheckerKey*> records;
  for (const auto& key : config.keys) records[key.name] = &key;
  if (config.begin) {
    rc::Value locals = rc::Value::dict();
    locals.set("loglines", lines_);
    locals.set("s", state.get("s"));
    rc::Scope scope{state, locals};
    try {
      rc::execute(*config.begin, scope);
    } catch (const rc::PythonError& raised) {  // uncaught in the official checker: it stops there
      error(0, config.file + " BEGIN code raised " + raised.type + " (" + printable(raised.message, 120) + ")");
      return;
    }
  }
  // A later config's record for a key replaces the earlier config's verdict on it.
  for (const auto& [name, record] : records) overwritable_.erase(name);
  std::map<std::string, std::vector<rc::Value>> reported;
  for (const auto& [name, record] : records) reported[name];
  check_lines(records, state, reported);
  check_requirements(records, reported);
  run_end(config, state);
}

void CheckerRun::check_lines(const std::map<std::string, const CheckerKey*>& records, rc::Value& state,
                             std::map<std::string, std::vector<rc::Value>>& reported) {
  std::set<std::string> executed, first_seen;
  std::map<std::string, int> passes;  // ATLEAST_ONE_CHECK: lines of the key that passed
  for (size_t i = 0; i < lines_.items().size(); ++i) {
    const rc::Value line = lines_.items()[i];
    const std::string key = key_of(line);
    const auto found = records.find(key);
    if (found == records.end()) continue;
    const CheckerKey& record = *found->second;
    reported[key].push_back(line.get_attr("value")->get("value"));
    if (!executed.count(key)) {
      if (record.pre) exec(key, line, *record.pre, state, "PRE");
      for (const auto& test : record.checks) check(key, line, test, state);
      if (record.post) exec(key, line, *record.post, state, "POST");
    }
    if (!record.first_checks.empty() && first_seen.insert(key).second)
      for (const auto& test : record.first_checks) check(key, line, test, state);
    if (record.at_least_one_check) {
      int& count = passes[key];
      rc::Scope scope = line_scope(state, line);
      try {
        count += rc::truthy(rc::evaluate(record.at_least_one_check->second, scope));
      } catch (const rc::PythonError& raised) {  // not caught by the official checker either: a failure
        error(line_of(line), "ATLEAST_ONE_CHECK of '" + printable(key, 80) + "' raised " + raised.type);
      }
    }
    // The official checker runs a submission_* key's PRE/CHECK/POST on its first line only.
    if (round_.submission_keys_once && key.find("submission_") != std::string::npos) executed.insert(key);
  }
  for (const auto& [key, count] : passes) {
    const std::string test = key + ": " + trimmed(records.at(key)->at_least_one_check->first);
    verdict_.target_description += (verdict_.target_description.empty() ? "" : "; ") + test;
    target_checked_ = true;
    if (count > 0) continue;
    target_failed_ = true;
    error(0, "no line passes " + printable(test, 300));
  }
}

void CheckerRun::check_requirements(const std::map<std::string, const CheckerKey*>& records,
                                    const std::map<std::string, std::vector<rc::Value>>& reported) {
  std::set<std::set<std::string>> alternatives;
  for (const auto& [name, record] : records) {
    const auto& values = reported.at(name);
    const std::string count = std::to_string(values.size());
    const std::string& req = record->requirement;
    if (req == "EXACTLY_ONE" && values.size() != 1) {
      const bool same = !values.empty() && std::all_of(values.begin(), values.end(), [&](const rc::Value& value) {
        return rc::equal(value, values.front());
      });
      auto& target = same ? warnings_ : overwritable_;
      target[name] = {same ? Severity::kWarning : Severity::kError, log_.path, 0,
                      "required exactly one '" + printable(name, 80) + "' line, found " + count +
                          (same ? " with the same value" : "")};
    }
    if (req == "AT_LEAST_ONE" && values.empty()) {
      if (round_.weights_initialization_warnings && name == "weights_initialization")
        warnings_[name] = {Severity::kWarning, log_.path, 0, kWeightsWarning};
      else
        overwritable_[name] = {Severity::kError, log_.path, 0,
                               "required at least one '" + printable(name, 80) + "' line, found 0"};
    }
    if (record->at_least > 0 && values.size() < static_cast<size_t>(record->at_least))
      overwritable_[name] = {Severity::kError, log_.path, 0,
                             "required at least " + std::to_string(record->at_least) + " '" + printable(name, 80) +
                                 "' lines, found " + count};
    if (!record->alternatives.empty()) {
      std::set<std::string> names(record->alternatives.begin(), record->alternatives.end());
      names.insert(name);
      alternatives.insert(names);
    }
  }
  for (const auto& names : alternatives) {
    bool any = false;
    std::string listed;
    for (const std::string& name : names) {
      const auto found = reported.find(name);
      if (found == reported.end()) {  // a KeyError that ends the official check
        error(0, "AT_LEAST_ONE_OR names '" + printable(name, 80) + "', which has no record in the same file");
        return;
      }
      any = any || !found->second.empty();
      listed += (listed.empty() ? "'" : " or '") + name + "'";
    }
    if (!any) error(0, "required at least one " + listed + " line, found 0");
  }
}

void CheckerRun::run_end(const CheckerConfig& config, rc::Value& state) {
  rc::Scope scope{state, state};
  try {
    if (config.end_pre) rc::execute(*config.end_pre, scope);
  } catch (const rc::PythonError& raised) {
    error(0, config.file + " END PRE code raised " + raised.type + " (" + printable(raised.message, 120) + ")");
    return;
  }
  for (const auto& [text, test] : config.end_checks) {
    try {
      if (rc::truthy(rc::evaluate(test, scope))) continue;
      if (round_.weights_initialization_warnings && first_word(text) == "sorted(s['initialized_tensors'])")
        warnings_["weights_initialization"] = {Severity::kWarning, log_.path, 0, kWeightsWarning};
      else
        error(0, config.file + " END check failed: " + printable(trimmed(text), 300));
    } catch (const rc::PythonError& raised) {
      error(0, config.file + " END check raised " + raised.type + ": " + printable(trimmed(text), 300));
    }
  }
}

}  // namespace

std::set<std::string> CheckerRound::keys() const {
  std::set<std::string> names = {"eval_accuracy"};  // BEGIN code aggregates evaluation lines (stable diffusion)
  for (const auto& [file, config] : configs)
    for (const auto& key : config.keys) {
      names.insert(key.name);
      names.insert(key.alternatives.begin(), key.alternatives.end());
    }
  return names;
}

bool has_checker_round(const std::string& version, const std::string& rules_dir) {
  return read_rules_file(rules_dir, round_folder(version) + "checker.json").has_value();
}

const CheckerRound& load_checker_round(const std::string& version, const std::string& rules_dir) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<CheckerRound>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[{version, rules_dir}];
  if (!slot) slot = std::make_unique<CheckerRound>(read_round(version, rules_dir));
  return *slot;
}

CheckerVerdict run_checker(const CheckerRound& round, const ParsedLog& log) {
  try {
    return CheckerRun(round, log).run();
  } catch (const trainbench::Error& error) {
    // LimitExceeded (a log built to exhaust the interpreter) or Unsupported (a rule met, at run time, a value
    // outside the subset): no verdict the official checker's can be trusted to equal, so the log fails.
    CheckerVerdict verdict;
    verdict.findings.push_back(
        {Severity::kError, log.path, 0,
         "the round's rules could not be evaluated on this log: " + printable(error.what(), 300)});
    return verdict;
  }
}

}  // namespace trainbench::review
