// Which round reviews a log: trainbench's own logs the round trainbench implements, anyone else's the
// first round published after the log ran that has its benchmark; logs of two rounds, or a dated log under
// another round, are refused by name.
#include <gtest/gtest.h>

#include "review/ruleset_choice.h"
#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

// A log that ran at `time_ms` (ms since 1970) naming `benchmark`, optionally written by trainbench.
std::string write_log(const testing::ScratchFolder& folder, const std::string& name, double time_ms,
                      const std::string& benchmark, bool trainbench = false) {
  const auto line = [&](const std::string& key, const std::string& value) {
    return ":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(static_cast<long long>(time_ms)) +
           ", \"event_type\": \"POINT_IN_TIME\", \"key\": \"" + key + "\", \"value\": " + value +
           ", \"metadata\": {}}\n";
  };
  const std::string path = folder / name;
  testing::write_text(path, line("submission_benchmark", "\"" + benchmark + "\"") +
                                (trainbench ? line("trainbench_preset", "\"mini\"") : "") + line("run_start", "null"));
  return path;
}

constexpr double kMay2022 = 1651363200000.0;   // 2022-05-01
constexpr double kOct2023 = 1696118400000.0;   // 2023-10-01
constexpr double kJune2026 = 1780272000000.0;  // 2026-06-01, after every published round here

TEST(RoundOfLog, AnOfficialLogBelongsToTheFirstRoundPublishedAfterItRan) {
  testing::ScratchFolder folder;
  const LoggedBenchmark may2022 = identify_log(write_log(folder, "a.txt", kMay2022, "resnet"));
  EXPECT_EQ(may2022.date, "2022-05-01");
  EXPECT_FALSE(may2022.trainbench);
  EXPECT_EQ(round_of_log(may2022), "2.0.0");
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "b.txt", kOct2023, "gpt3"))), "3.1.0");
  // resnet left after 4.0.0; a later resnet log is 4.0.0's, the newest round with it.
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "c.txt", kJune2026, "resnet"))), "4.0.0");
  // Newer than every published round: the oldest unpublished round with the benchmark.
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "d.txt", kJune2026, "flux1"))), "6.0.0");
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "e.txt", kJune2026, "qwen35_397b_grpo"))), "6.1.0");
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "f.txt", kMay2022, "no_such_benchmark"))), "");
}

TEST(RoundOfLog, TrainbenchsOwnAndUndatedLogsAreReviewedWhereTrainbenchImplementsTheBenchmark) {
  testing::ScratchFolder folder;
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "a.txt", kJune2026, "resnet", true))), "1.1.0");
  EXPECT_EQ(round_of_log(identify_log(write_log(folder, "b.txt", kJune2026, "gpt3", true))), "3.0.0");
  const LoggedBenchmark synthetic = identify_log(write_log(folder, "c.txt", 1002, "bert"));
  EXPECT_EQ(synthetic.date, "");
  EXPECT_EQ(round_of_log(synthetic), "1.1.0");
}

TEST(RoundOfLog, ASubmissionMayHoldOlderRunsAndIsReviewedUnderTheRoundAfterItsNewest) {
  testing::ScratchFolder folder;
  const std::string v20 = write_log(folder, "a.txt", kMay2022, "resnet");
  const std::string v31 = write_log(folder, "b.txt", kOct2023, "resnet");
  EXPECT_EQ(choose_ruleset_version(logged_benchmarks({v20})), "2.0.0");
  // A result submitted again to a later round: the earliest round both can be of.
  EXPECT_EQ(choose_ruleset_version(logged_benchmarks({v20, v31})), "3.1.0");
  EXPECT_NO_THROW(refuse_logs_of_other_rounds(load_ruleset("3.1.0"), logged_benchmarks({v20})));
}

TEST(RoundOfLog, LogsNoOneRoundCanHoldOrALogNewerThanItsRoundAreRefusedByName) {
  testing::ScratchFolder folder;
  const std::string resnet = write_log(folder, "a.txt", kOct2023, "resnet");
  const std::string flux = write_log(folder, "b.txt", kMay2022, "flux1");
  try {
    choose_ruleset_version(logged_benchmarks({resnet, flux}));
    FAIL() << "a resnet and a flux1 log were reviewed together";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'flux1', run on 2022-05-01) can be of round 5.1.0, 6.0.0, 6.1.0"), std::string::npos)
        << message;
    EXPECT_NE(message.find("the logs mix rounds"), std::string::npos) << message;
  }
  try {
    refuse_logs_of_other_rounds(load_ruleset("2.0.0"), logged_benchmarks({resnet}));
    FAIL() << "a log that ran in 2023 was reviewed under 2.0.0";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("ran after round 2.0.0's results were published (2022-06-29)"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace trainbench::review
