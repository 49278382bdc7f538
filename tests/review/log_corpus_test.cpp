// Every log in tests/review/logs (ruleset 1.1.0) and tests/review/logs_3.0.0 (3.0.0) states its expected
// verdict on "# expect:" lines (see logs/README.md); a 3.0.0 log also records the official compliance
// checker's verdict on its "# official" line, which the review must give.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <tuple>

#include "review/compliance.h"
#include "test_support.h"

namespace trainbench::review {
namespace {

using testing::dump;
using testing::find_finding;

struct Expectation {
  std::string kind;  // pass, converged, not-converged, error, warning, note
  int line = 0;
  std::string text;
};

std::vector<Expectation> expectations_of(const std::string& content) {
  std::vector<Expectation> result;
  std::istringstream in(content);
  const std::string marker = "# expect: ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(marker, 0) != 0) continue;
    std::string rest = line.substr(marker.size());
    Expectation expectation;
    const size_t space = rest.find(' ');
    expectation.kind = rest.substr(0, space);
    rest = space == std::string::npos ? "" : rest.substr(space + 1);
    if (rest.rfind("line ", 0) == 0 && rest.find(':') != std::string::npos) {
      expectation.line = std::stoi(rest.substr(5, rest.find(':') - 5));
      rest = rest.substr(rest.find(':') + 1);
      if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
    }
    expectation.text = rest;
    result.push_back(expectation);
  }
  return result;
}

Severity severity_of(const std::string& kind) {
  return kind == "error" ? Severity::kError : kind == "warning" ? Severity::kWarning : Severity::kNote;
}

// A corpus file: its folder below tests/review names the ruleset it is reviewed under.
struct CorpusLog {
  std::string folder;  // "logs" (1.1.0) or "logs_<ruleset>"
  std::string file;
};

void PrintTo(const CorpusLog& log, std::ostream* out) { *out << log.folder << "/" << log.file; }

const Ruleset& ruleset_of(const std::string& folder) {
  static const Ruleset ruleset_3_0 = load_ruleset("3.0.0");
  return folder == "logs_3.0.0" ? ruleset_3_0 : testing::ruleset_1_1();
}

// "# official (...): pass" / "fail: ..." / "crash: ...", the official checker's verdict; "" when not recorded.
std::string official_verdict_of(const std::string& content) {
  const std::string marker = "# official (";
  const size_t at = content.find(marker);
  if (at == std::string::npos) return "";
  const size_t colon = content.find("): ", at);
  const size_t end = content.find_first_of(":\n", colon + 3);
  return content.substr(colon + 3, end - colon - 3);
}

class LogCorpus : public ::testing::TestWithParam<CorpusLog> {};

TEST_P(LogCorpus, ReviewSaysWhatTheLogExpects) {
  const std::string path = testing::test_path(GetParam().folder + "/" + GetParam().file);
  const std::string content = testing::read_text(path);
  const auto expectations = expectations_of(content);
  ASSERT_FALSE(expectations.empty()) << path << " has no '# expect:' lines";
  const RunReview review = review_log_file(path, ruleset_of(GetParam().folder));
  // The official checker passes a log that has no errors and reaches its target (whatever run_stop says).
  if (const std::string official = official_verdict_of(content); !official.empty())
    EXPECT_EQ(official == "pass", review.compliant() && review.target_reached) << official << "\n"
                                                                               << dump(review.findings);
  bool expects_error = false;
  for (const auto& expectation : expectations) {
    if (expectation.kind == "pass") {
      EXPECT_TRUE(review.compliant()) << "expected no errors:\n" << dump(review.findings);
    } else if (expectation.kind == "converged") {
      EXPECT_TRUE(review.converged()) << dump(review.findings);
    } else if (expectation.kind == "not-converged") {
      EXPECT_FALSE(review.converged()) << dump(review.findings);
    } else {
      ASSERT_TRUE(expectation.kind == "error" || expectation.kind == "warning" || expectation.kind == "note")
          << "unknown expectation '" << expectation.kind << "'";
      expects_error = expects_error || expectation.kind == "error";
      const Finding* finding = find_finding(review.findings, severity_of(expectation.kind), expectation.text);
      ASSERT_NE(finding, nullptr) << "no " << expectation.kind << " containing \"" << expectation.text << "\" in:\n"
                                  << dump(review.findings);
      if (expectation.line > 0) {
        EXPECT_EQ(finding->line, expectation.line) << format_finding(*finding);
      }
      EXPECT_EQ(finding->file, path);
    }
  }
  EXPECT_EQ(review.compliant(), !expects_error) << dump(review.findings);
}

std::vector<CorpusLog> corpus_files() {
  std::vector<CorpusLog> logs;
  for (const std::string folder : {"logs", "logs_3.0.0"})
    for (const auto& entry : std::filesystem::directory_iterator(testing::test_path(folder)))
      if (entry.path().extension() == ".txt") logs.push_back({folder, entry.path().filename().string()});
  std::sort(logs.begin(), logs.end(), [](const CorpusLog& a, const CorpusLog& b) {
    return std::tie(a.folder, a.file) < std::tie(b.folder, b.file);
  });
  return logs;
}

std::string test_name(const ::testing::TestParamInfo<CorpusLog>& info) {
  const std::string prefix = info.param.folder == "logs" ? "" : "v3_0_";
  std::string name = prefix + info.param.file.substr(0, info.param.file.size() - 4);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Logs, LogCorpus, ::testing::ValuesIn(corpus_files()), test_name);

TEST(LogCorpusFacts, ConvergencePointsAndMinutesComeFromTheLog) {
  const RunReview resnet = review_log_file(testing::test_path("logs/good_resnet_lars.txt"), testing::ruleset_1_1());
  ASSERT_TRUE(resnet.minutes.has_value());
  EXPECT_NEAR(*resnet.minutes, 30.0 + 502.0 / 60000.0, 1e-9);  // two 15-minute blocks, then eval and run_stop
  EXPECT_EQ(resnet.convergence, 8.0);
  EXPECT_EQ(resnet.global_batch_size, 3264.0);
  ASSERT_EQ(resnet.curve.size(), 2u);
  EXPECT_DOUBLE_EQ(resnet.curve[1].value, 0.7612);
  EXPECT_EQ(resnet.configs,
            (std::vector<std::string>{"common", "closed_common", "closed_resnet", "closed_resnet_lars"}));


  const RunReview mini = review_log_file(testing::test_path("logs/mini_preset.txt"), testing::ruleset_1_1());
  EXPECT_EQ(mini.preset, "mini");
  EXPECT_EQ(mini.target_threshold, 0.5);
  const RunReview reference = review_log_file(testing::test_path("logs/reference_preset.txt"), testing::ruleset_1_1());
  EXPECT_EQ(reference.preset, "");
  EXPECT_EQ(reference.target_threshold, 0.759);
}

// Mask R-CNN's eval_accuracy has named parts: the curve and the chart's target line are the first part's.
TEST(LogCorpusFacts, NamedPartTargetsChartTheirFirstPart) {
  if (!testing::nvidia_fixture_present()) GTEST_SKIP() << "no fixture at " << testing::nvidia_path("");
  const RunReview maskrcnn = review_log_file(
      testing::nvidia_path("results/dgxa100_ngc21.09_pytorch/maskrcnn/result_0.txt"), testing::ruleset_1_1());
  EXPECT_TRUE(maskrcnn.converged());
  EXPECT_EQ(maskrcnn.target_description.substr(0, maskrcnn.target_description.find(' ')), "eval_accuracy.BBOX");
  EXPECT_EQ(maskrcnn.target_threshold, 0.377);
  ASSERT_FALSE(maskrcnn.curve.empty());
  EXPECT_GE(maskrcnn.curve.back().value, 0.377);
}

TEST(LogCorpusFacts, TheReferenceTensorListIsNotAppliedToAPresetModel) {
  const std::string mini = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  const std::string preset = "\"value\": \"mini\"";
  std::string reference = mini;
  reference.replace(reference.find(preset), preset.size(), "\"value\": \"reference\"");
  const auto tensor_finding = [](const RunReview& review) {
    return find_finding(review.findings, Severity::kWarning, "weights_initialization");
  };
  EXPECT_EQ(tensor_finding(review_log(parse_log_text(mini, "mini.txt"), testing::ruleset_1_1())), nullptr);
  EXPECT_NE(tensor_finding(review_log(parse_log_text(reference, "reference.txt"), testing::ruleset_1_1())), nullptr);
}

}  // namespace
}  // namespace trainbench::review
