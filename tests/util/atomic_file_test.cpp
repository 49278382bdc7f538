// AtomicFile: complete-or-absent files, and result logs that are never lost or crossed when several
// processes write into one folder at once.
#include "util/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "util/error.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_atomic_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Issue 45: an output lands on a regular file or on nothing. A directory, FIFO or device at the path is refused
// before anything is written, and an output that is not committed leaves nothing behind.
TEST_F(AtomicFileTest, ReplaceModeRefusesWhatIsNotAFileAndLeavesNothingUncommitted) {
  fs::create_directories(dir_ / "folder");
  EXPECT_NE(error_of([&] { AtomicFile((dir_ / "folder").string()); }).find("folder: is a directory; give the path of"),
            std::string::npos);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { AtomicFile((dir_ / "fifo").string()); }).find("fifo: is a FIFO"), std::string::npos);
  EXPECT_NE(error_of([&] { AtomicFile("/dev/null"); }).find("/dev/null: is a device"), std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2) << "no partial left";

  const std::string path = (dir_ / "export.pt").string();
  {
    AtomicFile abandoned(path);
    abandoned.write("half");
  }  // an exception unwinding past the writer
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

// A legal name of 250 bytes cannot take ".partial"; its partial is the name cut short with a hash, one per path.
TEST_F(AtomicFileTest, ALongLegalNameIsWrittenThroughAShortenedPartial) {
  const std::string name(250, 'n'), other = std::string(249, 'n') + "m";
  const std::string partial = AtomicFile::partial_path_for((dir_ / name).string());
  EXPECT_LE(fs::path(partial).filename().string().size(), 255u);
  EXPECT_NE(partial, AtomicFile::partial_path_for((dir_ / other).string()));
  EXPECT_EQ(AtomicFile::partial_path_for((dir_ / "short").string()), (dir_ / "short.partial").string());
  write_file_atomically((dir_ / name).string(), "done");
  EXPECT_EQ(read_file((dir_ / name).string()), "done");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(AtomicFileTest, ReplaceModeReplacesAndKeepModeNeverDoes) {
  const std::string path = (dir_ / "a.txt").string();
  write_file_atomically(path, "one");
  write_file_atomically(path, "two");
  EXPECT_EQ(read_file(path), "two");
  EXPECT_NE(error_of([&] { AtomicFile(path, AtomicFile::Existing::kKeep); }).find(path + ": already exists"), std::string::npos);
  EXPECT_EQ(read_file(path), "two");

  const std::string fresh = (dir_ / "b.txt").string();
  AtomicFile first(fresh, AtomicFile::Existing::kKeep);
  first.write("first\n");
  // A second writer cannot share the partial ...
  EXPECT_NE(error_of([&] { AtomicFile(fresh, AtomicFile::Existing::kKeep); }).find("being written by another run"), std::string::npos);
  // ... and a file put in place meanwhile is not replaced: the finished log stays as the partial.
  std::ofstream(fresh) << "someone else's";
  EXPECT_NE(error_of([&] { first.commit(); }).find("File exists (the finished file stays at " + fresh + ".partial)"),
            std::string::npos);
  EXPECT_EQ(read_file(fresh), "someone else's");
  EXPECT_EQ(read_file(fresh + ".partial"), "first\n");
}

TEST_F(AtomicFileTest, ReservationSkipsTakenNumbersAndStalePartials) {
  write_file_atomically((dir_ / "result_0.txt").string(), "run 0");
  write_file_atomically((dir_ / "result_1.txt.partial").string(), "a crashed run's evidence");
  auto file = AtomicFile::reserve_numbered(dir_.string(), "result_", ".txt");
  EXPECT_EQ(file->path(), (dir_ / "result_2.txt").string());
  file->commit();
  EXPECT_EQ(read_file((dir_ / "result_1.txt.partial").string()), "a crashed run's evidence");
}

TEST_F(AtomicFileTest, AnOverlongPathIsAnErrorNamingIt) {
  const std::string path = (dir_ / std::string(5000, 'x') / "result_0.txt").string();
  EXPECT_NE(error_of([&] { AtomicFile::reserve_numbered(fs::path(path).parent_path().string(), "result_", ".txt"); })
                .find("File name too long"),
            std::string::npos);
}

// Processes reserving at the same instant each get their own number and commit their own complete file.
TEST_F(AtomicFileTest, ConcurrentWritersEachGetTheirOwnFile) {
  for (const int writers : {2, 4, 8}) {
    const fs::path folder = dir_ / std::to_string(writers);
    std::vector<pid_t> children;
    for (int writer = 0; writer < writers; ++writer) {
      const pid_t child = ::fork();
      if (child == 0) {
        try {
          auto file = AtomicFile::reserve_numbered(folder.string(), "result_", ".txt");
          for (int line = 0; line < 200; ++line) file->write("writer " + std::to_string(writer) + " line " + std::to_string(line) + "\n");
          file->commit();
          ::_exit(0);
        } catch (...) {
          ::_exit(1);
        }
      }
      children.push_back(child);
    }
    for (const pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    std::set<std::string> owners;
    for (int index = 0; index < writers; ++index) {
      const std::string text = read_file((folder / ("result_" + std::to_string(index) + ".txt")).string());
      const std::string owner = text.substr(0, text.find(" line"));
      std::string expected;  // one writer's lines, whole and in order
      for (int line = 0; line < 200; ++line) expected += owner + " line " + std::to_string(line) + "\n";
      EXPECT_EQ(text, expected);
      owners.insert(owner);
    }
    EXPECT_EQ(owners.size(), static_cast<size_t>(writers));
    EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), writers);  // no partials
  }
}

}  // namespace
}  // namespace trainbench
