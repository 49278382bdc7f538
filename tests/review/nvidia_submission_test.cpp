// NVIDIA's published single-node v1.1 results (resnet 5 runs, bert 10 runs) and broken copies of them:
// the review must give the official tools' verdicts and fail broken copies for the right reason.
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

constexpr const char* kMxnet = "dgxa100_ngc21.09_mxnet";
constexpr const char* kPytorch = "dgxa100_ngc21.09_pytorch";

class NvidiaSubmission : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::nvidia_fixture_present()) GTEST_SKIP() << "no fixture at " << testing::nvidia_path("");
  }

  // A scratch submission with the single-node resnet and bert results, to break.
  std::string copy() {
    const std::string root = scratch_ / "NVIDIA";
    testing::copy_nvidia_results(root, {{kMxnet, "resnet"}, {kPytorch, "bert"}});
    return root;
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

// expected-rcp-verdicts.tsv: resnet passes; NVIDIA's BERT fails the default (eval epoch_num) convention and
// passes with --bert_train_samples; the published scores are NVIDIA's summarizer.csv values (README).
TEST_F(NvidiaSubmission, ReproducesThePublishedScoresAndRcpVerdicts) {
  const std::string root = copy();
  const SubmissionReview review = review_submission(root, testing::ruleset_1_1());
  EXPECT_EQ(review.verdict(), Verdict::kRcpFailed) << all_findings(review);
  EXPECT_TRUE(review.package_layout);
  ASSERT_EQ(review.systems.size(), 2u);

  const BenchmarkReview& resnet = benchmark(review, "resnet");
  EXPECT_EQ(resnet.verdict(), Verdict::kValid) << dump(resnet.findings);
  ASSERT_EQ(resnet.runs.size(), 5u);
  ASSERT_TRUE(resnet.score.mean_minutes.has_value());
  EXPECT_NEAR(*resnet.score.mean_minutes, 29.146589, 5e-7);
  for (const auto& run : resnet.runs) {
    EXPECT_TRUE(run.converged()) << dump(run.findings);
    EXPECT_EQ(run.convergence, 35.0);
    EXPECT_TRUE(run.findings.empty()) << "resnet logs pass without even a warning:\n" << dump(run.findings);
  }
  ASSERT_TRUE(resnet.rcp.has_value());
  EXPECT_EQ(resnet.rcp->summary(), "RCP found, RCP test PASSED");
  EXPECT_EQ(resnet.rcp->submission_mean, 35.0);

  const BenchmarkReview& bert = benchmark(review, "bert");
  ASSERT_EQ(bert.runs.size(), 10u);
  ASSERT_TRUE(bert.score.mean_minutes.has_value());
  EXPECT_NEAR(*bert.score.mean_minutes, 20.003233, 5e-7);
  for (const auto& run : bert.runs) {
    EXPECT_TRUE(run.converged());
    // The public checker passes BERT only with the weights_initialization warning; so do we.
    ASSERT_EQ(run.findings.size(), 1u) << dump(run.findings);
    EXPECT_NE(find_finding(run.findings, Severity::kWarning, "no 'weights_initialization' lines"), nullptr);
  }
  ASSERT_TRUE(bert.rcp.has_value());
  EXPECT_EQ(bert.rcp->summary(), "RCP found, RCP test FAILED");
  EXPECT_EQ(bert.verdict(), Verdict::kRcpFailed);
  EXPECT_NE(bert.invalid_reasons().at(0).find("RCP found, RCP test FAILED"), std::string::npos);

  ReviewOptions train_samples;
  train_samples.checks.bert_train_samples = true;
  const SubmissionReview by_samples = review_submission(root, testing::ruleset_1_1(), train_samples);
  EXPECT_EQ(by_samples.verdict(), Verdict::kValid) << all_findings(by_samples);
  const BenchmarkReview& bert_by_samples = benchmark(by_samples, "bert");
  EXPECT_EQ(bert_by_samples.rcp->summary(), "RCP found, RCP test PASSED");
  EXPECT_EQ(bert_by_samples.rcp->unit, "train_samples");
  EXPECT_DOUBLE_EQ(*bert_by_samples.rcp->submission_mean, 2775192.0);  // olympic mean of train_samples
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
  EXPECT_NE(benchmark(review, "bert").verdict(), Verdict::kInvalid);
}

// Issue 45: review reads only the tree it is given. A system folder linked to /etc and a result log linked to a
// file elsewhere are skipped with a finding each, not listed or parsed: the missing run makes resnet invalid.
TEST_F(NvidiaSubmission, SymbolicLinksOutOfTheTreeAreNotFollowed) {
  const std::string root = copy();
  const std::string resnet_folder = root + "/results/dgxa100_ngc21.09_mxnet/resnet";
  fs::rename(resnet_folder + "/result_4.txt", scratch_ / "elsewhere.txt");
  fs::create_symlink(scratch_ / "elsewhere.txt", resnet_folder + "/result_4.txt");
  fs::create_directory_symlink("/etc", root + "/results/etc");
  const SubmissionReview review = review_submission(root, testing::ruleset_1_1());
  const std::string findings = all_findings(review);
  EXPECT_EQ(findings.find("passwd"), std::string::npos) << findings;
  EXPECT_NE(find_finding(review.findings, Severity::kWarning, "a symbolic link; not followed"), nullptr) << findings;
  const BenchmarkReview& resnet = benchmark(review, "resnet");
  EXPECT_NE(find_finding(resnet.findings, Severity::kError, "resnet needs 5 runs; found 4"), nullptr) << findings;
  EXPECT_NE(findings.find(resnet_folder + "/result_4.txt: warning: a symbolic link; not followed"), std::string::npos)
      << findings;
}

// The v1.1 seed checker: the same seed logged from the same source line by two runs is an error.
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

// ... but it tells seeds apart by the file and line that logged them, so one from another line passes it.
TEST_F(NvidiaSubmission, RepeatedSeedFromAnotherSourceLinePassesTheSeedChecker) {
  const std::string root = copy();
  const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_1.txt";
  std::string text = testing::read_text(path);
  const std::string logged = "\"key\": \"seed\", \"value\": 14538";
  const size_t seed = text.find(logged);
  ASSERT_NE(seed, std::string::npos);
  const size_t lineno = text.find("\"lineno\": ", seed) + 11;
  text.replace(lineno, text.find('}', lineno) - lineno, "99999");
  text.replace(seed, logged.size(), "\"key\": \"seed\", \"value\": 16487");  // result_0's seed
  testing::write_text(path, text);
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_TRUE(resnet.valid()) << dump(resnet.findings);
  EXPECT_EQ(find_finding(resnet.findings, Severity::kError, "seed"), nullptr) << dump(resnet.findings);
}

// Once a run has logged a seed, every later run must log one; the checker does not look back at runs
// before the first seeded one.
TEST_F(NvidiaSubmission, SeedMissingAfterASeededRunIsAnError) {
  const auto remove_seed = [](const std::string& path) {
    std::string text = testing::read_text(path);
    const size_t seed = text.find("\"key\": \"seed\"");
    const size_t start = text.rfind('\n', seed) + 1;
    text.erase(start, text.find('\n', seed) + 1 - start);
    testing::write_text(path, text);
  };
  const std::string root = copy();
  const std::string second = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_2.txt";
  remove_seed(second);
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  const Finding* finding = find_finding(resnet.findings, Severity::kError, "logs no seed, but result_0.txt does");
  ASSERT_NE(finding, nullptr) << dump(resnet.findings);
  EXPECT_EQ(finding->file, second);

  const std::string first_root = scratch_ / "first";
  testing::copy_nvidia_results(first_root, {{kMxnet, "resnet"}});
  remove_seed(first_root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_0.txt");
  const BenchmarkReview first = benchmark(review_submission(first_root, testing::ruleset_1_1()), "resnet");
  EXPECT_TRUE(first.valid()) << dump(first.findings);
  EXPECT_NE(find_finding(first.findings, Severity::kWarning, "result_0.txt log no seed but result_1.txt does"),
            nullptr)
      << dump(first.findings);
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
  EXPECT_NE(findings.find("notes.txt: warning: not a result_*.txt log; ignored"), std::string::npos) << findings;
  EXPECT_NE(findings.find("benchmarks/resnet: warning: missing"), std::string::npos) << findings;
}

// The v1.1 package checker wants exactly the required number of result files; the tools check a log's
// benchmark from the log and score it in its folder, so a mismatch is a warning (an error with --strict).
TEST_F(NvidiaSubmission, ExtraLogInABenchmarkFolder) {
  const std::string root = copy();
  fs::copy_file(root + "/results/dgxa100_ngc21.09_pytorch/bert/result_0.txt",
                root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_5.txt");
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_EQ(resnet.verdict(), Verdict::kInvalid);
  EXPECT_NE(
      find_finding(resnet.findings, Severity::kError, "6 runs found; the v1.1 package checker requires exactly 5"),
      nullptr)
      << dump(resnet.findings);
  EXPECT_NE(find_finding(resnet.runs.back().findings, Severity::kWarning,
                         "submission_benchmark is 'bert' but the log is in resnet/"),
            nullptr)
      << dump(resnet.runs.back().findings);
  ReviewOptions strict;
  strict.checks.strict = true;
  const BenchmarkReview strict_resnet = benchmark(review_submission(root, testing::ruleset_1_1(), strict), "resnet");
  EXPECT_NE(find_finding(strict_resnet.runs.back().findings, Severity::kError,
                         "submission_benchmark is 'bert' but the log is in resnet/"),
            nullptr)
      << dump(strict_resnet.runs.back().findings);
}

// The official tools count every result_*.txt: submitters published result_run1.txt and
// result_<timestamp>_<n>.txt logs. Numbered logs come first, in number order, then the others by name.
TEST_F(NvidiaSubmission, AResultLogNeedNotBeNumbered) {
  const std::string root = copy();
  const std::string folder = root + "/results/dgxa100_ngc21.09_mxnet/resnet/";
  fs::rename(folder + "result_0.txt", folder + "result_run10.txt");
  fs::rename(folder + "result_1.txt", folder + "result_1638316800_1.txt");
  const BenchmarkReview resnet = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_TRUE(resnet.valid()) << dump(resnet.findings);
  ASSERT_EQ(resnet.runs.size(), 5u);
  EXPECT_EQ(fs::path(resnet.runs[3].path).filename(), "result_1638316800_1.txt");
  EXPECT_EQ(fs::path(resnet.runs[4].path).filename(), "result_run10.txt");
}

// The package checker allows one log that fails the compliance checker (UNet3D: four) under olympic
// scoring; the summarizer drops it as the slowest run. Two are too many.
TEST_F(NvidiaSubmission, OneFailedLogIsAllowedTwoAreNot) {
  const std::string root = copy();
  const auto break_log = [&](const std::string& run) {
    const std::string path = root + "/results/dgxa100_ngc21.09_mxnet/resnet/" + run;
    std::string text = testing::read_text(path);
    const std::string epsilon = "\"key\": \"lars_epsilon\", \"value\": 0";
    ASSERT_NE(text.find(epsilon), std::string::npos);
    text.replace(text.find(epsilon), epsilon.size(), "\"key\": \"lars_epsilon\", \"value\": 0.1");
    testing::write_text(path, text);
  };
  break_log("result_3.txt");
  const BenchmarkReview one = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_FALSE(one.runs[3].compliant());
  EXPECT_EQ(one.verdict(), Verdict::kValid) << dump(one.findings);
  EXPECT_NE(find_finding(one.findings, Severity::kWarning, "the v1.1 package checker allows 1 failed log(s)"), nullptr)
      << dump(one.findings);
  break_log("result_1.txt");
  const BenchmarkReview two = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  EXPECT_EQ(two.verdict(), Verdict::kInvalid);
  EXPECT_NE(find_finding(two.findings, Severity::kError, "2 of 5 runs did not converge or failed their checks"),
            nullptr)
      << dump(two.findings);
}

// A failed RCP check is its own verdict, which --rcp-bypass turns into a pass with a warning.
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
  EXPECT_EQ(failed.verdict(), Verdict::kRcpFailed);
  ASSERT_TRUE(failed.rcp.has_value());
  EXPECT_EQ(failed.rcp->summary(), "RCP found, RCP test FAILED");
  EXPECT_NE(failed.rcp->explanation.find("mean 31.0000 < minimum 34.55"), std::string::npos)
      << failed.rcp->explanation;
  ReviewOptions options;
  options.rcp_bypass = true;
  const BenchmarkReview bypassed = benchmark(review_submission(root, testing::ruleset_1_1(), options), "resnet");
  EXPECT_EQ(bypassed.verdict(), Verdict::kValid) << dump(bypassed.findings);
  EXPECT_EQ(bypassed.rcp->summary(), "RCP found passed using rcp_bypass, RCP test PASSED");
  EXPECT_NE(find_finding(bypassed.findings, Severity::kWarning, "accepted with --rcp-bypass"), nullptr);
}

// From 4.0.0 a package_checker_params file in a system or benchmark folder turns the RCP or seed bypass on,
// but only as a last line without a newline (the checker compares readlines() lines). The mechanism is
// tested on v1.1 results with the ruleset told where the file is.
TEST_F(NvidiaSubmission, APackageCheckerParamsLineWithoutNewlineBypassesTheRcpCheck) {
  const std::string root = copy();
  const std::string system = root + "/results/dgxa100_ngc21.09_mxnet";
  for (int i = 0; i < 5; ++i) {
    const std::string path = system + "/resnet/result_" + std::to_string(i) + ".txt";
    std::string text = testing::read_text(path);
    const size_t at = text.rfind("\"key\": \"eval_accuracy\", \"value\": 0.7");
    text.replace(text.find("\"epoch_num\": 35", at), 15, "\"epoch_num\": 31");
    testing::write_text(path, text);
  }
  Ruleset ruleset = testing::ruleset_1_1();
  ruleset.package.params_file = "package_checker_params";
  testing::write_text(system + "/package_checker_params", "rcp-bypass\n");
  const BenchmarkReview ignored = benchmark(review_submission(root, ruleset), "resnet");
  EXPECT_EQ(ignored.verdict(), Verdict::kRcpFailed);
  const SubmissionReview with_newline = review_submission(root, ruleset);
  EXPECT_NE(all_findings(with_newline)
                .find("'rcp-bypass' is ignored: the v1.1 package checker compares the line "
                      "with its newline"),
            std::string::npos)
      << all_findings(with_newline);

  testing::write_text(system + "/package_checker_params", "seed-checker-bypass\nrcp-bypass");
  const BenchmarkReview bypassed = benchmark(review_submission(root, ruleset), "resnet");
  EXPECT_EQ(bypassed.verdict(), Verdict::kValid) << dump(bypassed.findings);
  EXPECT_NE(find_finding(bypassed.findings, Severity::kWarning, "accepted with package_checker_params rcp-bypass"),
            nullptr)
      << dump(bypassed.findings);
  EXPECT_EQ(all_findings(review_submission(root, ruleset)).find("not a benchmark folder"), std::string::npos);

  fs::remove(system + "/package_checker_params");
  testing::write_text(system + "/resnet/package_checker_params", "rcp-bypass");
  EXPECT_EQ(benchmark(review_submission(root, ruleset), "resnet").verdict(), Verdict::kValid);
  EXPECT_EQ(benchmark(review_submission(root, testing::ruleset_1_1()), "resnet").verdict(), Verdict::kRcpFailed);
}

// From 4.1.0 every run logs a seed; in every round a log the seed checker's parser cannot read fails it, and
// a seed-checker-bypass line skips the check.
TEST_F(NvidiaSubmission, SeedRulesOfLaterRounds) {
  const std::string root = copy();
  const std::string folder = root + "/results/dgxa100_ngc21.09_mxnet/resnet";
  std::string first = testing::read_text(folder + "/result_0.txt");
  const size_t seed = first.find("\"key\": \"seed\"");
  const size_t start = first.rfind('\n', seed) + 1;
  first.erase(start, first.find('\n', seed) + 1 - start);
  testing::write_text(folder + "/result_0.txt", first);
  Ruleset ruleset = testing::ruleset_1_1();
  EXPECT_TRUE(benchmark(review_submission(root, ruleset), "resnet").valid());
  ruleset.package.seed_in_every_run = true;
  const BenchmarkReview every_run = benchmark(review_submission(root, ruleset), "resnet");
  EXPECT_NE(
      find_finding(every_run.findings, Severity::kError, "logs no seed; the v1.1 seed checker wants one in every run"),
      nullptr)
      << dump(every_run.findings);
  ruleset.package.params_file = "package_checker_params";
  testing::write_text(folder + "/package_checker_params", "seed-checker-bypass");
  const BenchmarkReview bypassed = benchmark(review_submission(root, ruleset), "resnet");
  EXPECT_TRUE(bypassed.valid()) << dump(bypassed.findings);
  EXPECT_NE(find_finding(bypassed.findings, Severity::kWarning, "seed check bypassed"), nullptr);

  const std::string third = folder + "/result_3.txt";
  testing::write_text(third, testing::read_text(third) + ":::MLLOG {\"broken\n");
  const BenchmarkReview unparsable = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  const Finding* finding = find_finding(unparsable.findings, Severity::kError, "cannot read this log's seeds");
  ASSERT_NE(finding, nullptr) << dump(unparsable.findings);
  EXPECT_EQ(finding->file, third);
}

// From 5.0.0 a benchmark folder with power/ needs each run's power/<run>/ with node_<i> and sw_<i> files
// numbered from 0, and as many as most runs; a run that breaks this counts as a failed log.
TEST_F(NvidiaSubmission, PowerLogsAreCheckedLikeThe50PowerChecker) {
  const std::string root = copy();
  const std::string folder = root + "/results/dgxa100_ngc21.09_mxnet/resnet";
  const auto power_files = [&](int run, std::initializer_list<const char*> files) {
    const std::string run_folder = folder + "/power/result_" + std::to_string(run);
    fs::create_directories(run_folder);
    for (const char* file : files) testing::write_text(run_folder + "/" + file, "");
  };
  for (int run = 0; run < 5; ++run) power_files(run, {"node_0.txt", "sw_0.txt"});
  Ruleset ruleset = testing::ruleset_1_1();
  ruleset.package.power_folder = "power";
  const BenchmarkReview complete = benchmark(review_submission(root, ruleset), "resnet");
  EXPECT_TRUE(complete.valid()) << dump(complete.findings);
  EXPECT_EQ(all_findings(review_submission(root, ruleset)).find("not a result_*.txt"), std::string::npos);

  fs::remove_all(folder + "/power/result_0");
  power_files(2, {"node_1.txt"});  // two node files where most runs have one
  const SubmissionReview review = review_submission(root, ruleset);
  const BenchmarkReview& shifted = benchmark(review, "resnet");
  const auto run_errors = [&](int run) { return dump(shifted.runs[run].findings); };
  EXPECT_NE(run_errors(0).find("no " + folder + "/power/result_0/"), std::string::npos) << run_errors(0);
  // The checker names the run at the differing count's position among all runs: result_1, not result_2.
  EXPECT_NE(run_errors(1).find("count of node files differs from most runs' 1"), std::string::npos) << run_errors(1);
  EXPECT_EQ(run_errors(2).find("power checker"), std::string::npos) << run_errors(2);
  EXPECT_EQ(shifted.verdict(), Verdict::kInvalid);  // two failed logs

  fs::remove_all(folder + "/power");
  power_files(0, {"node_0.txt", "sw_0.txt"});
  for (int run = 1; run < 5; ++run) power_files(run, {"node_0.txt", "sw_0.txt"});
  power_files(4, {"node_x.txt"});
  EXPECT_NE(all_findings(review_submission(root, ruleset)).find("power checker stops here"), std::string::npos);
}

// Up to 2.1.0 the rcp_checker keeps the last global_batch_size it reads, so runs at different batch sizes are
// compared at the one of the file listed last; from 3.0.0 they fail.
TEST_F(NvidiaSubmission, RunsAtDifferentBatchSizesFollowTheRoundsRcpChecker) {
  const std::string root = copy();
  const std::string odd = root + "/results/dgxa100_ngc21.09_mxnet/resnet/result_2.txt";
  std::string text = testing::read_text(odd);
  const std::string batch = "\"key\": \"global_batch_size\", \"value\": 3264";
  text.replace(text.find(batch), batch.size(), "\"key\": \"global_batch_size\", \"value\": 1632");
  testing::write_text(odd, text);
  const BenchmarkReview listed = benchmark(review_submission(root, testing::ruleset_1_1()), "resnet");
  const Finding* warning =
      find_finding(listed.findings, Severity::kWarning, "the runs log different global_batch_size");
  ASSERT_NE(warning, nullptr) << dump(listed.findings);
  ASSERT_TRUE(listed.rcp && listed.rcp->reference) << dump(listed.findings);
  const bool odd_last = warning->message.find("here result_2.txt's") != std::string::npos;
  EXPECT_EQ(listed.rcp->reference->batch_size, odd_last ? 1632 : 3264) << warning->message;

  Ruleset from_three = testing::ruleset_1_1();
  from_three.rcp.batch_size_of_last_file_listed = false;
  const BenchmarkReview refused = benchmark(review_submission(root, from_three), "resnet");
  EXPECT_EQ(refused.rcp->outcome, "global_batch_size differs between runs");
  EXPECT_EQ(refused.verdict(), Verdict::kRcpFailed);
}

TEST(LooseResults, FoldersWithoutResultsAreReviewedAsLooseResults) {
  testing::ScratchFolder scratch;
  const std::string mini_log = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  const std::string preset_line = "\"key\": \"trainbench_preset\", \"value\": \"mini\"";
  std::string tiny_log = mini_log;
  tiny_log.replace(tiny_log.find(preset_line), preset_line.size(),
                   "\"key\": \"trainbench_preset\", \"value\": \"tiny\"");
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
  // Identical copies share one seed from one source line; the mini runs are held to the shipped mini RCP
  // table (batch 128 only).
  EXPECT_NE(find_finding(mini.findings, Severity::kError, "seed 42 is also used by result_0.txt"), nullptr)
      << dump(mini.findings);
  ASSERT_TRUE(mini.rcp.has_value());
  EXPECT_EQ(mini.rcp->summary(), "Missing RCP, please submit RCP with BS = 3264, RCP test FAILED");
  // A preset without a table of its own is reviewed without an RCP check, with a warning.
  const BenchmarkReview& tiny = review.systems[1].benchmarks.at(0);
  EXPECT_NE(find_finding(tiny.findings, Severity::kWarning, "has no RCP table rcps_resnet_tiny.json"), nullptr)
      << dump(tiny.findings);
  EXPECT_THROW(review_submission(scratch / "nowhere", testing::ruleset_1_1()), Error);
}

}  // namespace
}  // namespace trainbench::review
