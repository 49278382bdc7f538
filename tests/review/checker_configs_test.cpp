// The official checkers' rule files run natively: every embedded round loads (each snippet parses within
// the interpreter's subset), and the engine keeps mlp_compliance.py's semantics where they decide verdicts,
// each shown on a small rule set written for the test.
#include <gtest/gtest.h>

#include "review/checker_configs.h"
#include "review/ruleset.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

using testing::dump;
using testing::find_finding;

const std::vector<std::string> kRounds = {"1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0",
                                          "4.0.0", "4.1.0", "5.0.0", "5.1.0", "6.0.0", "6.1.0"};

TEST(CheckerRounds, EveryEmbeddedRoundLoadsWithEachSnippetInTheSubset) {
  for (const std::string& version : kRounds) {
    SCOPED_TRACE(version);
    ASSERT_TRUE(has_checker_round(version));
    const CheckerRound& round = load_checker_round(version);
    EXPECT_TRUE(round.configs.count("common.yaml"));
    EXPECT_TRUE(round.configs.count("closed_common.yaml"));
    EXPECT_NE(round.source.find("mlcommons/logging"), std::string::npos);
    EXPECT_GE(round.configs.size(), 15u);
  }
  EXPECT_FALSE(load_checker_round("1.1.0").submission_keys_once);
  EXPECT_TRUE(load_checker_round("1.1.0").weights_initialization_warnings);
  EXPECT_TRUE(load_checker_round("2.0.0").submission_keys_once);
  EXPECT_FALSE(load_checker_round("2.0.0").weights_initialization_warnings);
  // Files unchanged from the round before are read from it: 2.1.0 stores none of its own.
  EXPECT_EQ(load_checker_round("2.1.0").configs.size(), 21u);
  EXPECT_TRUE(load_checker_round("3.1.0").configs.count("closed_stable_diffusion.yaml"));
  EXPECT_FALSE(load_checker_round("4.1.0").configs.count("closed_resnet.yaml"));
}

// A round of the test's own: checker.json plus YAML files in a scratch rules folder.
class OwnRound {
 public:
  using Files = std::map<std::string, std::string>;
  explicit OwnRound(const Files& files, const std::string& engine = "{}") {
    std::string listed;
    for (const auto& [name, text] : files) {
      testing::write_text(folder_ / ("training_9.0.0/checker/" + name), text);
      listed += (listed.empty() ? "\"" : ", \"") + name + "\"";
    }
    testing::write_text(folder_ / "training_9.0.0/checker/checker.json",
                        "{\"round\": \"9.0.0\", \"base\": \"\", \"source\": \"mlcommons/logging test\", \"engine\": " +
                            engine + ", \"files\": [" + listed + "]}");
  }
  const CheckerRound& round() const { return load_checker_round("9.0.0", folder_.path()); }

 private:
  testing::ScratchFolder folder_;
};

std::string mllog(double time_ms, const std::string& key, const std::string& value,
                  const std::string& metadata = "{}") {
  return ":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(time_ms) +
         ", \"event_type\": \"POINT_IN_TIME\", \"key\": \"" + key + "\", \"value\": " + value +
         ", \"metadata\": " + metadata + "}\n";
}

CheckerVerdict check(const OwnRound& round, const std::string& log) {
  return run_checker(round.round(), parse_log_text(log, "result_0.txt"));
}

const char* const kCommon = R"(
- BEGIN:
    CODE: " s.update({'started': False}) "
- KEY:
    NAME:  submission_benchmark
    REQ:   EXACTLY_ONE
    CHECK: " v['value'] in ['tiny', 'other'] "
    POST:  " enqueue_config('training_9.0.0/closed_{}.yaml'.format(v['value'])) "
- KEY:
    NAME:  run_start
    REQ:   EXACTLY_ONE
    POST:  " s['started'] = True "
