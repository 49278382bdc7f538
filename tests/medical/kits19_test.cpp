// KiTS19's one-time preprocessing against an independent python3-torch/numpy computation of the reference's
// preprocess_dataset.py steps, on generated cases written as NIfTI; the fixed evaluation split.
#include "medical/kits19.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "data/random.h"
#include "data/test_files.h"
#include "medical/nifti.h"
#include "medical/npy.h"
#include "medical/phantoms.h"
#include "medical/python_reference.h"
#include "support/error_message.h"

namespace trainbench::medical {
namespace {

using data::testing::TempDir;
using trainbench::testing::error_message;

void write_case(const std::string& folder, const Shape3& shape, const std::array<double, 3>& spacing, uint64_t seed) {
  data::Rng rng(seed);
  std::vector<float> image(static_cast<size_t>(voxel_count(shape))), label(image.size());
  for (size_t i = 0; i < image.size(); ++i) {
    image[i] = static_cast<float>(rng.uniform_int(-1024, 1200));  // beyond both clip bounds
    label[i] = static_cast<float>(rng.below(3));
  }
  write_nifti(folder + "/imaging.nii.gz", shape, spacing, image, NiftiStorage::kInt16);
  write_nifti(folder + "/segmentation.nii.gz", shape, spacing, label, NiftiStorage::kUint8);
}

void expect_same_npy(const std::string& ours, const std::string& theirs) {
  const NpyArray a = read_npy(ours), b = read_npy(theirs);
  ASSERT_EQ(a.shape, b.shape) << ours;
  ASSERT_EQ(a.type, b.type) << ours;
  if (a.type == NpyType::kUint8) {
    EXPECT_EQ(a.bytes, b.bytes) << ours;
    return;
  }
  size_t worst = 0;
  for (size_t i = 0; i < a.floats.size(); ++i)
    if (std::abs(a.floats[i] - b.floats[i]) > std::abs(a.floats[worst] - b.floats[worst])) worst = i;
  // Interpolated Hounsfield units of up to 1200 agree to a few float32 ulps (about 1e-4 HU each), which
  // normalisation by 76.9 turns into a few 1e-5.
  EXPECT_NEAR(a.floats[worst], b.floats[worst], 5e-5) << ours << " at " << worst;
}

// md5sum's digest of `path` (coreutils), the independent side of compare_with_checksums.
std::string md5sum(const std::string& path) {
  FILE* pipe = ::popen(("md5sum " + path).c_str(), "r");
  char digest[33] = {};
  const bool read = pipe && std::fscanf(pipe, "%32s", digest) == 1;
  if (pipe) ::pclose(pipe);
  return read ? digest : "";
}

// Audit U2: the prepared files against a checksum.json in the reference's format (name -> md5, as
// preprocess_dataset.py's verify_dataset reads it): matching, differing, listed but not prepared, prepared but
// not listed.
TEST(Kits19, PreparedFilesAreComparedWithTheReferencesChecksums) {
  const TempDir dir;
  write_case(dir / "raw/case_00001", {6, 7, 8}, {1.6, 1.2, 1.2}, 1);
  write_case(dir / "raw/case_00002", {6, 7, 8}, {1.6, 1.2, 1.2}, 2);
  ASSERT_EQ(prepare_kits19(dir / "raw", dir / "prepared", {4, 4, 4}), 2);
  const std::string x1 = md5sum(dir / "prepared/case_00001_x.npy");
  ASSERT_EQ(x1.size(), 32u);
  {
    std::ofstream checksums(dir / "checksum.json");
    checksums << "{\"case_00001_x.npy\": \"" << x1 << "\", \"case_00001_y.npy\": \"" << md5sum(dir / "prepared/case_00001_y.npy")
              << "\", \"case_00002_x.npy\": \"00000000000000000000000000000000\", \"case_00009_x.npy\": \"" << x1 << "\"}";
  }
  const ChecksumComparison comparison = compare_with_checksums(dir / "prepared", dir / "checksum.json");
  EXPECT_EQ(comparison.matching, 2);
  EXPECT_EQ(comparison.differing, (std::vector<std::string>{"case_00002_x.npy"}));
  EXPECT_EQ(comparison.missing, (std::vector<std::string>{"case_00009_x.npy"}));
  EXPECT_EQ(comparison.unlisted, (std::vector<std::string>{"case_00002_y.npy"}));
  {
    std::ofstream(dir / "bad.json") << "[1, 2]";
  }
  EXPECT_EQ(error_message([&] { compare_with_checksums(dir / "prepared", dir / "bad.json"); }),
            dir / "bad.json" + ": expected a JSON object of file names to md5 strings, as the reference's checksum.json");
}

TEST(Kits19, PreprocessingMatchesTheReferenceSteps) {
  if (!testing::python_has("torch") || !testing::python_has("nibabel")) GTEST_SKIP() << "needs python3-torch and nibabel";
  const TempDir dir;
  // Down- and upsampling axes, one case already at the target spacing (no resampling), and padding.
  write_case(dir / "raw/case_00001", {9, 14, 11}, {2.5, 0.9, 1.7}, 1);
  write_case(dir / "raw/case_00002", {30, 12, 20}, {1.0, 2.0, 0.8}, 2);
  write_case(dir / "raw/case_00003", {6, 7, 8}, {1.6, 1.2, 1.2}, 3);
  write_case(dir / "raw/case_00300", {4, 4, 4}, {1, 1, 1}, 4);  // id >= 210: skipped, as the reference does
  const Shape3 min_shape{16, 12, 16};
  EXPECT_EQ(prepare_kits19(dir / "raw", dir / "ours", min_shape), 3);
  std::filesystem::create_directories(dir / "theirs");
  testing::run_reference("preprocess " + (dir / "raw") + " " + (dir / "theirs") + " 16 12 16");
  for (const char* id : {"00001", "00002", "00003"})
    for (const char* part : {"_x.npy", "_y.npy"}) {
      const std::string name = std::string("case_") + id + part;
      expect_same_npy(dir / ("ours/" + name), dir / ("theirs/" + name));
    }
  EXPECT_FALSE(std::filesystem::exists(dir / "ours/case_00300_x.npy"));
}

// Issue 32: pixdim 1e6 ended in bad_alloc, and 0, NaN or inf were taken as 1.0.
TEST(Kits19, SpacingsThatCannotBeResampledNameTheCase) {
  const TempDir dir;
  const std::vector<float> voxels(4 * 4 * 4, 0.0f);
  const auto message = [&](const std::array<double, 3>& spacing) {
    const std::filesystem::path case_dir = std::filesystem::path(dir / "in") / "case_00000";
    write_nifti((case_dir / "imaging.nii.gz").string(), {4, 4, 4}, spacing, voxels, NiftiStorage::kInt16);
    write_nifti((case_dir / "segmentation.nii.gz").string(), {4, 4, 4}, spacing, voxels, NiftiStorage::kUint8);
    return error_message([&] { prepare_kits19(dir / "in", dir / "out", {2, 2, 2}); });
  };
  const std::string imaging = (std::filesystem::path(dir / "in") / "case_00000" / "imaging.nii.gz").string();
  EXPECT_EQ(message({1e6, 1e6, 1e6}),
            imaging + ": preprocess: spacing 1000000.000000 x 1000000.000000 x 1000000.000000 mm would resample the "
                      "volume to more than 4294967296 voxels");
  EXPECT_EQ(message({0, 1.2, 1.2}),
            imaging + ": preprocess: spacing (pixdim[1]) 0.000000 mm is not a positive finite length");
  EXPECT_NE(message({1.6, NAN, 1.2}).find("spacing (pixdim[2]) nan mm is not a positive finite length"), std::string::npos);
  EXPECT_NE(message({1.6, 1.2, INFINITY}).find("spacing (pixdim[3]) inf mm"), std::string::npos);
}

// Issue 32: a label of 7 reached training as c10's "Target 7 is out of bounds." (rc 3), and a NaN intensity as
// "training diverged". Both are named with the file and voxel, in NIfTI (prepare) and .npy (training) form.
TEST(Kits19, LabelsOutsideTheThreeClassesAndNonFiniteIntensitiesNameTheVoxel) {
  const Shape3 shape{2, 3, 4};
  std::vector<uint8_t> labels(24, 1);
  EXPECT_NO_THROW(check_labels(labels, shape, "y.npy"));
  labels[1 * 12 + 2 * 4 + 3] = 7;
  EXPECT_EQ(error_message([&] { check_labels(labels, shape, "y.npy"); }),
            "y.npy: voxel (1, 2, 3) is 7; expected a label 0 (background), 1 (kidney) or 2 (tumour)");
  std::vector<float> image(24, -0.5f);
  EXPECT_NO_THROW(check_intensities(image, shape, "x.npy"));
  image[5] = NAN;
  EXPECT_EQ(error_message([&] { check_intensities(image, shape, "x.npy"); }), "x.npy: voxel (0, 1, 1) is nan; expected a finite intensity");
  image[5] = -INFINITY;
  EXPECT_EQ(error_message([&] { check_intensities(image, shape, "x.npy"); }), "x.npy: voxel (0, 1, 1) is -inf; expected a finite intensity");

  const TempDir dir;
  const std::filesystem::path case_dir = std::filesystem::path(dir / "in") / "case_00000";
  const std::vector<float> zeros(4 * 4 * 4, 0.0f);
  std::vector<float> segmentation = zeros;
  segmentation[4 * 4 * 4 - 1] = 3;
  write_nifti((case_dir / "imaging.nii.gz").string(), {4, 4, 4}, {1.6, 1.2, 1.2}, zeros, NiftiStorage::kInt16);
  write_nifti((case_dir / "segmentation.nii.gz").string(), {4, 4, 4}, {1.6, 1.2, 1.2}, segmentation, NiftiStorage::kUint8);
  EXPECT_EQ(error_message([&] { prepare_kits19(dir / "in", dir / "out", {2, 2, 2}); }),
            (case_dir / "segmentation.nii.gz").string() +
                ": voxel (3, 3, 3) is 3; expected a label 0 (background), 1 (kidney) or 2 (tumour)");
  EXPECT_FALSE(std::filesystem::exists(dir / "out/case_00000_x.npy"));

  // preprocess_case itself refuses such a label before casting it to uint8, which is undefined beyond 255 (the
  // nifti fuzzer's UBSan report, a label of 23553).
  std::vector<float> wide(24, 0.0f);
  wide[0] = 23553;
  EXPECT_EQ(error_message([&] { preprocess_case(wide, wide, shape, {1.6, 1.2, 1.2}, {1, 1, 1}); }),
            "preprocess: voxel (0, 0, 0) is 23553; expected a label 0 (background), 1 (kidney) or 2 (tumour)");
}

TEST(Kits19, EvaluationCasesAreTheReferencesFixedList) {
  const auto& ids = evaluation_case_ids();
  ASSERT_EQ(ids.size(), 42u);
  EXPECT_EQ(ids.front(), "00000");
  EXPECT_EQ(ids[1], "00003");
  EXPECT_EQ(ids.back(), "00207");
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());

