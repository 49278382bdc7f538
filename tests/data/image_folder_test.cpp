#include "data/image_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "support/error_message.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

using trainbench::testing::error_message;

using testing::TempDir;
using testing::write_file;

// The index never opens images, so empty files stand in for them.
void touch(const TempDir& dir, const std::string& relative) { write_file(dir / relative, std::string()); }

void make_train_tree(const TempDir& dir) {
  touch(dir, "train/n02000000/b.JPEG");
  touch(dir, "train/n02000000/a.jpg");
  touch(dir, "train/n01000000/z.png");
  touch(dir, "train/n01000000/y.JpEg");
  touch(dir, "train/n01000000/notes.txt");  // not an image: ignored
  touch(dir, "train/weird-class/1.jpeg");   // any directory name is a class
  touch(dir, "train/README");               // stray file in train/: ignored
}

std::string relative(const TempDir& dir, const std::string& path) {
  return std::filesystem::path(path).lexically_relative(dir.path()).string();
}

TEST(DataImageFolder, ClassesSortedAndTrainLabelled) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/n01000000/v1.JPEG");
  const ImageFolderIndex index = index_imagenet(dir.path().string());
  EXPECT_EQ(index.classes, (std::vector<std::string>{"n01000000", "n02000000", "weird-class"}));
  ASSERT_EQ(index.train.size(), 5u);
  const std::vector<std::pair<std::string, int64_t>> expected = {{"train/n01000000/y.JpEg", 0},
                                                                 {"train/n01000000/z.png", 0},
                                                                 {"train/n02000000/a.jpg", 1},
                                                                 {"train/n02000000/b.JPEG", 1},
                                                                 {"train/weird-class/1.jpeg", 2}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(relative(dir, index.train[i].path), expected[i].first);
    EXPECT_EQ(index.train[i].label, expected[i].second);
  }
}

// Issue 18: a directory (or a broken link) named like an image used to be skipped without a word.
TEST(DataImageFolder, SomethingNamedLikeAnImageThatIsNotAFileIsAnError) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/n01000000/v1.JPEG");
  std::filesystem::create_directories(dir.path() / "train/n02000000/x.JPEG");
  try {
    index_imagenet(dir.path().string());
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), (dir.path() / "train/n02000000/x.JPEG").string() +
                                             ": is named like an image (.JPEG/.jpeg/.jpg/.png) but is not a regular file "
                                             "(a directory, a broken link?)");
  }
}

TEST(DataImageFolder, ValInClassDirectories) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/n02000000/v2.JPEG");
  touch(dir, "val/n01000000/v1.JPEG");
  touch(dir, "val/n01000000/v0.JPEG");
  const ImageFolderIndex index = index_imagenet(dir.path().string());
  ASSERT_EQ(index.val.size(), 3u);
  EXPECT_EQ(relative(dir, index.val[0].path), "val/n01000000/v0.JPEG");
  EXPECT_EQ(index.val[0].label, 0);
  EXPECT_EQ(relative(dir, index.val[1].path), "val/n01000000/v1.JPEG");
  EXPECT_EQ(relative(dir, index.val[2].path), "val/n02000000/v2.JPEG");
  EXPECT_EQ(index.val[2].label, 1);
}

TEST(DataImageFolder, FlatValWithKaggleSolutionCsv) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/ILSVRC2012_val_00000002.JPEG");
  touch(dir, "val/ILSVRC2012_val_00000001.JPEG");
  write_file(dir / "LOC_val_solution.csv",
             std::string("ImageId,PredictionString\r\n"
                         "ILSVRC2012_val_00000002,n01000000 1 2 30 40 n01000000 5 5 9 9 \r\n"
                         "ILSVRC2012_val_00000001,weird-class 0 0 10 10\r\n"
                         "ILSVRC2012_val_00000099,n02000000 0 0 10 10\r\n"));  // no such image: ignored
  const ImageFolderIndex index = index_imagenet(dir.path().string());
  ASSERT_EQ(index.val.size(), 2u);
  EXPECT_EQ(relative(dir, index.val[0].path), "val/ILSVRC2012_val_00000001.JPEG");
  EXPECT_EQ(index.val[0].label, 2);
  EXPECT_EQ(relative(dir, index.val[1].path), "val/ILSVRC2012_val_00000002.JPEG");
  EXPECT_EQ(index.val[1].label, 0);
}

TEST(DataImageFolder, ValImageWithoutLabelRowNamesIt) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/ILSVRC2012_val_00000001.JPEG");
  touch(dir, "val/ILSVRC2012_val_00000002.JPEG");
  write_file(dir / "LOC_val_solution.csv",
             std::string("ImageId,PredictionString\nILSVRC2012_val_00000001,n01000000 1 2 3 4\n"));
  const std::string message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("ILSVRC2012_val_00000002.JPEG"), std::string::npos) << message;
  EXPECT_NE(message.find("no label row"), std::string::npos) << message;
}

TEST(DataImageFolder, UnknownWnidNamesFileAndLine) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/ILSVRC2012_val_00000001.JPEG");
  write_file(dir / "LOC_val_solution.csv", std::string("ImageId,PredictionString\n"
                                                       "ILSVRC2012_val_00000001,n01000000 1 2 3 4\n"
                                                       "ILSVRC2012_val_00000002,n09999999 1 2 3 4\n"));
  const std::string message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("LOC_val_solution.csv:3"), std::string::npos) << message;
  EXPECT_NE(message.find("n09999999"), std::string::npos) << message;
}

TEST(DataImageFolder, LayoutErrorsExplainWhatWasExpected) {
  TempDir dir;
  std::string message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find((dir.path() / "train").string()), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;

  std::filesystem::create_directories(dir.path() / "train");
  std::filesystem::create_directories(dir.path() / "val");
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("no class subdirectories"), std::string::npos) << message;

  std::filesystem::create_directories(dir.path() / "train/n01000000");
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("n01000000"), std::string::npos) << message;
  EXPECT_NE(message.find("no image files"), std::string::npos) << message;

  touch(dir, "train/n01000000/a.JPEG");
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find((dir.path() / "val").string()), std::string::npos) << message;
  EXPECT_NE(message.find("no images"), std::string::npos) << message;

  touch(dir, "val/ILSVRC2012_val_00000001.JPEG");
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("LOC_val_solution.csv"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;

  write_file(dir / "LOC_val_solution.csv", std::string("id,label\n"));
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("LOC_val_solution.csv:1"), std::string::npos) << message;

  std::filesystem::remove_all(dir.path() / "val");
  message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find((dir.path() / "val").string()), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST(DataImageFolder, ValClassDirectoryMustBeATrainClass) {
  TempDir dir;
  make_train_tree(dir);
  touch(dir, "val/n05555555/a.JPEG");
  const std::string message = error_message([&] { index_imagenet(dir.path().string()); });
  EXPECT_NE(message.find("n05555555"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainbench::data