- KEY:
    NAME:  epoch_start
    REQ:   AT_LEAST_ONE_OR(block_start)
    CHECK: " s['started'] "
- KEY:
    NAME:  block_start
    REQ:   AT_LEAST_ONE_OR(epoch_start)
)";

const char* const kClosedTiny = R"(
- BEGIN:
    CODE: " s.update({'initialized_tensors': []}) "
- KEY:
    NAME:  epoch_start
    CHECK: " 'epoch_num' in v['metadata'] "
- KEY:
    NAME:  eval_accuracy
    REQ:   AT_LEAST_ONE
    ATLEAST_ONE_CHECK: " v['value'] >= 0.5 "
- KEY:
    NAME:  weights_initialization
    REQ:   AT_LEAST_ONE
    POST:  " s['initialized_tensors'] += [v['metadata']['tensor']] "
- END:
    CHECK: " sorted(s['initialized_tensors']) == sorted(['a', 'b']) "
)";

struct TinyLog {
  std::string last_accuracy = "0.6";
  std::string second_tensor = "a";
  bool epoch_start = true;

  std::string text() const {
    return mllog(1, "submission_benchmark", "\"tiny\"") +
           mllog(2, "weights_initialization", "null", R"({"tensor": "b"})") +
           mllog(2, "weights_initialization", "null", "{\"tensor\": \"" + second_tensor + "\"}") +
           mllog(3, "run_start", "null") + (epoch_start ? mllog(4, "epoch_start", "null", R"({"epoch_num": 1})") : "") +
           mllog(5, "eval_accuracy", "0.3") + mllog(6, "eval_accuracy", last_accuracy);
  }
};

std::string passing_log() { return TinyLog().text(); }

TEST(CheckerEngine, APassingLogEnqueuesItsBenchmarkAndReachesTheTarget) {
  const OwnRound own(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}});
  const CheckerVerdict verdict = check(own, passing_log());
  EXPECT_FALSE(has_errors(verdict.findings)) << dump(verdict.findings);
  EXPECT_EQ(verdict.configs, (std::vector<std::string>{"common.yaml", "closed_tiny.yaml"}));
  EXPECT_TRUE(verdict.target_reached);
  EXPECT_NE(verdict.target_description.find("v['value'] >= 0.5"), std::string::npos);
}

TEST(CheckerEngine, ALaterConfigsRecordForAKeyReplacesTheEarlierVerdictOnIt) {
  const OwnRound own(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}});
  // common.yaml's epoch_start CHECK fails (before run_start); closed_tiny.yaml redefines epoch_start.
  std::string log = passing_log();
  log = mllog(0, "epoch_start", "null", R"({"epoch_num": 0})") + log;
  EXPECT_FALSE(has_errors(check(own, log).findings)) << dump(check(own, log).findings);
  // Without epoch_num the later record fails it itself.
  const CheckerVerdict failing = check(own, mllog(0, "epoch_start", "null") + passing_log());
  EXPECT_TRUE(find_finding(failing.findings, Severity::kError, "CHECK for 'epoch_start' failed"))
      << dump(failing.findings);
}

TEST(CheckerEngine, AMissedTargetAFailedEndCheckAndNoAlternativeAreErrors) {
  const OwnRound own(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}});
  TinyLog log;
  log.last_accuracy = "0.4";
  log.second_tensor = "c";
  log.epoch_start = false;
  const CheckerVerdict verdict = check(own, log.text());
  EXPECT_FALSE(verdict.target_reached);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "no line passes eval_accuracy"))
      << dump(verdict.findings);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "END check failed")) << dump(verdict.findings);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "'block_start' or 'epoch_start'"))
      << dump(verdict.findings);
}

TEST(CheckerEngine, OnePointOnePointZeroOnlyWarnsAboutTheInitializedTensors) {
  const OwnRound own(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}},
                     R"({"weights_initialization_warnings": true})");
  TinyLog log;
  log.second_tensor = "c";
  const CheckerVerdict verdict = check(own, log.text());
  EXPECT_FALSE(has_errors(verdict.findings)) << dump(verdict.findings);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kWarning, "can be ignored for 1.1.0"));
}

