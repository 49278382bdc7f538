// The verdict of a set of runs, and the reasons it gives when the set is not valid.
#include "review/submission.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "review/json_checks.h"
#include "test_support.h"

namespace trainbench::review {
namespace {

// The mini preset's log (target 0.5) with its last evaluation, 0.55 at epoch 8, replaced; a value below the
// target ends with run_stop aborted, as the harness writes it.
std::string mini_log_ending_at(double last_value, int seed) {
  std::string log = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  const auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = log.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    log.replace(at, from.size(), to);
  };
  replace("\"value\": 0.55,", "\"value\": " + format_number(last_value) + ",");
  replace("\"key\": \"seed\", \"value\": 42", "\"key\": \"seed\", \"value\": " + std::to_string(seed));
  if (last_value < 0.5) replace("\"status\": \"success\"", "\"status\": \"aborted\"");
  return log;
}

bool has_reason(const std::vector<std::string>& reasons, const std::string& reason) {
  return std::find(reasons.begin(), reasons.end(), reason) != reasons.end();
}

std::string joined(const std::vector<std::string>& reasons) {
  std::string text;
  for (const auto& reason : reasons) text += reason + "\n";
  return text;
}

// Without a score, a run that did not converge is one of the reasons, with how far it got; a run that
// converged is not.
TEST(Submission, ReasonsNameEachRunThatDidNotConvergeWithItsBest) {
  testing::ScratchFolder scratch;
  testing::write_text(scratch / "box/resnet/result_0.txt", mini_log_ending_at(0.55, 1));
  testing::write_text(scratch / "box/resnet/result_1.txt", mini_log_ending_at(0.47, 2));
  const SubmissionReview review = review_submission(scratch.path(), testing::ruleset_1_1());
  ASSERT_EQ(review.systems.size(), 1u);
  ASSERT_EQ(review.systems[0].benchmarks.size(), 1u);
  const BenchmarkReview& resnet = review.systems[0].benchmarks[0];
  const std::vector<std::string> reasons = resnet.invalid_reasons();
  EXPECT_TRUE(has_reason(reasons, "resnet needs 5 runs; found 2")) << joined(reasons);
  EXPECT_TRUE(has_reason(reasons, "result_1.txt: did not reach eval_accuracy >= 0.5 and < 1: best 0.47 at epoch 8 "
                                  "on line 38"))
      << joined(reasons);
  EXPECT_EQ(joined(reasons).find("result_0.txt"), std::string::npos) << joined(reasons);
}

// With a score, a dropped run is not why anything failed, so it is not listed among the reasons.
TEST(Submission, ADroppedRunIsNoReason) {
  testing::ScratchFolder scratch;
  for (int i = 0; i < 4; ++i)
    testing::write_text(scratch / ("box/resnet/result_" + std::to_string(i) + ".txt"), mini_log_ending_at(0.55, i));
  testing::write_text(scratch / "box/resnet/result_4.txt", mini_log_ending_at(0.47, 4));
  const SubmissionReview review = review_submission(scratch.path(), testing::ruleset_1_1());
  const BenchmarkReview& resnet = review.systems.at(0).benchmarks.at(0);
  ASSERT_TRUE(resnet.score.mean_minutes.has_value());
  EXPECT_EQ(resnet.score.non_converged, 1);
  EXPECT_EQ(joined(resnet.invalid_reasons()).find("did not reach"), std::string::npos)
      << joined(resnet.invalid_reasons());
}

}  // namespace
}  // namespace trainbench::review
