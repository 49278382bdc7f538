#include "medical/kits19.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "medical/nifti.h"
#include "medical/npy.h"
#include "util/error.h"
#include "util/file_digest.h"
#include "util/json_limits.h"

namespace trainbench::medical {

namespace fs = std::filesystem;

namespace {

// PyTorch's align_corners=True source coordinate for each output index, in float as its CPU kernel computes.
struct LinearTaps {
  std::vector<int64_t> low, high;
  std::vector<float> low_weight, high_weight;
};
LinearTaps linear_taps(int64_t in, int64_t out) {
  LinearTaps taps;
  const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  for (int64_t o = 0; o < out; ++o) {
    const float source = scale * static_cast<float>(o);
    const auto index = static_cast<int64_t>(source);
    const float lambda = source - static_cast<float>(index);
    taps.low.push_back(index);
    taps.high.push_back(index + (index < in - 1 ? 1 : 0));
    taps.low_weight.push_back(1.0f - lambda);
    taps.high_weight.push_back(lambda);
  }
  return taps;
}

std::vector<int64_t> nearest_taps(int64_t in, int64_t out) {
  std::vector<int64_t> taps;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o)
    taps.push_back(std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1));
  return taps;
}

// np.pad(mode="edge") splitting max(0, min - shape) as (d // 2, d - d // 2) per axis.
template <typename T>
std::vector<T> pad_edge(const std::vector<T>& volume, const Shape3& shape, const Shape3& padded, const Shape3& before) {
  std::vector<T> out(static_cast<size_t>(voxel_count(padded)));
  const auto source = [&](int64_t index, int axis) { return std::clamp<int64_t>(index - before[axis], 0, shape[axis] - 1); };
  for (int64_t i = 0; i < padded[0]; ++i)
    for (int64_t j = 0; j < padded[1]; ++j)
      for (int64_t k = 0; k < padded[2]; ++k)
        out[static_cast<size_t>((i * padded[1] + j) * padded[2] + k)] =
            volume[static_cast<size_t>((source(i, 0) * shape[1] + source(j, 1)) * shape[2] + source(k, 2))];
  return out;
}

// The first voxel of `values` for which `bad` holds, as an Error naming `path`, the voxel and `what` it is.
template <typename T, typename Bad>
void refuse_first(const std::vector<T>& values, const Shape3& shape, const std::string& path, Bad bad, const std::string& what) {
  const auto found = std::find_if(values.begin(), values.end(), bad);
  if (found == values.end()) return;
  const auto index = static_cast<int64_t>(found - values.begin());
  char text[160];
  std::snprintf(text, sizeof text, "voxel (%lld, %lld, %lld) is %g; expected %s",
                static_cast<long long>(index / (shape[1] * shape[2])), static_cast<long long>(index / shape[2] % shape[1]),
                static_cast<long long>(index % shape[2]), static_cast<double>(*found), what.c_str());
  fail(path, text);
}

constexpr const char* kLabelsExpected = "a label 0 (background), 1 (kidney) or 2 (tumour)";

}  // namespace

void check_labels(const std::vector<float>& labels, const Shape3& shape, const std::string& path) {
  refuse_first(labels, shape, path, [](float value) { return value != 0 && value != 1 && value != 2; }, kLabelsExpected);
}

void check_labels(const std::vector<uint8_t>& labels, const Shape3& shape, const std::string& path) {
  refuse_first(labels, shape, path, [](uint8_t value) { return value > 2; }, kLabelsExpected);
}

void check_intensities(const std::vector<float>& image, const Shape3& shape, const std::string& path) {
  refuse_first(image, shape, path, [](float value) { return !std::isfinite(value); }, "a finite intensity");
}

const std::vector<std::string>& evaluation_case_ids() {
  static const std::vector<std::string> ids = {
      "00000", "00003", "00005", "00006", "00012", "00024", "00034", "00041", "00044", "00049", "00052",
      "00056", "00061", "00065", "00066", "00070", "00076", "00078", "00080", "00084", "00086", "00087",
      "00092", "00111", "00112", "00125", "00128", "00138", "00157", "00160", "00161", "00162", "00169",
      "00171", "00176", "00185", "00187", "00189", "00198", "00203", "00206", "00207"};
  return ids;
}

