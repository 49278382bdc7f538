// The published v1.1 results in shared/data/mlperf-training-v1.1 (NVIDIA, Graphcore, Dell's system
// descriptions) passed the official tools and the review committee. The review must give the official
// verdicts on them: the RCP checker's verdict per folder as expected-rcp-verdicts.tsv lists it in both BERT
// conventions, no compliance error on any log, every system description accepted, every score reproduced.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "review/submission.h"
#include "test_support.h"

namespace trainbench::review {
namespace {

using testing::dump;

enum class Mode { kDefault, kBertTrainSamples, kRcpBypass };

bool data_present() { return std::filesystem::is_directory(testing::v11_data_path("NVIDIA/results")); }

// One review per submitter and mode, shared by the tests (a tree of 285 logs takes about a second).
const SubmissionReview& reviewed(const std::string& org, Mode mode) {
  static std::map<std::pair<std::string, Mode>, SubmissionReview> cache;
  const auto key = std::make_pair(org, mode);
  auto found = cache.find(key);
  if (found == cache.end()) {
    ReviewOptions options;
    options.checks.bert_train_samples = mode == Mode::kBertTrainSamples;
    options.rcp_bypass = mode == Mode::kRcpBypass;
    found = cache.emplace(key, review_submission(testing::v11_data_path(org), testing::ruleset_1_1(), options)).first;
  }
  return found->second;
}

// "NVIDIA/results/<system>/<benchmark>" -> its review.
std::map<std::string, const BenchmarkReview*> benchmarks_by_folder(Mode mode) {
  std::map<std::string, const BenchmarkReview*> folders;
  const std::string prefix = testing::v11_data_path("");
  for (const char* org : {"NVIDIA", "Graphcore"})
    for (const auto& system : reviewed(org, mode).systems)
      for (const auto& benchmark : system.benchmarks) folders[benchmark.directory.substr(prefix.size())] = &benchmark;
  return folders;
}

struct ExpectedRcp {
  std::string folder, by_epoch, by_train_samples;
};

std::vector<ExpectedRcp> expected_rcp_verdicts() {
  std::ifstream in(testing::v11_data_path("expected-rcp-verdicts.tsv"));
  std::vector<ExpectedRcp> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    ExpectedRcp row;
    std::getline(fields, row.folder, '\t');
    std::getline(fields, row.by_epoch, '\t');
    std::getline(fields, row.by_train_samples, '\t');
    rows.push_back(row);
  }
  return rows;
}

class PublishedV11Results : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!data_present()) GTEST_SKIP() << "no data at " << testing::v11_data_path("");
  }
};

TEST_F(PublishedV11Results, RcpVerdictsAreTheOfficialCheckersInBothBertConventions) {
  const auto rows = expected_rcp_verdicts();
  ASSERT_EQ(rows.size(), 36u);
  const auto by_epoch = benchmarks_by_folder(Mode::kDefault);
  const auto by_samples = benchmarks_by_folder(Mode::kBertTrainSamples);
  EXPECT_EQ(by_epoch.size(), rows.size()) << "the file lists every NVIDIA and Graphcore folder";
  int compared = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.folder);
    ASSERT_TRUE(by_epoch.count(row.folder));
    ASSERT_TRUE(by_epoch.at(row.folder)->rcp.has_value());
    EXPECT_EQ(by_epoch.at(row.folder)->rcp->summary(), row.by_epoch) << by_epoch.at(row.folder)->rcp->explanation;
    // The flag only changes BERT; the file leaves the other benchmarks' second column empty.
    const std::string with_flag = row.by_train_samples.empty() ? row.by_epoch : row.by_train_samples;
    EXPECT_EQ(by_samples.at(row.folder)->rcp->summary(), with_flag) << by_samples.at(row.folder)->rcp->explanation;
    compared += 2;
  }
  EXPECT_EQ(compared, 72);
}

TEST_F(PublishedV11Results, EveryLogPassesTheComplianceChecks) {
  int logs = 0;
  for (const char* org : {"NVIDIA", "Graphcore"})
    for (const auto& system : reviewed(org, Mode::kDefault).systems)
      for (const auto& benchmark : system.benchmarks)
        for (const auto& run : benchmark.runs) {
          ++logs;
          EXPECT_TRUE(run.compliant()) << dump(run.findings);
        }
  EXPECT_EQ(logs, 365);
}