TEST(CheckerEngine, ExactlyOneRepeatedWithTheSameValueIsAWarningAndWithAnotherAnError) {
  const OwnRound own(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}});
  const CheckerVerdict same = check(own, passing_log() + mllog(7, "run_start", "null"));
  EXPECT_FALSE(has_errors(same.findings)) << dump(same.findings);
  EXPECT_TRUE(find_finding(same.findings, Severity::kWarning, "exactly one 'run_start' line, found 2"));
  const CheckerVerdict other = check(own, passing_log() + mllog(7, "run_start", "1"));
  EXPECT_TRUE(find_finding(other.findings, Severity::kError, "exactly one 'run_start' line, found 2"));
}

TEST(CheckerEngine, FromTwoPointZeroASubmissionKeyRunsItsCodeOnItsFirstLineOnly) {
  const std::string log = passing_log() + mllog(8, "submission_benchmark", "\"other\"");
  const OwnRound once(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}});
  EXPECT_EQ(check(once, log).configs, (std::vector<std::string>{"common.yaml", "closed_tiny.yaml"}));
  // Before 2.0.0 the second line enqueues its own file, which this round does not have: the check ends.
  const OwnRound every(OwnRound::Files{{"common.yaml", kCommon}, {"closed_tiny.yaml", kClosedTiny}},
                       R"({"submission_keys_once": false})");
  const CheckerVerdict verdict = check(every, log);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "has no rule file 'closed_other.yaml'"))
      << dump(verdict.findings);
}

TEST(CheckerEngine, ARaisingCheckFailsItsKeyAndBeginCodeCanAddLines) {
  const OwnRound own(OwnRound::Files{{"common.yaml", R"(
- BEGIN:
    CODE: |
        from dataclasses import replace
        for line in loglines:
            if line.key == 'eval_accuracy':
                copy = replace(line)
                copy.key = 'aggregated'
                loglines.extend([copy])
                break
- KEY:
    NAME:  aggregated
    REQ:   AT_LEAST_ONE
- KEY:
    NAME:  eval_accuracy
    CHECK: " v['metadata']['missing'] > 0 "
)"}});
  const CheckerVerdict verdict = check(own, mllog(1, "eval_accuracy", "0.5"));
  EXPECT_FALSE(find_finding(verdict.findings, Severity::kError, "'aggregated'")) << dump(verdict.findings);
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "raised KeyError")) << dump(verdict.findings);
}

TEST(CheckerEngine, ARuleThatWouldExhaustTheInterpreterFailsTheLogItRanOn) {
  const OwnRound own(
      OwnRound::Files{{"common.yaml", "- KEY:\n    NAME: run_start\n    CHECK: \" len('x' * 10**9) > 0 \"\n"}});
  const CheckerVerdict verdict = check(own, mllog(1, "run_start", "null"));
  EXPECT_TRUE(find_finding(verdict.findings, Severity::kError, "could not be evaluated on this log"))
      << dump(verdict.findings);
}

TEST(CheckerEngine, CodeOutsideTheSubsetFailsWhenTheRoundLoadsNamingFileAndKey) {
  const OwnRound own(
      OwnRound::Files{{"common.yaml", "- KEY:\n    NAME: run_start\n    CHECK: \" [x for x in v] \"\n"}});
  try {
    own.round();
    FAIL() << "a comprehension was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("common.yaml, KEY run_start, CHECK"), std::string::npos) << error.what();
  }
  const OwnRound bad_req(OwnRound::Files{{"common.yaml", "- KEY:\n    NAME: run_start\n    REQ: SOMETIMES\n"}});
  EXPECT_THROW(bad_req.round(), Error);
}

}  // namespace
}  // namespace trainbench::review