std::vector<float> resample_trilinear(const std::vector<float>& volume, const Shape3& from, const Shape3& to) {
  const LinearTaps t = linear_taps(from[0], to[0]), h = linear_taps(from[1], to[1]), w = linear_taps(from[2], to[2]);
  std::vector<float> out(static_cast<size_t>(voxel_count(to)));
  const auto at = [&](int64_t i, int64_t j, int64_t k) {
    return volume[static_cast<size_t>((i * from[1] + j) * from[2] + k)];
  };
  for (int64_t i = 0; i < to[0]; ++i)
    for (int64_t j = 0; j < to[1]; ++j)
      for (int64_t k = 0; k < to[2]; ++k) {
        const int64_t t0 = t.low[i], t1 = t.high[i], h0 = h.low[j], h1 = h.high[j], w0 = w.low[k], w1 = w.high[k];
        const float tw0 = t.low_weight[i], tw1 = t.high_weight[i], hw0 = h.low_weight[j], hw1 = h.high_weight[j],
                    ww0 = w.low_weight[k], ww1 = w.high_weight[k];
        // The order of PyTorch's upsample_trilinear3d CPU kernel.
        out[static_cast<size_t>((i * to[1] + j) * to[2] + k)] =
            tw0 * (hw0 * (ww0 * at(t0, h0, w0) + ww1 * at(t0, h0, w1)) + hw1 * (ww0 * at(t0, h1, w0) + ww1 * at(t0, h1, w1))) +
            tw1 * (hw0 * (ww0 * at(t1, h0, w0) + ww1 * at(t1, h0, w1)) + hw1 * (ww0 * at(t1, h1, w0) + ww1 * at(t1, h1, w1)));
      }
  return out;
}

std::vector<uint8_t> resample_nearest(const std::vector<uint8_t>& volume, const Shape3& from, const Shape3& to) {
  const std::vector<int64_t> t = nearest_taps(from[0], to[0]), h = nearest_taps(from[1], to[1]),
                             w = nearest_taps(from[2], to[2]);
  std::vector<uint8_t> out(static_cast<size_t>(voxel_count(to)));
  for (int64_t i = 0; i < to[0]; ++i)
    for (int64_t j = 0; j < to[1]; ++j)
      for (int64_t k = 0; k < to[2]; ++k)
        out[static_cast<size_t>((i * to[1] + j) * to[2] + k)] =
            volume[static_cast<size_t>((t[i] * from[1] + h[j]) * from[2] + w[k])];
  return out;
}

Shape3 resampled_shape(const Shape3& shape, const std::array<double, 3>& spacing) {
  Shape3 out{};
  double voxels = 1;
  for (int axis = 0; axis < 3; ++axis) {
    if (!(spacing[axis] > 0) || !std::isfinite(spacing[axis]))
      fail("preprocess", "spacing (pixdim[" + std::to_string(axis + 1) + "]) " + std::to_string(spacing[axis]) +
                             " mm is not a positive finite length");
    const double size = spacing[axis] / kTargetSpacing[axis] * static_cast<double>(shape[axis]);
    voxels *= std::max(size, 1.0);
    if (voxels > static_cast<double>(kMaxResampledVoxels))
      fail("preprocess", "spacing " + std::to_string(spacing[0]) + " x " + std::to_string(spacing[1]) + " x " +
                             std::to_string(spacing[2]) + " mm would resample the volume to more than " +
                             std::to_string(kMaxResampledVoxels) + " voxels");
    out[axis] = static_cast<int64_t>(size);
  }
  return out;
}

PreparedCase preprocess_case(const std::vector<float>& image, const std::vector<float>& label, const Shape3& shape,
                             const std::array<double, 3>& spacing, const Shape3& min_shape) {
  PreparedCase result;
  check_labels(label, shape, "preprocess");  // before the cast, which is undefined beyond uint8 (found by the nifti fuzzer)
  std::vector<uint8_t> labels(label.size());
  // get_fdata().astype(np.uint8)
  std::transform(label.begin(), label.end(), labels.begin(), [](float value) { return static_cast<uint8_t>(value); });
  std::vector<float> intensities;
  Shape3 current = shape;
  if (spacing != kTargetSpacing) {
    current = resampled_shape(shape, spacing);
    for (int axis = 0; axis < 3; ++axis)
      if (current[axis] < 1) fail("preprocess", "a resampled axis would be empty");
    intensities = resample_trilinear(image, shape, current);
    labels = resample_nearest(labels, shape, current);
  } else {
    intensities = image;
  }
  for (float& value : intensities) value = (std::clamp(value, kClipMin, kClipMax) - kNormMean) / kNormStd;
  Shape3 padded{}, before{};
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t missing = std::max<int64_t>(0, min_shape[axis] - current[axis]);
    before[axis] = missing / 2;
    padded[axis] = current[axis] + missing;
  }
  result.shape = padded;
  result.image = pad_edge(intensities, current, padded, before);
  result.label = pad_edge(labels, current, padded, before);
  return result;
}