// The END checks of the official closed_ssd, closed_maskrcnn and closed_unet3d YAML files: NVIDIA's SSD and
// Mask R-CNN logs name exactly the listed tensors, so they pass without a warning, and its U-Net3D logs have
// no weights_initialization lines, so they pass only with the warning, as with the public checker. (Other
// published logs name tensors their own way, e.g. ResNet's bn_sc on multi-node systems, and are warned too.)
TEST_F(PublishedV11Results, WeightsInitializationWarningsOfSsdMaskRcnnAndUnet3dAreTheOfficialCheckers) {
  std::map<std::string, int> logs, warned;
  for (const auto& system : reviewed("NVIDIA", Mode::kDefault).systems)
    for (const auto& benchmark : system.benchmarks)
      for (const auto& run : benchmark.runs) {
        if (run.benchmark != "ssd" && run.benchmark != "maskrcnn" && run.benchmark != "unet3d") continue;
        ++logs[run.benchmark];
        if (testing::find_finding(run.findings, Severity::kWarning, "weights_initialization")) ++warned[run.benchmark];
        if (run.benchmark == "unet3d")
          EXPECT_NE(testing::find_finding(run.findings, Severity::kWarning, "no 'weights_initialization' lines"), nullptr)
              << run.path << ": " << dump(run.findings);
      }
  EXPECT_GE(logs["ssd"], 5);
  EXPECT_GE(logs["maskrcnn"], 5);
  EXPECT_GE(logs["unet3d"], 40);
  EXPECT_EQ(warned["ssd"], 0);
  EXPECT_EQ(warned["maskrcnn"], 0);
  EXPECT_EQ(warned["unet3d"], logs["unet3d"]);
}

TEST_F(PublishedV11Results, EverySystemDescriptionIsAccepted) {
  int descriptions = 0;
  for (const char* org : {"NVIDIA", "Graphcore", "Dell"})
    for (const auto& system : reviewed(org, Mode::kDefault).systems) {
      if (system.description_path.empty()) continue;
      ++descriptions;
      EXPECT_FALSE(has_errors(system.findings)) << dump(system.findings);
    }
  EXPECT_EQ(descriptions, 20 + 10 + 12);
}

// The committee accepted every one of these results, RCP failures with the bypass: none is a missing RCP.
TEST_F(PublishedV11Results, WithTheCommitteesBypassEveryResultIsValid) {
  for (const char* org : {"NVIDIA", "Graphcore"})
    for (const auto& system : reviewed(org, Mode::kRcpBypass).systems)
      for (const auto& benchmark : system.benchmarks) {
        std::string reasons;
        for (const auto& reason : benchmark.invalid_reasons()) reasons += reason + "\n";
        EXPECT_EQ(benchmark.verdict(), Verdict::kValid) << benchmark.directory << "\n" << reasons;
      }
  // Without it, exactly the folders whose closed-division RCP check fails by default are "RCP FAILED".
  std::set<std::string> rcp_failed, expected;
  for (const auto& [folder, review] : benchmarks_by_folder(Mode::kDefault))
    if (review->verdict() == Verdict::kRcpFailed) rcp_failed.insert(folder);
  for (const auto& row : expected_rcp_verdicts())
    if (row.by_epoch.find("FAILED") != std::string::npos && row.folder.find("-open/") == std::string::npos &&
        row.folder.find("/minigo") == std::string::npos)
      expected.insert(row.folder);
  EXPECT_EQ(rcp_failed, expected);
}

// Published scores: NVIDIA's summarizer.csv (shared data README), and the headline tables of
// shared/reference/training-rules.md section 6, which give three decimals.
TEST_F(PublishedV11Results, PublishedScoresAreReproduced) {
  const std::vector<std::tuple<std::string, double, double>> published = {
      {"NVIDIA/results/dgxa100_ngc21.09_mxnet/resnet", 29.146589, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_pytorch/bert", 20.003233, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_mxnet/ssd", 8.258344, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_pytorch/maskrcnn", 46.167444, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_mxnet/unet3d", 25.524379, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_pytorch/rnnt", 34.243404, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_tensorflow/minigo", 264.867515, 5e-7},
      {"NVIDIA/results/dgxa100_ngc21.09_merlin_hugectr/dlrm", 1.709, 5e-4},
      {"NVIDIA/results/dgxa100_n540_ngc21.09_mxnet/resnet", 0.347, 5e-4},
      {"NVIDIA/results/dgxa100_n540_ngc21.09_pytorch/bert", 0.226, 5e-4},
      {"NVIDIA/results/dgxa100_n14_ngc21.09_merlin_hugectr/dlrm", 0.633, 5e-4 + 1e-9},
      {"NVIDIA/results/dgxa100_n51_ngc21.09_pytorch/maskrcnn", 3.242, 5e-4},
      {"NVIDIA/results/dgxa100_n128_ngc21.09_mxnet/ssd", 0.454, 5e-4},
      {"NVIDIA/results/dgxa100_n192_ngc21.09_pytorch/rnnt", 2.375, 5e-4},
      {"NVIDIA/results/dgxa100_n96_ngc21.09_mxnet/unet3d", 1.373, 5e-4},
      {"NVIDIA/results/dgxa100_n224_ngc21.09_tensorflow/minigo", 15.465, 5e-4},
      {"Graphcore/results/ipu-pod256-TF1/resnet", 3.795, 5e-4},
  };
  const auto folders = benchmarks_by_folder(Mode::kDefault);
  for (const auto& [folder, minutes, tolerance] : published) {
    SCOPED_TRACE(folder);
    ASSERT_TRUE(folders.count(folder));
    const auto& score = folders.at(folder)->score.mean_minutes;
    ASSERT_TRUE(score.has_value());
    EXPECT_NEAR(*score, minutes, tolerance);
  }
}

}  // namespace
}  // namespace trainbench::review
