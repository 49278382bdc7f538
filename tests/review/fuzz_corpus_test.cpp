// Replays the fuzzer's corpus (fuzz/corpus/log_parser) through the parser, the v1.1 checks and a later
// round's official rule files (run by the rule-code interpreter), so inputs that once broke something stay
// covered by the normal test run.
#include <gtest/gtest.h>

#include <filesystem>

#include "review/compliance.h"
#include "support/fuzz_replay.h"
#include "test_support.h"

extern "C" int fuzz_system_description(const uint8_t* data, size_t size);
extern "C" int fuzz_submission(const uint8_t* data, size_t size);

namespace trainbench::review {
namespace {

TEST(FuzzCorpus, EveryInputParsesAndChecksWithoutCrashing) {
  size_t inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(REVIEW_FUZZ_CORPUS_DIR)) {
    if (!entry.is_regular_file()) continue;
    ++inputs;
    const std::string data = testing::read_text(entry.path().string());
    const ParsedLog log = parse_log_text(data, entry.path().filename().string());
    static const Ruleset round_4_0 = load_ruleset("4.0.0");
    for (const Ruleset* ruleset : {&testing::ruleset_1_1(), &round_4_0})
      for (const auto& finding : review_log(log, *ruleset).findings)
        EXPECT_EQ(printable(finding.message, 100000), finding.message) << entry.path();
  }
  EXPECT_GT(inputs, 10u) << "the corpus is missing";
}

TEST(FuzzCorpus, EverySystemDescriptionIsCheckedWithPrintableFindings) {
  EXPECT_GT(trainbench::testing::replay_fuzz_corpus(REVIEW_FUZZ_CORPUS_DIR "/../system_description", fuzz_system_description), 10u);
}

TEST(FuzzCorpus, EverySubmissionTreeIsReviewedWithPrintableFindings) {
  EXPECT_GT(trainbench::testing::replay_fuzz_corpus(REVIEW_FUZZ_CORPUS_DIR "/../submission", fuzz_submission), 1u);
}

}  // namespace
}  // namespace trainbench::review
