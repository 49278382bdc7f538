#include "review/report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "test_support.h"
#include "util/error.h"

namespace trainbench::review {
namespace {

// Set TRAINBENCH_UPDATE_SNAPSHOTS=1 to rewrite tests/review/snapshots after an intended change, then review
// the diff.
void expect_snapshot(const std::string& name, const std::string& actual) {
  const std::string path = testing::test_path("snapshots/" + name);
  if (std::getenv("TRAINBENCH_UPDATE_SNAPSHOTS")) {
    testing::write_text(path, actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << "no snapshot " << path << "; run with TRAINBENCH_UPDATE_SNAPSHOTS=1";
  EXPECT_EQ(actual, testing::read_text(path))
      << "differs from " << path << " (TRAINBENCH_UPDATE_SNAPSHOTS=1 rewrites it)";
}

std::vector<ReportInput> two_versions() {
  std::vector<ReportInput> inputs;
  for (const char* version : {"v1", "v2"})
    inputs.push_back({version, review_submission(testing::test_path(std::string("report_input/") + version),
                                                 testing::ruleset_1_1())});
  return inputs;
}

TEST(Report, MatchesTheSnapshot) {
  const auto inputs = two_versions();
  ASSERT_TRUE(inputs[0].review.valid());
  ASSERT_TRUE(inputs[1].review.valid());
  ReportOptions options;
  options.title = "Example software v1 vs v2";
  options.compare = true;
  const ReportFiles files = render_report(inputs, options);
  expect_snapshot("report.md", files.markdown);
  expect_snapshot("report.csv", files.csv);
  expect_snapshot("comparison.csv", files.comparison_csv);
  expect_snapshot("report.html", files.html);
  // Rendering is deterministic.
  EXPECT_EQ(render_report(two_versions(), options).html, files.html);
}

// A trainbench run logs where its timed region went (trainbench_time_split); the report shows the shares.
TEST(Report, ShowsWhereEachRunsTimeWent) {
  const ReportFiles files = render_report(two_versions(), ReportOptions{});
  // v2's result_0 logs 864.322 + 10.804 + 194.473 + 0 + 10.804 = 1080.403 s, its run_start to run_stop.
  EXPECT_NE(files.markdown.find("| v2 | example\\_box | resnet | result\\_0 | 1080.4 | training compute 864.322 s (80.0%), "
                                "input wait 10.804 s (1.0%), evaluation 194.473 s (18.0%), rank wait 0.000 s (0.0%), "
                                "other 10.804 s (1.0%) | 6.1% of CPUs 0-1 (other processes 6.0%, steal 0.1%) |"),
            std::string::npos)
      << files.markdown;
  EXPECT_NE(files.html.find("<h2>Where the time went</h2>"), std::string::npos);
}

// In the HTML each run's split is a stacked bar, 360 px for the whole timed region: training compute's
// 80.0% is 288 px and starts at 0, input wait's 1.0% follows it; a part of 0 s draws nothing.
TEST(Report, DrawsEachRunsTimeSplitAsAStackedBar) {
  const std::string html = render_report(two_versions(), ReportOptions{}).html;
  const size_t bar = html.find("<svg class=\"split\"");
  ASSERT_NE(bar, std::string::npos);
  const std::string svg = html.substr(bar, html.find("</svg>", bar) - bar);
  EXPECT_NE(svg.find("<rect x=\"0.0\" y=\"0\" width=\"288.0\" height=\"18\" fill=\"#1f77b4\"><title>training "
                     "compute 864.322 s (80.0%)</title></rect><text x=\"144.0\" y=\"13\" text-anchor=\"middle\">80%</text>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<rect x=\"288.0\" y=\"0\" width=\"3.6\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("rank wait"), std::string::npos) << svg;
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1)) ++rects;
  EXPECT_EQ(rects, 4u);
}

// A run whose CPUs were busy with others past the threshold it logged is marked in the table.
TEST(Report, MarksARunWhoseCpusOthersTookPastItsThreshold) {
  testing::ScratchFolder scratch;
  std::string log = testing::read_text(testing::test_path("report_input/v2/results/example_box/resnet/result_0.txt"));
  const std::string quiet = "\"other_processes\": 129.648";
  log.replace(log.find(quiet), quiet.size(), "\"other_processes\": 500");
  testing::write_text(scratch / "box/resnet/result_0.txt", log);
  const std::string html = render_report({{"busy", review_submission(scratch.path(), testing::ruleset_1_1())}}, {}).html;
  EXPECT_NE(html.find("<span class=\"busy\">23.2% of CPUs 0-1</span><br><span class=\"muted\">other processes 23.1%, "
                      "steal 0.1%</span>"),
            std::string::npos)
      << html;
}

// A result without a score says which runs did not converge and how far each got, in the review table.
TEST(Report, ReviewTableNamesARunThatDidNotConvergeWithItsBest) {
  testing::ScratchFolder scratch;
  std::string log = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"value\": 0.55,", "\"value\": 0.45,"},
                                 {"\"status\": \"success\"", "\"status\": \"aborted\""}})
    log.replace(log.find(from), from.size(), to);
  testing::write_text(scratch / "box/resnet/result_0.txt", log);
  const ReportFiles files = render_report({{"quickstart", review_submission(scratch.path(), testing::ruleset_1_1())}}, {});
  EXPECT_NE(files.html.find("too few runs for an olympic score (1 dropped at each end)<br>result_0.txt: did not reach "
                            "eval_accuracy &gt;= 0.5 and &lt; 1: best 0.45 at epoch 8 on line 38"),
            std::string::npos)
      << files.html;
  EXPECT_NE(files.markdown.find("result\\_0.txt: did not reach eval\\_accuracy \\>= 0.5 and \\< 1: best 0.45 at epoch 8"),
            std::string::npos)
      << files.markdown;
}

TEST(Report, ComparisonGivesTheSpeedupOfTheSecondFolder) {
  ReportOptions options;
  options.compare = true;
  const ReportFiles files = render_report(two_versions(), options);
  // Each run lasts its three blocks plus 403 ms. v1: 30.007, 30.507, (not converged: inf), 31.007, 30.257 ->
  // mean(30.257, 30.507, 31.007) = 30.590. v2: 18.007, 18.507, 17.507, 18.757, 18.257 -> 18.257. 30.590 / 18.257
  // = 1.676.
  EXPECT_NE(files.comparison_csv.find("resnet,example_box,30.590,example_box,18.257,1.676"), std::string::npos)
      << files.comparison_csv;
}

TEST(Report, HtmlIsSelfContainedAndEscapesEverythingFromTheInput) {
  const ReportFiles files = render_report(two_versions(), {});
  const std::string& html = files.html;
  EXPECT_NE(html.find("Example &lt;b&gt;GPU&lt;/b&gt; &amp; &quot;friends&quot;"), std::string::npos);
  EXPECT_EQ(html.find("<b>GPU"), std::string::npos);
  for (const char* external : {"<script", "src=", "href=", "@import", "url("})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);