  const TempDir dir;
  for (int id = 0; id < kCaseIdLimit; ++id) {
    char stem[32];
    std::snprintf(stem, sizeof(stem), "case_%05d", id);
    data::testing::write_file(dir / (std::string(stem) + "_x.npy"), std::string("x"));
    data::testing::write_file(dir / (std::string(stem) + "_y.npy"), std::string("y"));
  }
  const Kits19Split split = split_prepared_cases(dir.path().string());
  EXPECT_EQ(split.train.size(), 168u);
  EXPECT_EQ(split.eval.size(), 42u);
  std::filesystem::remove(dir / "case_00007_y.npy");
  EXPECT_NE(error_message([&] { split_prepared_cases(dir.path().string()); }).find("case_00007_x.npy: has no label file"),
            std::string::npos);
}

TEST(Kits19, PhantomsPrepareIntoKits19Layout) {
  const TempDir dir;
  PhantomOptions options;
  options.extent_mm = {40, 30, 30};
  make_kits19_phantoms(dir / "raw", options);
  ASSERT_TRUE(std::filesystem::exists(dir / "raw/case_00209/segmentation.nii.gz"));
  EXPECT_EQ(prepare_kits19(dir / "raw", dir / "prepared", {16, 16, 16}), kCaseIdLimit);
  const NpyArray label = read_npy(dir / "prepared/case_00000_y.npy");
  ASSERT_EQ(label.shape.size(), 4u);
  EXPECT_NEAR(label.shape[1], 25, 1);  // 40 mm at 1.6 mm, truncated after rounding to whole voxels
  std::array<int64_t, 3> counts{};
  for (const uint8_t value : label.bytes) ++counts.at(value);
  EXPECT_GT(counts[1], 0) << "kidney voxels";
  const NpyArray image = read_npy(dir / "prepared/case_00000_x.npy");
  for (const float value : image.floats) {
    EXPECT_GE(value, (kClipMin - kNormMean) / kNormStd - 1e-5f);
    EXPECT_LE(value, (kClipMax - kNormMean) / kNormStd + 1e-5f);
  }
}

}  // namespace
}  // namespace trainbench::medical
