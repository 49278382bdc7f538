// The published NVIDIA v1.1 submission (resnet 5 runs, bert 10 runs) must pass and reproduce the published
// olympic scores; broken copies of it must fail for the right reason.
#include <gtest/gtest.h>

#include <filesystem>

#include "review/submission.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

using testing::dump;
using testing::find_finding;
namespace fs = std::filesystem;

class NvidiaSubmission : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::nvidia_fixture_present()) GTEST_SKIP() << "no fixture at " << testing::nvidia_path("");
  }

  // A scratch copy of the submission to break.
  std::string copy() {
    testing::copy_tree(testing::nvidia_path(""), scratch_ / "NVIDIA");
    return scratch_ / "NVIDIA";
  }

  static const BenchmarkReview& benchmark(const SubmissionReview& review, const std::string& name) {
    for (const auto& system : review.systems)
      for (const auto& result : system.benchmarks)
        if (result.benchmark == name) return result;
    throw std::runtime_error("no " + name);
  }

  static std::string all_findings(const SubmissionReview& review) {
    std::string text = dump(review.findings);
    for (const auto& system : review.systems) {
      text += dump(system.findings);
      for (const auto& result : system.benchmarks) {
        text += dump(result.findings);
        for (const auto& run : result.runs) text += dump(run.findings);
      }
    }
    return text;
  }

  testing::ScratchFolder scratch_;
};

TEST_F(NvidiaSubmission, IsValidAndReproducesThePublishedScores) {
  const SubmissionReview review = review_submission(testing::nvidia_path(""), testing::ruleset_1_1());
  ASSERT_TRUE(review.valid()) << all_findings(review);
  EXPECT_TRUE(review.package_layout);
  ASSERT_EQ(review.systems.size(), 2u);

  const BenchmarkReview& resnet = benchmark(review, "resnet");
  ASSERT_EQ(resnet.runs.size(), 5u);
  ASSERT_TRUE(resnet.score.mean_minutes.has_value());
  EXPECT_NEAR(*resnet.score.mean_minutes, 29.147, 0.0005);
  for (const auto& run : resnet.runs) {
    EXPECT_TRUE(run.converged()) << dump(run.findings);
    EXPECT_EQ(run.convergence, 35.0);
    EXPECT_TRUE(run.findings.empty()) << "resnet logs pass without even a warning:\n" << dump(run.findings);
  }
  ASSERT_TRUE(resnet.rcp.has_value());
  EXPECT_TRUE(resnet.rcp->passed);
  EXPECT_EQ(resnet.rcp->outcome, "RCP found");
  EXPECT_EQ(resnet.rcp->submission_mean, 35.0);

  const BenchmarkReview& bert = benchmark(review, "bert");
  ASSERT_EQ(bert.runs.size(), 10u);
  ASSERT_TRUE(bert.score.mean_minutes.has_value());
  EXPECT_NEAR(*bert.score.mean_minutes, 20.003, 0.0005);
  for (const auto& run : bert.runs) {
    EXPECT_TRUE(run.converged());
    // The public checker passes BERT only with the weights_initialization warning; so do we.
    ASSERT_EQ(run.findings.size(), 1u) << dump(run.findings);
    EXPECT_NE(find_finding(run.findings, Severity::kWarning, "no 'weights_initialization' lines"), nullptr);
  }
  ASSERT_TRUE(bert.rcp.has_value());
  EXPECT_TRUE(bert.rcp->passed) << bert.rcp->explanation;
  EXPECT_EQ(bert.rcp->outcome, "RCP found");
  EXPECT_DOUBLE_EQ(*bert.rcp->submission_mean, 2775192.0);  // olympic mean of train_samples at convergence
}

