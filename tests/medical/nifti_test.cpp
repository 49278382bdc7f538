// NIfTI reading through niftilib against nibabel on nibabel's own test files (gzip, big-endian, NIfTI-2, 4-D),
// writing (nibabel reads what we write), and the errors for missing, non-NIfTI and truncated files.
#include "medical/nifti.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "medical/python_reference.h"
#include "support/error_message.h"

namespace trainbench::medical {
namespace {

using data::testing::TempDir;
using trainbench::testing::error_message;

std::string nibabel_data_dir() {
  std::string dir = testing::run_reference("nifti-data-dir");
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  return dir;
}

TEST(Nifti, ReadsNibabelsTestFilesAsNibabelDoes) {
  if (!testing::python_has("nibabel")) GTEST_SKIP() << "/usr/bin/python3 has no nibabel";
  const std::string dir = nibabel_data_dir();
  std::vector<std::string> paths;
  for (const char* name : {"anatomical.nii", "example4d.nii.gz", "example_nifti2.nii.gz", "standard.nii.gz"})
    paths.push_back(dir + "/" + name);
  std::string arguments;
  for (const auto& path : paths) arguments += path + " ";
  const nlohmann::json expected = testing::run_reference_json("nifti " + arguments);
  bool saw_big_endian = false, saw_gzip_nifti2 = false;
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    const NiftiVolume volume = read_nifti(path);
    const auto& reference = expected.at(path);
    EXPECT_EQ(volume.shape, reference.at("shape").get<std::vector<int64_t>>());
    const auto spacing = reference.at("spacing").get<std::vector<double>>();
    ASSERT_EQ(volume.spacing.size(), spacing.size());
    for (size_t axis = 0; axis < spacing.size(); ++axis) EXPECT_NEAR(volume.spacing[axis], spacing[axis], 1e-6);
    EXPECT_EQ(volume.version, reference.at("version").get<int>());
    EXPECT_EQ(volume.big_endian, reference.at("big_endian").get<bool>());
    double sum = 0;
    for (const float value : volume.voxels) sum += value;
    EXPECT_NEAR(sum, reference.at("sum").get<double>(), 1e-6 * std::max(1.0, std::abs(sum)));
    for (const auto& [index, value] : reference.at("samples").items())
      EXPECT_FLOAT_EQ(volume.voxels.at(std::stoul(index)), value.get<float>()) << "voxel " << index;
    saw_big_endian |= volume.big_endian;
    saw_gzip_nifti2 |= volume.version == 2 && path.size() > 3 && path.substr(path.size() - 3) == ".gz";
  }
  EXPECT_TRUE(saw_big_endian);
  EXPECT_TRUE(saw_gzip_nifti2);
}

TEST(Nifti, WritesVolumesThatNibabelAndNiftilibReadBack) {
  const TempDir dir;
  const std::array<int64_t, 3> shape{3, 4, 5};
  std::vector<float> voxels;
  for (int i = 0; i < 60; ++i) voxels.push_back(static_cast<float>(i * 7 - 200));
  write_nifti(dir / "case/imaging.nii.gz", shape, {2.5, 0.75, 0.8}, voxels, NiftiStorage::kInt16);
  const NiftiVolume back = read_nifti(dir / "case/imaging.nii.gz");
  EXPECT_EQ(back.shape, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(back.voxels, voxels);
  EXPECT_NEAR(back.spacing[0], 2.5, 1e-6);
  EXPECT_EQ(back.datatype, 4);  // NIFTI_TYPE_INT16
  if (!testing::python_has("nibabel")) GTEST_SKIP() << "/usr/bin/python3 has no nibabel";
  const auto seen = testing::run_reference_json("nifti " + (dir / "case/imaging.nii.gz")).begin().value();
  EXPECT_EQ(seen.at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_NEAR(seen.at("spacing")[2].get<double>(), 0.8, 1e-6);
  EXPECT_EQ(seen.at("samples").at("59").get<double>(), 59 * 7 - 200);  // C order on both sides
}

TEST(Nifti, NamesTheFileAndTheProblemForBadInput) {
  const TempDir dir;
  EXPECT_NE(error_message([&] { read_nifti(dir / "missing.nii.gz"); }).find("missing.nii.gz: no such NIfTI file"),
            std::string::npos);
  data::testing::write_file(dir / "notes.nii", std::string("this is not a volume, just text long enough"));
  EXPECT_NE(error_message([&] { read_nifti(dir / "notes.nii"); }).find("notes.nii: not a NIfTI file"), std::string::npos);

  std::vector<float> voxels(20 * 20 * 20);
  for (size_t i = 0; i < voxels.size(); ++i) voxels[i] = static_cast<float>(i % 1000);
  write_nifti(dir / "full.nii", {20, 20, 20}, {1, 1, 1}, voxels, NiftiStorage::kInt16);
  auto bytes = data::testing::read_bytes(dir / "full.nii");
  bytes.resize(bytes.size() / 2);
  data::testing::write_file(dir / "truncated.nii", bytes);
  const std::string truncated = error_message([&] { read_nifti(dir / "truncated.nii"); });
  EXPECT_NE(truncated.find("truncated.nii: "), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("the data is truncated"), std::string::npos) << truncated;

  write_nifti(dir / "full.nii.gz", {20, 20, 20}, {1, 1, 1}, voxels, NiftiStorage::kInt16);
  auto packed = data::testing::read_bytes(dir / "full.nii.gz");
  packed.resize(packed.size() / 2);
  data::testing::write_file(dir / "truncated.nii.gz", packed);
  EXPECT_NE(error_message([&] { read_nifti(dir / "truncated.nii.gz"); }).find("truncated.nii.gz: "), std::string::npos);

  // Found by the nifti fuzzer: dims of 32767^3 in a 16 KB file made niftilib allocate terabytes before reading.
  auto huge = data::testing::read_bytes(dir / "full.nii");
  for (const size_t offset : {42, 44, 46}) {  // dim[1..3], little-endian shorts of the NIfTI-1 header
    huge[offset] = 0xff;
    huge[offset + 1] = 0x7f;
  }
  data::testing::write_file(dir / "huge.nii", huge);
  EXPECT_NE(error_message([&] { read_nifti(dir / "huge.nii"); })
                .find("huge.nii: NIfTI header gives 35181150961663 voxels; expected at most 2147483648"),
            std::string::npos);
}

// Issue 32: niftilib turns a pixdim of 0, NaN or inf into 1.0; the reader gives what the header says, as nibabel.
TEST(Nifti, SpacingIsThePixdimTheHeaderHolds) {
  const TempDir dir;
  const std::vector<float> voxels(2 * 2 * 2, 1.0f);
  write_nifti(dir / "odd.nii", {2, 2, 2}, {0, NAN, INFINITY}, voxels, NiftiStorage::kUint8);
  const NiftiVolume volume = read_nifti(dir / "odd.nii");
  ASSERT_EQ(volume.spacing.size(), 3u);
  EXPECT_EQ(volume.spacing[0], 0);
  EXPECT_TRUE(std::isnan(volume.spacing[1]));
  EXPECT_TRUE(std::isinf(volume.spacing[2]));
}

}  // namespace
}  // namespace trainbench::medical
