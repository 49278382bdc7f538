// Value checks and rule semantics that the log corpus does not isolate.
#include "review/compliance.h"

#include <gtest/gtest.h>

#include "review/json_checks.h"
#include "review/review_output.h"
#include "test_support.h"

namespace trainbench::review {
namespace {

using nlohmann::json;

ValueCheck check_of(const std::string& spec) { return ValueCheck::from_json(json::parse(spec), "test"); }

TEST(ValueChecks, NumbersGridsAndPowersOfTwo) {
  EXPECT_FALSE(check_value(check_of(R"({"grid": {"step": 0.001}})"), 0.003));  // 2.9999999999999996 steps
  EXPECT_TRUE(check_value(check_of(R"({"grid": {"step": 0.001}})"), 0.0035));
  EXPECT_FALSE(check_value(check_of(R"({"grid": {"origin": 50, "step": 5}})"), 55));
  EXPECT_TRUE(check_value(check_of(R"({"grid": {"origin": 50, "step": 5}})"), 52));
  for (const double decay : {0.0001, 5e-05, 2.5e-05, 0.0008})
    EXPECT_FALSE(check_value(check_of(R"({"power_of_two_times": 0.0001})"), decay));
  for (const double decay : {0.0003, 0.0, -0.0001})
    EXPECT_TRUE(check_value(check_of(R"({"power_of_two_times": 0.0001})"), decay));
  EXPECT_TRUE(check_value(check_of(R"({"gt": 0})"), "12"));  // a string is not a number
  EXPECT_TRUE(check_value(check_of(R"({"gt": 0})"), true));
  EXPECT_FALSE(check_value(check_of(R"({"integer": true})"), 2147483647));
  EXPECT_TRUE(check_value(check_of(R"({"integer": true})"), 2147483647.5));
}

TEST(ValueChecks, EqualityListsAndShapes) {
  EXPECT_FALSE(check_value(check_of(R"({"equals": 2})"), 2.0));
  EXPECT_FALSE(check_value(check_of(R"({"equals": 0.0001})"), 1e-4));
  EXPECT_TRUE(check_value(check_of(R"({"equals": true})"), 1));
  EXPECT_FALSE(check_value(check_of(R"({"one_of": [1, "Infinity"]})"), "Infinity"));
  EXPECT_FALSE(check_value(check_of(R"({"one_of": [1, "Infinity"]})"), 1.0));
  EXPECT_TRUE(check_value(check_of(R"({"not_empty": true})"), ""));
  EXPECT_TRUE(check_value(check_of(R"({"not_empty": true})"), nullptr));
  EXPECT_FALSE(check_value(check_of(R"({"length": 2})"), json::array({1, 2})));
  EXPECT_TRUE(check_value(check_of(R"({"element": {"index": 3, "value": {"gt": 0}}})"), json::array({1, 2})));
  EXPECT_EQ(*check_value(check_of(R"({"has_fields": ["BBOX", "SEGM"]})"), json{{"BBOX", 1}}),
            "value {\"BBOX\":1} has no field 'SEGM'");
}

// A minimal log whose keys can be edited per test.
std::string minigo_log(const std::string& extra) {
  return testing::read_text(testing::test_path("logs/good_minigo_without_blocks_or_sample_counts.txt")) + extra;
}

TEST(Compliance, LaterConfigsReplaceEarlierRulesForAKey) {
  // closed_minigo re-declares train_samples without a requirement, so common's EXACTLY_ONE no longer applies.
  const RunReview review = review_log(parse_log_text(minigo_log(""), "minigo.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(review.compliant()) << testing::dump(review.findings);
  EXPECT_EQ(review.configs, (std::vector<std::string>{"common", "closed_common", "closed_minigo"}));
}

TEST(Compliance, UnknownKeysAreIgnored) {
  const std::string extra =
      R"(:::MLLOG {"time_ms": 2, "key": "tracked_stats", "value": {"x": 1}, "metadata": {"step": [1, 2]}})";
  const RunReview review = review_log(parse_log_text(minigo_log(extra), "minigo.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(review.compliant()) << testing::dump(review.findings);
}

// trainbench_time_split, as the runner writes it just before run_stop: the review reads its parts in the
// harness's order and judges the log exactly as without it.
TEST(Compliance, TimeSplitIsReadAndChangesNoVerdict) {
  const std::string path = testing::test_path("logs/good_resnet_lars.txt");
  const std::string log = testing::read_text(path);
  const std::string split =
      R"(:::MLLOG {"namespace": "", "time_ms": 1862503, "event_type": "POINT_IN_TIME", "key": "trainbench_time_split", )"
      R"("value": {"evaluation": 250.0, "input_wait": 20.25, "other": 30.252, "rank_wait": 0.0, "training_compute": 1500.0}, )"
      R"("metadata": {"file": "runner.cpp", "lineno": 1, "unit": "seconds", "shares": {"training_compute": 0.8331, )"
      R"("input_wait": 0.0112, "evaluation": 0.1388, "rank_wait": 0.0, "other": 0.0168}}})" "\n";
  const size_t run_stop = log.rfind(":::MLLOG", log.find("\"run_stop\""));
  const RunReview with_split =
      review_log(parse_log_text(log.substr(0, run_stop) + split + log.substr(run_stop), "resnet.txt"), testing::ruleset_1_1());
  const RunReview without = review_log(parse_log_text(log, "resnet.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(with_split.compliant()) << testing::dump(with_split.findings);
  EXPECT_EQ(testing::dump(with_split.findings), testing::dump(without.findings));
  EXPECT_EQ(with_split.converged(), without.converged());
  EXPECT_EQ(with_split.minutes, without.minutes);
  const std::vector<std::pair<std::string, double>> parts{
      {"training_compute", 1500.0}, {"input_wait", 20.25}, {"evaluation", 250.0}, {"rank_wait", 0.0}, {"other", 30.252}};
  EXPECT_EQ(with_split.time_split, parts);
  double seconds = 0;
  for (const auto& part : with_split.time_split) seconds += part.second;
  EXPECT_NEAR(seconds, *with_split.minutes * 60, 1e-9);  // the parts add up to run_start..run_stop
  EXPECT_TRUE(without.time_split.empty());
}

// Issue 45: a log whose clock runs backwards is no measurement. run_stop before run_start once scored VALID at
// -1.033 minutes; a run_stop dated before the passing evaluation scored less than the run took.
std::string with_time(std::string log, int line, const std::string& time_ms) {
  size_t begin = 0;
  for (int i = 1; i < line; ++i) begin = log.find('\n', begin) + 1;
  const size_t field = log.find("\"time_ms\": ", begin) + 11;
  return log.replace(field, log.find(',', field) - field, time_ms);
}

TEST(Compliance, AClockThatRunsBackwardsIsInvalidWithTheReason) {
  const std::string good = testing::read_text(testing::test_path("logs/good_resnet_lars.txt"));
  const auto review_of = [](const std::string& log) {
    return review_log(parse_log_text(log, "resnet.txt"), testing::ruleset_1_1());
  };
  ASSERT_TRUE(review_of(good).compliant()) << testing::dump(review_of(good).findings);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with_time(good, 38, "60000"),
       "run_stop is dated before run_start, line 25 (time_ms 62001): the clock runs backwards"},
      {with_time(good, 31, "50000"), "'eval_accuracy' is dated before run_start, line 25 (time_ms 62001)"},
      {with_time(good, 38, "1000000"),
       "run_stop is dated before the evaluation that reached the target, line 36 (time_ms 1862501)"}};
  for (const auto& [log, reason] : cases) {
    const RunReview review = review_of(log);
    EXPECT_FALSE(review.compliant()) << reason;
    EXPECT_NE(testing::find_finding(review.findings, Severity::kError, reason), nullptr)
        << testing::dump(review.findings);
  }
  // MiniGo's rules date run_stop at the passing model's save and evaluate after training.
  const std::string minigo = with_time(minigo_log(""), 31, "100000");
  const RunReview saved_earlier = review_log(parse_log_text(minigo, "minigo.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(saved_earlier.compliant()) << testing::dump(saved_earlier.findings);
}

// MiniGo's 8192 games per generation are the reference's size; a trainbench preset plays fewer, and only
// the reference configuration is held to the number.
TEST(Compliance, PresetScaledValuesAreCheckedForTheReferenceConfigurationOnly) {
  const auto log_of = [](const std::string& preset) {
    return minigo_log(
        R"(:::MLLOG {"time_ms": 3, "key": "trainbench_preset", "value": ")" + preset + R"(", "metadata": {}})" "\n"
        R"(:::MLLOG {"time_ms": 3, "key": "trainbench_target", "value": 0.5, "metadata": {}})" "\n"
        R"(:::MLLOG {"time_ms": 4, "key": "actual_selfplay_games_per_generation", "value": 64, "metadata": {}})" "\n");
  };
  const RunReview tiny = review_log(parse_log_text(log_of("tiny"), "tiny.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(tiny.compliant()) << testing::dump(tiny.findings);
  const RunReview reference = review_log(parse_log_text(log_of("reference"), "reference.txt"), testing::ruleset_1_1());
  EXPECT_FALSE(reference.compliant());
  EXPECT_NE(testing::find_finding(reference.findings, Severity::kError, "actual_selfplay_games_per_generation"), nullptr)
      << testing::dump(reference.findings);
}

TEST(Compliance, EmptyLogListsEveryMissingKey) {
  const RunReview review = review_log(parse_log_text("", "empty.txt"), testing::ruleset_1_1());
  EXPECT_FALSE(review.compliant());
  EXPECT_NE(testing::find_finding(review.findings, Severity::kError,
                                  "'run_start' is required exactly once but is not logged"),
            nullptr);
  EXPECT_FALSE(review.minutes.has_value());
  EXPECT_FALSE(review.converged());
}

TEST(Compliance, ReadingOnlyTheKeysTheReviewUsesGivesTheSameVerdict) {
  const auto keys = keys_read_by_review(testing::ruleset_1_1());
  EXPECT_TRUE(keys.count("lars_opt_momentum"));
  EXPECT_TRUE(keys.count("trainbench_target"));
  EXPECT_FALSE(keys.count("tracked_stats"));
  for (const char* name : {"good_resnet_lars.txt", "bad_init_start_after_run_start.txt", "mini_preset.txt",
                           "good_minigo_without_blocks_or_sample_counts.txt", "bad_binary_junk.txt"}) {
    const std::string path = testing::test_path(std::string("logs/") + name);
    const RunReview filtered = review_log_file(path, testing::ruleset_1_1());
    const RunReview full = review_log(parse_log_file(path), testing::ruleset_1_1());
    EXPECT_EQ(testing::dump(filtered.findings), testing::dump(full.findings)) << name;
    EXPECT_EQ(filtered.minutes, full.minutes) << name;
    EXPECT_EQ(filtered.convergence, full.convergence) << name;
  }
}

TEST(Compliance, StrictTurnsRulesTextWarningsIntoErrors) {
  // init_stop 25 minutes after init_start: inside the checker's 30, outside the rules text's 20.
  const std::string path = testing::test_path("logs/good_init_between_20_and_30_minutes.txt");
  const RunReview lenient = review_log_file(path, testing::ruleset_1_1());
  EXPECT_TRUE(lenient.compliant()) << testing::dump(lenient.findings);
  LogCheckOptions strict;
  strict.strict = true;
  const RunReview strict_review = review_log_file(path, testing::ruleset_1_1(), strict);
  EXPECT_FALSE(strict_review.compliant());
  EXPECT_NE(testing::find_finding(strict_review.findings, Severity::kError,
                                  "the v1.1 compliance checker allows 30 minutes (--strict)"),
            nullptr)
      << testing::dump(strict_review.findings);
  // Past the checker's own limit it is an error either way, with the checker's message.
  const RunReview over = review_log_file(testing::test_path("logs/bad_minigo_init_over_30_minutes.txt"),
                                         testing::ruleset_1_1(), strict);
  EXPECT_EQ(count_findings(over.findings, Severity::kError), 1) << testing::dump(over.findings);
}

// RNN-T's closed rules fix eval_samples at dev-clean's 2703; a preset's log, which evaluates its own set, is
// not held to that, while the reference preset's is.
TEST(Compliance, PresetsAreNotHeldToTheRulesDatasetSizes) {
  const std::string path = testing::v11_data_path("NVIDIA/results/dgxa100_ngc21.09_pytorch/rnnt/result_0.txt");
  if (!testing::nvidia_fixture_present()) GTEST_SKIP() << "no NVIDIA v1.1 logs under shared/";
  std::string text = testing::read_text(path);
  const std::string samples = "\"key\": \"eval_samples\", \"value\": 2703";
  ASSERT_NE(text.find(samples), std::string::npos);
  text.replace(text.find(samples), samples.size(), "\"key\": \"eval_samples\", \"value\": 40");
  const auto with_preset = [&](const std::string& preset) {
    return text + ":::MLLOG {\"time_ms\": 1, \"key\": \"trainbench_preset\", \"value\": \"" + preset + "\", \"metadata\": {}}\n" +
           ":::MLLOG {\"time_ms\": 1, \"key\": \"trainbench_target\", \"value\": 0.5, \"metadata\": {}}\n";
  };
  const RunReview tiny = review_log(parse_log_text(with_preset("tiny"), "tiny.txt"), testing::ruleset_1_1());
  EXPECT_EQ(testing::find_finding(tiny.findings, Severity::kError, "eval_samples"), nullptr) << testing::dump(tiny.findings);
  const RunReview reference = review_log(parse_log_text(with_preset("reference"), "reference.txt"), testing::ruleset_1_1());
  EXPECT_NE(testing::find_finding(reference.findings, Severity::kError, "eval_samples"), nullptr)
      << testing::dump(reference.findings);
}

// The convergence point the v1.1 rcp_checker reads: by default the eval epoch_num, rounded with Python's
// round(x, 3); for BERT with --bert_train_samples, the logged train_samples (a one-element list counts as
// its number).
TEST(Compliance, ConvergencePointFollowsTheRcpCheckerConventions) {
  const std::string bert = testing::read_text(testing::test_path("logs/good_bert_nvidia_shape.txt"));
  const RunReview by_epoch = review_log(parse_log_text(bert, "bert.txt"), testing::ruleset_1_1());
  EXPECT_EQ(by_epoch.convergence_unit, "epoch_num");
  EXPECT_EQ(by_epoch.convergence, 1.0);
  LogCheckOptions train_samples;
  train_samples.bert_train_samples = true;
  const RunReview by_samples = review_log(parse_log_text(bert, "bert.txt"), testing::ruleset_1_1(), train_samples);
  EXPECT_EQ(by_samples.convergence_unit, "train_samples");
  EXPECT_EQ(by_samples.convergence, 2550016.0);
  std::string listed = bert;
  const std::string samples = "\"value\": 2550016";
  listed.replace(listed.find(samples), samples.size(), "\"value\": [2550016]");
  EXPECT_EQ(review_log(parse_log_text(listed, "bert.txt"), testing::ruleset_1_1(), train_samples).convergence,
            2550016.0);

  // The flag is BERT's only; other benchmarks keep epoch_num.
  const std::string resnet = testing::read_text(testing::test_path("logs/good_resnet_lars.txt"));
  EXPECT_EQ(review_log(parse_log_text(resnet, "r.txt"), testing::ruleset_1_1(), train_samples).convergence_unit,
            "epoch_num");

  // NVIDIA's DLRM logs converge at epoch 1.99988, which the checker reads as 2.0; 1.0005 rounds to the
  // even neighbour of its exact binary value (1.000499999...), 1.0.
  for (const auto& [logged, read] :
       {std::pair<const char*, double>{"1.99988", 2.0}, {"1.0005", 1.0}, {"8.1234", 8.123}}) {
    std::string text = resnet;
    const size_t last_eval = text.rfind("\"key\": \"eval_accuracy\"");
    const size_t epoch = text.find("\"epoch_num\": ", last_eval) + 13;
    text.replace(epoch, text.find('}', epoch) - epoch, logged);
    EXPECT_EQ(review_log(parse_log_text(text, "r.txt"), testing::ruleset_1_1()).convergence, read) << logged;
  }
}

// Stable diffusion converges at the smallest step whose FID <= 90 and CLIP >= 0.15, whatever came after it:
// step_num in 3.1.0, samples_count from 4.0.0 (rcp_checker.py@9b25d4a:73-99, @4.0.0-rc3-rcp-prunning:77-106).
TEST(Compliance, StableDiffusionConvergesAtTheFirstStepWhereEveryMetricPasses) {
  const std::string v31 = testing::read_text(testing::test_path("rounds/3.1/stable_diffusion_pass.txt"));
  const RunReview published = review_log(parse_log_text(v31, "sd.txt"), load_ruleset("3.1.0"));
  EXPECT_EQ(published.convergence_unit, "step_num");
  EXPECT_EQ(published.convergence, 5000.0);  // 4000 has FID 95.5; 5000 and 6000 pass
  const std::string fid_4000 = "\"value\": 95.54910604030641";
  ASSERT_NE(v31.find(fid_4000), std::string::npos);
  std::string earlier = v31;
  earlier.replace(earlier.find(fid_4000), fid_4000.size(), "\"value\": 89.5");
  EXPECT_EQ(review_log(parse_log_text(earlier, "sd.txt"), load_ruleset("3.1.0")).convergence, 4000.0);
  std::string no_clip = earlier;  // CLIP 0.1555 at 4000 no longer reaches 0.15
  no_clip.replace(no_clip.find("\"value\": 0.1555200187461179"), 27, "\"value\": 0.1499999999999999");
  EXPECT_EQ(review_log(parse_log_text(no_clip, "sd.txt"), load_ruleset("3.1.0")).convergence, 5000.0);

  const std::string v40 = testing::read_text(testing::test_path("rounds/4.0/stable_diffusion_pass.txt"));
  const RunReview samples = review_log(parse_log_text(v40, "sd.txt"), load_ruleset("4.0.0"));
  EXPECT_EQ(samples.convergence_unit, "samples_count");
  EXPECT_EQ(samples.convergence, 2560000.0);
  EXPECT_EQ(format_convergence(samples), "2560000 samples");
  EXPECT_EQ(format_convergence(published), "step 5000");
}

// A log's text with each `from` replaced by its `to` (each must occur).
std::string edited(std::string text, const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

using Edits = std::vector<std::pair<std::string, std::string>>;
const std::pair<std::string, std::string> kAborted{"\"status\": \"success\"", "\"status\": \"aborted\""};

// The review of a log of the corpus (tests/review/logs) after the edits.
RunReview review_edited(const std::string& name, const Edits& edits) {
  return review_log(parse_log_text(edited(testing::read_text(testing::test_path("logs/" + name)), edits), name),
                    testing::ruleset_1_1());
}

// A run that did not converge says how far it got: the evaluation nearest the target, not the last one.
TEST(Compliance, ARunThatDidNotConvergeNamesItsBestEvaluation) {
  const RunReview review =
      review_edited("mini_preset.txt", {{"\"value\": 0.4,", "\"value\": 0.45,"}, {"\"value\": 0.55,", "\"value\": 0.42,"}, kAborted});
  EXPECT_TRUE(review.compliant()) << testing::dump(review.findings);
  EXPECT_FALSE(review.converged());
  ASSERT_TRUE(review.best_evaluation.has_value());
  EXPECT_EQ(review.best_evaluation->text(), "0.45 at epoch 4 on line 33");
  EXPECT_EQ(review.not_converged_reason(), "did not reach eval_accuracy >= 0.5 and < 1: best 0.45 at epoch 4 on line 33");
  EXPECT_NE(testing::find_finding(review.findings, Severity::kWarning,
                                  "target eval_accuracy >= 0.5 and < 1 not reached, best 0.45 at epoch 4 on line 33"),
            nullptr)
      << testing::dump(review.findings);
}

// RNN-T's word error rate is better lower: its best is the smallest value.
TEST(Compliance, BestEvaluationOfALowerIsBetterTarget) {
  const RunReview review = review_edited(
      "good_rnnt_infinite_clip_norm.txt",
      {{"\"key\": \"eval_accuracy\", \"value\": 0.5,", "\"key\": \"eval_accuracy\", \"value\": 0.06,"},
       {"\"value\": 0.057,", "\"value\": 0.09,"},
       kAborted});
  EXPECT_FALSE(review.higher_is_better);
  EXPECT_EQ(review.not_converged_reason(), "did not reach eval_accuracy <= 0.058 and > 0: best 0.06 at epoch 1 on line 47");
}

// Mask R-CNN's parts must each reach their own threshold: the best evaluation is the one whose part furthest
// short was nearest, here the second (BBOX 0.007 and SEGM 0.004 short), not the first with the higher BBOX
// (SEGM 0.039 short).
TEST(Compliance, BestEvaluationOfNamedParts) {
  const std::string text = testing::read_text(testing::test_path("logs/good_maskrcnn_object_accuracy.txt"));
  const size_t run_stop = text.rfind(":::MLLOG", text.find("\"key\": \"run_stop\""));
  const std::string second_eval =
      R"(:::MLLOG {"namespace": "", "time_ms": 960002, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", )"
      R"("value": {"BBOX": 0.37, "SEGM": 0.335}, "metadata": {"file": "train.py", "lineno": 1, "epoch_num": 2}})" "\n";
  const std::string maskrcnn = edited(text.substr(0, run_stop) + second_eval + text.substr(run_stop),
                                      {{"{\"BBOX\": 0.378, \"SEGM\": 0.341}", "{\"BBOX\": 0.4, \"SEGM\": 0.3}"}, kAborted});
  const RunReview review = review_log(parse_log_text(maskrcnn, "maskrcnn.txt"), testing::ruleset_1_1());
  ASSERT_TRUE(review.best_evaluation.has_value()) << testing::dump(review.findings);
  EXPECT_EQ(review.best_evaluation->value, "BBOX 0.37, SEGM 0.335");
  EXPECT_EQ(review.best_evaluation->epoch_num, 2.0);
  EXPECT_EQ(review.not_converged_reason(),
            "did not reach eval_accuracy.BBOX >= 0.377 and eval_accuracy.SEGM >= 0.339: best BBOX 0.37, SEGM 0.335 "
            "at epoch 2 on line 30");
}

// Why a run does not count, when it is not the target: failed checks, or a run_stop that did not say success.
TEST(Compliance, NotConvergedReasonForFailedChecksAndAbortedRuns) {
  EXPECT_EQ(review_edited("good_resnet_lars.txt", {}).not_converged_reason(), "");
  EXPECT_EQ(review_edited("good_resnet_lars.txt", {kAborted}).not_converged_reason(),
            "reached its target but run_stop status is 'aborted'");
  const RunReview failed = review_log_file(testing::test_path("logs/bad_lars_poly_power.txt"), testing::ruleset_1_1());
  EXPECT_EQ(failed.not_converged_reason(), "failed its checks (1 error)") << testing::dump(failed.findings);
  const RunReview empty = review_log(parse_log_text("", "empty.txt"), testing::ruleset_1_1());
  EXPECT_NE(empty.not_converged_reason().find("failed its checks ("), std::string::npos);
}

}  // namespace
}  // namespace trainbench::review
