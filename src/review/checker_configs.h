#pragma once
// The official compliance checker's rules for one round, run natively. mlcommons/logging ships each round
// as YAML files (compliance_checker/training_<round>/common.yaml, closed_<benchmark>.yaml, ...) whose KEY
// records hold Python snippets (CHECK, PRE, POST, ATLEAST_ONE_CHECK, FIRST_CHECK, BEGIN/END code) that its
// mlp_compliance.py runs with eval/exec. trainbench embeds those files as they were tagged for the round
// (rules/training_<round>/checker/, stored as what changed from the round before; see
// scripts/import-checker-rules.py) and runs them with its own bounded interpreter (review/rule_code.h).
// Every snippet is parsed when the round loads, so a rule outside the interpreter's subset fails loudly,
// naming the file and record, before any log is read.
//
// The engine reproduces mlp_compliance.py's semantics, quirks included, because they decide verdicts:
// - each config file runs over the whole log with its own state `s`, in the order configs are enqueued;
// - a KEY's PRE/CHECK/POST run on every line of that key, except submission_* keys (first line only);
// - a failed CHECK or a failed PRE/POST is one message per key, and a later config that has a record for
//   that key drops the earlier config's message for it (the "overwritable" messages);
// - EXACTLY_ONE with several lines that all log the same value is only a warning;
// - ATLEAST_ONE_CHECK must hold on at least one line of its key (the quality target);
// - a config that enqueues a file the round does not have ends the check (the official tool crashes).
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "review/finding.h"
#include "review/log_parser.h"
#include "review/rule_code.h"

namespace trainbench::review {

// One KEY record of a config file.
struct CheckerKey {
  std::string name;
  std::string requirement;                // "", OPTIONAL, EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST(n), AT_LEAST_ONE_OR(a, b)
  int at_least = 0;                       // n of AT_LEAST(n)
  std::vector<std::string> alternatives;  // a, b of AT_LEAST_ONE_OR(a, b)
  std::optional<rule_code::Program> pre, post;
  std::vector<std::pair<std::string, rule_code::Expression>> checks, first_checks;
  std::optional<std::pair<std::string, rule_code::Expression>> at_least_one_check;
};

struct CheckerConfig {
  std::string file;  // "closed_bert.yaml"
  std::optional<rule_code::Program> begin, end_pre;
  std::vector<std::pair<std::string, rule_code::Expression>> end_checks;
  std::vector<CheckerKey> keys;  // in file order; a later record of the same NAME replaces an earlier one
};

struct CheckerRound {
  std::string version;                           // "2.1.0"
  std::string source;                            // the tag and commit the files came from
  std::map<std::string, CheckerConfig> configs;  // by file name
  // Where the round's own mlp_compliance.py differs from today's (checker.json "engine"):
  bool submission_keys_once = true;              // from 2.0.0: submission_* keys run their code once
  bool weights_initialization_warnings = false;  // 1.1.0: tensor-list failures are only warnings

  // Every key some config has a record for, plus the keys the engine itself reads.
  std::set<std::string> keys() const;
};

// The round's rule files, embedded or from <rules_dir>/training_<version>/checker/, resolved through the
// rounds they build on (checker.json's "base"). Throws trainbench::Error naming the round, file and record
// for a missing file, bad YAML, or a snippet outside the interpreter's subset. Parsed once per process.
const CheckerRound& load_checker_round(const std::string& version, const std::string& rules_dir = "");

// Whether the round has checker files (embedded or in rules_dir).
bool has_checker_round(const std::string& version, const std::string& rules_dir = "");

struct CheckerVerdict {
  std::vector<Finding> findings;     // errors: the official messages; warnings: its warnings
  std::vector<std::string> configs;  // the files applied, in order
  bool target_reached = false;       // every ATLEAST_ONE_CHECK held on some line
  std::string target_description;    // "eval_accuracy: v['value'] >= 0.759 and v['value'] < 1.0"
};

// Checks one parsed log as mlp_compliance.py's check_loglines does, starting from common.yaml.
CheckerVerdict run_checker(const CheckerRound& round, const ParsedLog& log);

}  // namespace trainbench::review
