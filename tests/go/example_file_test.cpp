// The prepared bootstrap's example file: what is written is read back byte for byte, and a file of another
// board size, cut short, or not such a file at all is refused with an error naming it.
#include "go/example_file.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/error_message.h"

namespace trainbench::go {
namespace {

namespace fs = std::filesystem;
using testing::error_message;

ExampleFile two_examples() {
  ExampleFile file;
  file.games = 3;
  file.examples.size = 2;
  for (int i = 0; i < 2 * Position::kPlanes * 4; ++i) file.examples.features.push_back(static_cast<uint8_t>(i % 2));
  file.examples.policies = {0.1f, 0.2f, 0.3f, 0.4f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f};
  file.examples.outcomes = {1.0f, -1.0f};
  return file;
}

TEST(GoExampleFile, ReadsBackWhatWasWrittenAndRefusesOtherFiles) {
  const fs::path path = fs::temp_directory_path() / ("trainbench_example_file_" + std::to_string(::getpid()));
  const ExampleFile written = two_examples();
  write_example_file(path.string(), written);
  const ExampleFile read = read_example_file(path.string(), 2);
  EXPECT_EQ(read.games, 3);
  EXPECT_EQ(read.examples.size, 2);
  EXPECT_EQ(read.examples.features, written.examples.features);
  EXPECT_EQ(read.examples.policies, written.examples.policies);
  EXPECT_EQ(read.examples.outcomes, written.examples.outcomes);

  const std::string wrong_size = error_message([&] { read_example_file(path.string(), 9); });
  EXPECT_NE(wrong_size.find(path.string()), std::string::npos) << wrong_size;
  EXPECT_NE(wrong_size.find("board_size is 9"), std::string::npos) << wrong_size;

  fs::resize_file(path, fs::file_size(path) - 4);
  const std::string cut = error_message([&] { read_example_file(path.string(), 2); });
  EXPECT_NE(cut.find("cut short in its outcomes"), std::string::npos) << cut;

  std::ofstream(path) << "not examples";
  EXPECT_NE(error_message([&] { read_example_file(path.string(), 2); }).find("is not a trainbench MiniGo example file"),
            std::string::npos);
  fs::remove(path);
  EXPECT_NE(error_message([&] { read_example_file(path.string(), 2); }).find("cannot be opened"), std::string::npos);
}

// Ranks exchange a generation's examples as these bytes: parsed back they are the same examples, and bytes
// cut short in transit are refused naming where they came from.
TEST(GoExampleFile, SerializedExamplesParseBackAndShortBytesAreRefusedByOrigin) {
  const ExampleFile written = two_examples();
  const std::vector<uint8_t> bytes = serialize_examples(written);
  const ExampleFile parsed = parse_examples(bytes.data(), bytes.size(), 2, "rank 1's examples");
  EXPECT_EQ(parsed.games, 3);
  EXPECT_EQ(parsed.examples.features, written.examples.features);
  EXPECT_EQ(parsed.examples.policies, written.examples.policies);
  EXPECT_EQ(parsed.examples.outcomes, written.examples.outcomes);
  const std::string cut = error_message([&] { parse_examples(bytes.data(), bytes.size() - 1, 2, "rank 1's examples"); });
  EXPECT_NE(cut.find("rank 1's examples"), std::string::npos) << cut;
  EXPECT_NE(cut.find("cut short in its outcomes"), std::string::npos) << cut;
  EXPECT_NE(error_message([&] { parse_examples(bytes.data(), 10, 2, "rank 1's examples"); }).find("is not a trainbench MiniGo example file"),
            std::string::npos);
}

}  // namespace
}  // namespace trainbench::go
