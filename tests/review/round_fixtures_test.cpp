// One trimmed published log per verdict and benchmark of every round, 1.0 to 5.1 (tests/review/rounds, made by
// scripts/make-round-fixtures.py; see its README.md): the review with the round's ruleset must give the verdict
// the round's official MLPerf compliance checker gave on the same file, as verdicts.tsv records it. The official
// checker passes a log exactly when the review finds no error and an evaluation reached the target.
#include <gtest/gtest.h>

#include <cctype>
#include <exception>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "review/compliance.h"
#include "test_support.h"

namespace trainbench::review {
namespace {

using testing::dump;

// A row of verdicts.tsv: round, ruleset, fixture (relative to tests/review/rounds), verdict, official message.
struct OfficialVerdict {
  std::string round, ruleset, fixture, verdict, message;
};

void PrintTo(const OfficialVerdict& row, std::ostream* out) { *out << row.fixture << " (" << row.verdict << ")"; }

std::string rounds_path(const std::string& relative) { return testing::test_path("rounds/" + relative); }

std::vector<OfficialVerdict> official_verdicts() {
  std::vector<OfficialVerdict> rows;
  std::ifstream in(rounds_path("verdicts.tsv"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    std::istringstream fields(line);
    OfficialVerdict row;
    std::getline(fields, row.round, '\t');
    std::getline(fields, row.ruleset, '\t');
    std::getline(fields, row.fixture, '\t');
    std::getline(fields, row.verdict, '\t');
    std::getline(fields, row.message);
    rows.push_back(row);
  }
  return rows;
}

const Ruleset& ruleset(const std::string& version) {
  static std::map<std::string, Ruleset> loaded;
  auto found = loaded.find(version);
  if (found == loaded.end()) found = loaded.emplace(version, load_ruleset(version)).first;
  return found->second;
}

// "<benchmark>_no_run_stop.txt" is not kept: it is "<benchmark>_pass.txt" less its run_stop line, the bytes
// scripts/make-round-fixtures.py gave the official checker. Written to `scratch` and returned; other
// fixtures are read in place.
std::string fixture_path(const OfficialVerdict& row, const testing::ScratchFolder& scratch) {
  const std::string suffix = "_no_run_stop.txt";
  if (row.fixture.size() < suffix.size() ||
      row.fixture.compare(row.fixture.size() - suffix.size(), suffix.size(), suffix) != 0)
    return rounds_path(row.fixture);
  const std::string pass = row.fixture.substr(0, row.fixture.size() - suffix.size()) + "_pass.txt";
  static const std::regex run_stop(R"("key"\s*:\s*"run_stop")");
  std::istringstream lines(testing::read_text(rounds_path(pass)));
  std::string derived;
  for (std::string line; std::getline(lines, line);)
    if (!std::regex_search(line, run_stop)) derived += line + "\n";
  const std::string path = scratch / "result_0.txt";
  testing::write_text(path, derived);
  return path;
}

class RoundFixtures : public ::testing::TestWithParam<OfficialVerdict> {};

TEST_P(RoundFixtures, ReviewGivesTheOfficialVerdict) {
  const OfficialVerdict& row = GetParam();
  ASSERT_TRUE(row.verdict == "pass" || row.verdict == "fail")
      << "verdicts.tsv: " << row.fixture << ": verdict '" << row.verdict << "'";
  const testing::ScratchFolder scratch;
  const std::string path = fixture_path(row, scratch);
  RunReview review;
  try {
    review = review_log_file(path, ruleset(row.ruleset));
  } catch (const std::exception& e) {
    FAIL() << "fixture " << path << "\nofficial (" << row.ruleset << "): " << row.verdict
           << (row.message.empty() ? "" : ": " + row.message) << "\ntrainbench refused the log: " << e.what();
  }
  const bool passes = review.compliant() && review.target_reached;
  EXPECT_EQ(passes, row.verdict == "pass")
      << "fixture " << path << "\nofficial (" << row.ruleset << "): " << row.verdict
      << (row.message.empty() ? "" : ": " + row.message) << "\ntrainbench: compliant " << review.compliant()
      << ", target_reached " << review.target_reached << " (" << review.target_description << ")\n"
      << dump(review.findings);
}

std::string row_name(const ::testing::TestParamInfo<OfficialVerdict>& info) {
  // "3.1/gpt3_no_run_stop.txt" -> "v3_1_gpt3_no_run_stop"
  std::string name = "v" + info.param.fixture.substr(0, info.param.fixture.rfind('.'));
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// No instantiation prefix: the tests are RoundFixtures.ReviewGivesTheOfficialVerdict/v<round>_<fixture>.
INSTANTIATE_TEST_SUITE_P(, RoundFixtures, ::testing::ValuesIn(official_verdicts()), row_name);

TEST(RoundFixturesTable, EveryRulesetHasAPassAndAFailRow) {
  std::map<std::string, std::set<std::string>> verdicts;  // ruleset -> verdicts of its rows
  for (const auto& row : official_verdicts()) {
    verdicts[row.ruleset].insert(row.verdict);
    EXPECT_EQ(row.ruleset, row.round + ".0") << row.fixture;
    EXPECT_EQ(row.fixture.rfind(row.round + "/", 0), 0u)
        << row.fixture << " is not in the folder of round " << row.round;
  }
  for (const char* version : {"1.0.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0", "4.0.0", "4.1.0", "5.0.0", "5.1.0"}) {
    EXPECT_TRUE(verdicts[version].count("pass")) << "no pass row for ruleset " << version;
    EXPECT_TRUE(verdicts[version].count("fail")) << "no fail row for ruleset " << version;
  }
}

}  // namespace
}  // namespace trainbench::review