  testing::ScratchFolder scratch;
  const std::string hostile = "<img src=x onerror=alert(1)>";
  for (int i = 0; i < 5; ++i) {
    std::string log = testing::read_text(testing::test_path("report_input/v1/results/example_box/resnet/result_0.txt"));
    log.replace(log.find("\"value\": 101"), 12, "\"value\": " + std::to_string(300 + i));
    testing::write_text(scratch / (hostile + "/resnet/result_" + std::to_string(i) + ".txt"), log);
  }
  const ReportFiles hostile_files =
      render_report({{"folder \"<x>\"", review_submission(scratch.path(), testing::ruleset_1_1())}}, {});
  EXPECT_EQ(hostile_files.html.find("<img"), std::string::npos);
  EXPECT_NE(hostile_files.html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(hostile_files.markdown.find("\\<img src=x onerror=alert(1)\\>"), std::string::npos)
      << hostile_files.markdown;
}

TEST(Report, PresetRunsGetTheirOwnChartAndTargetLine) {
  testing::ScratchFolder scratch;
  const std::string mini_log = testing::read_text(testing::test_path("logs/mini_preset.txt"));
  const std::string seed = "\"key\": \"seed\", \"value\": 42";
  for (int i = 0; i < 5; ++i) {
    std::string log = mini_log;
    log.replace(log.find(seed), seed.size(), "\"key\": \"seed\", \"value\": " + std::to_string(50 + i));
    testing::write_text(scratch / ("results/mini_cpu/resnet/result_" + std::to_string(i) + ".txt"), log);
  }
  auto inputs = two_versions();
  inputs.push_back({"mini", review_submission(scratch / "results", testing::ruleset_1_1())});
  const std::string html = render_report(inputs, {}).html;
  // The results table says which minutes are a preset's.
  EXPECT_LT(html.find(" (mini preset)"), html.find("<h2>Review</h2>"));
  const size_t reference_chart = html.find("<h3>resnet</h3>");
  const size_t mini_chart = html.find("<h3>resnet (mini preset)</h3>");
  ASSERT_NE(reference_chart, std::string::npos);
  ASSERT_NE(mini_chart, std::string::npos);
  // Each chart draws its own target: the rules' 0.759 above, the preset's 0.5 below.
  EXPECT_NE(html.substr(reference_chart, mini_chart - reference_chart).find("target 0.759"), std::string::npos);
  EXPECT_EQ(html.substr(reference_chart, mini_chart - reference_chart).find("mini_cpu"), std::string::npos);
  EXPECT_NE(html.substr(mini_chart).find("target 0.5"), std::string::npos);
  EXPECT_EQ(html.substr(mini_chart).find("target 0.759"), std::string::npos);
}

TEST(Report, WritesTheFiles) {
  testing::ScratchFolder scratch;
  ReportOptions options;
  options.compare = true;
  const auto written = write_report(render_report(two_versions(), options), scratch / "out");
  EXPECT_EQ(written.size(), 4u);
  for (const auto& path : written) EXPECT_TRUE(std::filesystem::file_size(path) > 0) << path;
}

// Issue 45: both files or neither. report.md being a directory once left report.html committed and a partial behind.
TEST(Report, WritesEveryFileOrNone) {
  testing::ScratchFolder scratch;
  const std::string out = scratch / "out";
  std::filesystem::create_directories(out + "/report.md");
  try {
    write_report(render_report(two_versions(), ReportOptions{}), out);
    ADD_FAILURE() << "a directory at report.md was written over";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("report.md: is a directory"), std::string::npos) << error.what();
  }
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(out)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"report.md"});
}

}  // namespace
}  // namespace trainbench::review