TEST_F(NvidiaSubmission, MissingRunMakesTheBenchmarkInvalid) {
  const std::string root = copy();
  fs::remove(root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_4.txt");
  const SubmissionReview review = review_submission(root, testing::ruleset_1_1());
  EXPECT_FALSE(review.valid());
  const BenchmarkReview& resnet = benchmark(review, "resnet");
  EXPECT_FALSE(resnet.valid());
  EXPECT_NE(find_finding(resnet.findings, Severity::kError, "resnet needs 5 runs; found 4"), nullptr)
      << dump(resnet.findings);
  EXPECT_TRUE(benchmark(review, "bert").valid());
}

TEST_F(NvidiaSubmission, RepeatedSeedIsAnError) {
  const std::string root = copy();
  const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_1.txt";
  std::string text = testing::read_text(path);
  const std::string seed = "\"key\": \"seed\", \"value\": 14538";
  ASSERT_NE(text.find(seed), std::string::npos);
  text.replace(text.find(seed), seed.size(), "\"key\": \"seed\", \"value\": 16487");  // result_0's seed
  testing::write_text(path, text);
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_FALSE(resnet.valid());
  const Finding* finding = find_finding(resnet.findings, Severity::kError, "seed 16487 is also used by result_0.txt");
  ASSERT_NE(finding, nullptr) << dump(resnet.findings);
  EXPECT_EQ(finding->file, path);
  EXPECT_EQ(finding->line, 15);
}

TEST_F(NvidiaSubmission, SeedInSomeRunsOnlyIsAnError) {
  const std::string root = copy();
  const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_2.txt";
  std::string text = testing::read_text(path);
  const size_t seed = text.find("\"key\": \"seed\"");
  const size_t start = text.rfind('\n', seed) + 1;
  text.erase(start, text.find('\n', seed) + 1 - start);
  testing::write_text(path, text);
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_NE(find_finding(resnet.findings, Severity::kError,
                         "seed is logged in 4 of 5 runs; log it in all runs or none (missing in result_2.txt)"),
            nullptr)
      << dump(resnet.findings);
}

TEST_F(NvidiaSubmission, TwoNonConvergedRunsAreTooMany) {
  const std::string root = copy();
  for (const char* run : {"result_0.txt", "result_3.txt"}) {
    const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/" + run;
    std::string text = testing::read_text(path);
    text.replace(text.rfind("\"status\": \"success\""), 19, "\"status\": \"aborted\"");
    text.replace(text.rfind("\"value\": 0.76"), 13, "\"value\": 0.66");
    testing::write_text(path, text);
  }
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_FALSE(resnet.score.mean_minutes.has_value());
  EXPECT_NE(find_finding(resnet.findings, Severity::kError,
                         "2 of 5 runs did not converge or failed their checks; at most 1 may be dropped"),
            nullptr)
      << dump(resnet.findings);
  ASSERT_TRUE(resnet.rcp.has_value());
  EXPECT_EQ(resnet.rcp->outcome, "Insufficient convergence");
}

TEST_F(NvidiaSubmission, OneNonConvergedRunIsDroppedAndStillValid) {
  const std::string root = copy();
  const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_0.txt";  // the fastest run
  std::string text = testing::read_text(path);
  text.replace(text.rfind("\"status\": \"success\""), 19, "\"status\": \"aborted\"");
  text.replace(text.rfind("\"value\": 0.76"), 13, "\"value\": 0.66");
  testing::write_text(path, text);
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_TRUE(resnet.valid()) << dump(resnet.findings);
  // Sorted: 29.1320, 29.1524, 29.1554, 29.1629, inf -> mean of the middle three.
  EXPECT_NEAR(*resnet.score.mean_minutes, (29.15235 + 29.155383333 + 29.162883333) / 3, 1e-6);
}

TEST_F(NvidiaSubmission, PackageLayoutProblemsAreReported) {
  const std::string root = copy();
  fs::remove(root + "/systems/dgxa100_ngc21.09_pytorch.json");
  fs::create_directories(root + "/results/dgxa100_ngc21.09_mxnet/resnet50");
  testing::write_text(root + "/results/dgxa100_ngc21.09_mxnet/resnet/notes.txt", "hello");
  const SubmissionReview review = review_submission(root, testing::ruleset_1_1());
  EXPECT_FALSE(review.valid());
  const std::string findings = all_findings(review);
  EXPECT_NE(findings.find("no systems/dgxa100_ngc21.09_pytorch.json describes this system"), std::string::npos)
      << findings;
  EXPECT_NE(findings.find("'resnet50' is not a benchmark of ruleset 1.1.0"), std::string::npos) << findings;
  EXPECT_NE(findings.find("notes.txt: warning: not a result_<N>.txt log; ignored"), std::string::npos) << findings;
  EXPECT_NE(findings.find("benchmarks/resnet: warning: missing"), std::string::npos) << findings;
}

TEST_F(NvidiaSubmission, LogInTheWrongBenchmarkFolderIsAnError) {
  const std::string root = copy();
  fs::copy_file(root + "/results/dgxa100_ngc21.09_pytorch/bert/result_0.txt",
                root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_5.txt");
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_FALSE(resnet.valid());
  EXPECT_NE(find_finding(resnet.runs.back().findings, Severity::kError,
                         "submission_benchmark is 'bert' but the log is in resnet/"),
            nullptr)
      << dump(resnet.runs.back().findings);
}

TEST_F(NvidiaSubmission, FailedRcpCanBeBypassed) {
  const std::string root = copy();
  // Converging at epoch 31 instead of 35 is faster than the RCP allows at BS 3264.
  for (int i = 0; i < 5; ++i) {
    const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_" + std::to_string(i) + ".txt";
    std::string text = testing::read_text(path);
    const std::string last_eval = "\"key\": \"eval_accuracy\", \"value\": 0.7";
    const size_t at = text.rfind(last_eval);
    ASSERT_NE(at, std::string::npos);
    text.replace(text.find("\"epoch_num\": 35", at), 15, "\"epoch_num\": 31");
    testing::write_text(path, text);
  }
  const BenchmarkReview failed = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_FALSE(failed.valid());
  EXPECT_NE(find_finding(failed.findings, Severity::kError,
                         "RCP check failed: RCP found (epochs): mean 31.0000 < minimum 34.55"),
            nullptr)
      << dump(failed.findings);
  ReviewOptions options;
  options.rcp_bypass = true;
  const BenchmarkReview bypassed = benchmark(review_submission(root, testing::ruleset_1_1(), options), "resnet");
  EXPECT_TRUE(bypassed.valid()) << dump(bypassed.findings);
  EXPECT_NE(find_finding(bypassed.findings, Severity::kWarning, "accepted with --rcp-bypass"), nullptr);
}

TEST(LooseResults, FoldersWithoutResultsAreReviewedAsLooseResults) {
  testing::ScratchFolder scratch;
  const std::string mini_log = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  const std::string preset_line = "\"key\": \"trainbench_preset\", \"value\": \"mini\"";
  std::string tiny_log = mini_log;
  tiny_log.replace(tiny_log.find(preset_line), preset_line.size(), "\"key\": \"trainbench_preset\", \"value\": \"tiny\"");
  for (int i = 0; i < 5; ++i) {
    const std::string name = "result_" + std::to_string(i) + ".txt";
    testing::write_text(scratch / ("results/mini_cpu/resnet/" + name), mini_log);
    testing::write_text(scratch / ("results/tiny_cpu/resnet/" + name), tiny_log);
  }
  const SubmissionReview review = review_submission(scratch / "results", testing::ruleset_1_1());
  EXPECT_FALSE(review.package_layout);
  ASSERT_EQ(review.systems.size(), 2u);
  EXPECT_EQ(review.systems[0].name, "mini_cpu");
  ASSERT_EQ(review.systems[0].benchmarks.size(), 1u);
  const BenchmarkReview& mini = review.systems[0].benchmarks[0];
  EXPECT_EQ(mini.benchmark, "resnet");
  // Identical copies share one seed; the mini runs are held to the shipped mini RCP table (batch 128 only).
  EXPECT_NE(find_finding(mini.findings, Severity::kError, "seed 42 is also used by result_0.txt"), nullptr)
      << dump(mini.findings);
  EXPECT_NE(find_finding(mini.findings, Severity::kError, "Missing RCP, please submit RCP with BS = 3264"), nullptr)
      << dump(mini.findings);
  // A preset without a table of its own is reviewed without an RCP check, with a warning.
  const BenchmarkReview& tiny = review.systems[1].benchmarks.at(0);
  EXPECT_NE(find_finding(tiny.findings, Severity::kWarning, "has no RCP table rcps_resnet_tiny.json"), nullptr)
      << dump(tiny.findings);
  EXPECT_THROW(review_submission(scratch / "nowhere", testing::ruleset_1_1()), Error);
}

}  // namespace
}  // namespace trainbench::review