int prepare_kits19(const std::string& in_dir, const std::string& out_dir, const Shape3& min_shape) {
  if (!fs::is_directory(in_dir)) fail(in_dir, "no such directory (expected KiTS19's case_XXXXX folders)");
  std::map<int, fs::path> cases;
  const std::regex name(R"(case_(\d{5}))");
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    std::smatch match;
    const std::string folder = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(folder, match, name)) continue;
    const int id = std::stoi(match[1]);
    if (id < kCaseIdLimit) cases[id] = entry.path();
  }
  if (cases.empty()) fail(in_dir, "holds no case_XXXXX folders with ids below 210 (KiTS19's layout)");
  fs::create_directories(out_dir);
  for (const auto& [id, folder] : cases) {
    const NiftiVolume image = read_nifti((folder / "imaging.nii.gz").string());
    const NiftiVolume label = read_nifti((folder / "segmentation.nii.gz").string());
    if (image.shape.size() != 3) fail((folder / "imaging.nii.gz").string(), "expected a 3-D volume");
    if (label.shape != image.shape)
      fail((folder / "segmentation.nii.gz").string(), "its shape differs from imaging.nii.gz");
    const Shape3 shape{image.shape[0], image.shape[1], image.shape[2]};
    check_intensities(image.voxels, shape, (folder / "imaging.nii.gz").string());
    check_labels(label.voxels, shape, (folder / "segmentation.nii.gz").string());
    // nibabel's pixdim is float32; the reference compares those values with the target spacing.
    const std::array<double, 3> spacing{static_cast<float>(image.spacing[0]), static_cast<float>(image.spacing[1]),
                                        static_cast<float>(image.spacing[2])};
    PreparedCase prepared;
    try {
      prepared = preprocess_case(image.voxels, label.voxels, shape, spacing, min_shape);
    } catch (const Error& error) {
      fail((folder / "imaging.nii.gz").string(), error.what());
    }
    const std::vector<int64_t> stored{1, prepared.shape[0], prepared.shape[1], prepared.shape[2]};
    const std::string stem = (fs::path(out_dir) / folder.filename()).string();
    write_npy(stem + "_x.npy", stored, prepared.image);
    write_npy(stem + "_y.npy", stored, prepared.label);
  }
  return static_cast<int>(cases.size());
}

ChecksumComparison compare_with_checksums(const std::string& prepared_dir, const std::string& checksum_path) {
  std::ifstream in(checksum_path);
  if (!in) fail(checksum_path, "cannot open the checksum file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check_json_nesting(text, checksum_path);
  nlohmann::json listed;
  try {
    listed = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(checksum_path, std::string("not valid JSON (") + error.what() + ")");
  }
  if (!listed.is_object() || listed.empty())
    fail(checksum_path, "expected a JSON object of file names to md5 strings, as the reference's checksum.json");
  const std::regex prepared_name(R"(case_\d{5}_[xy]\.npy)");
  std::set<std::string> prepared;
  for (const auto& entry : fs::directory_iterator(prepared_dir))
    if (std::regex_match(entry.path().filename().string(), prepared_name)) prepared.insert(entry.path().filename().string());
  ChecksumComparison comparison;
  for (const auto& [name, md5] : listed.items()) {
    if (!md5.is_string()) fail(checksum_path + ": " + name, "expected an md5 string");
    if (!prepared.count(name)) {
      comparison.missing.push_back(name);
    } else if (md5_hex((fs::path(prepared_dir) / name).string()) == md5.get<std::string>()) {
      ++comparison.matching;
    } else {
      comparison.differing.push_back(name);
    }
  }
  for (const std::string& name : prepared)
    if (!listed.contains(name)) comparison.unlisted.push_back(name);
  return comparison;
}

Kits19Split split_prepared_cases(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, "no such directory (expected case_XXXXX_{x,y}.npy from `trainbench data prepare unet3d`)");
  std::map<std::string, PreparedFiles> found;
  const std::regex name(R"(case_(\d{5})_x\.npy)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, match, name)) continue;
    const std::string id = match[1];
    const std::string label = (fs::path(dir) / ("case_" + id + "_y.npy")).string();
    if (!fs::is_regular_file(label)) fail(entry.path().string(), "has no label file case_" + id + "_y.npy beside it");
    found[id] = {id, entry.path().string(), label};
  }
  if (found.empty()) fail(dir, "holds no case_XXXXX_x.npy (run `trainbench data prepare unet3d` first)");
  const auto& eval_ids = evaluation_case_ids();
  Kits19Split split;
  for (const auto& [id, files] : found)
    (std::find(eval_ids.begin(), eval_ids.end(), id) != eval_ids.end() ? split.eval : split.train).push_back(files);
  return split;
}

}  // namespace trainbench::medical
