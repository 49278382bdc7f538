#include "medical/phantoms.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "data/random.h"
#include "medical/kits19.h"
#include "medical/nifti.h"
#include "medical/patches.h"

namespace trainbench::medical {

namespace {

constexpr double kAirHu = -1000, kTissueHu = 30, kBoneHu = 600, kKidneyHu = 190, kTumourHu = -30;

struct Ellipsoid {
  std::array<double, 3> centre, radii;  // mm
  bool contains(const std::array<double, 3>& point) const {
    double sum = 0;
    for (int axis = 0; axis < 3; ++axis) sum += std::pow((point[axis] - centre[axis]) / radii[axis], 2);
    return sum <= 1;
  }
};

void make_case(const std::string& folder, const PhantomOptions& options, int id) {
  data::Rng rng(data::mix_seed(options.seed, static_cast<uint64_t>(id), 0x6b697473));
  // Slice thickness and in-plane spacing vary per case, as KiTS19's scans do.
  const std::array<double, 3> spacing{rng.uniform(1.2, 2.4), rng.uniform(0.8, 1.5), 0};
  const std::array<double, 3> spacing3{spacing[0], spacing[1], spacing[1]};
  Shape3 shape{};
  for (int axis = 0; axis < 3; ++axis) shape[axis] = static_cast<int64_t>(std::lround(options.extent_mm[axis] / spacing3[axis]));

  const auto& extent = options.extent_mm;
  const Ellipsoid body{{extent[0] / 2, extent[1] / 2, extent[2] / 2}, {extent[0], extent[1] * 0.46, extent[2] * 0.48}};
  const Ellipsoid spine{{extent[0] / 2, extent[1] * 0.78, extent[2] / 2}, {extent[0], extent[1] * 0.08, extent[2] * 0.08}};
  std::array<Ellipsoid, 2> kidneys;
  for (int side = 0; side < 2; ++side) {
    const double offset = extent[2] * rng.uniform(0.2, 0.27);
    kidneys[side] = {{extent[0] * rng.uniform(0.4, 0.6), extent[1] * rng.uniform(0.55, 0.65),
                      extent[2] / 2 + (side ? offset : -offset)},
                     {extent[0] * rng.uniform(0.18, 0.26), extent[1] * rng.uniform(0.13, 0.17), extent[2] * rng.uniform(0.11, 0.14)}};
  }
  const bool has_tumour = rng.uniform() < options.tumour_probability;
  const Ellipsoid& host = kidneys[rng.below(2)];
  Ellipsoid tumour{};
  if (has_tumour) {
    const double radius = std::min(host.radii[1], host.radii[2]) * rng.uniform(0.7, 1.1);
    std::array<double, 3> centre{};
    for (int axis = 0; axis < 3; ++axis) centre[axis] = host.centre[axis] + host.radii[axis] * rng.uniform(-0.6, 0.6);
    tumour = {centre, {radius, radius, radius}};
  }

  std::vector<float> image(static_cast<size_t>(voxel_count(shape))), label(image.size());
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k) {
        const std::array<double, 3> point{(static_cast<double>(i) + 0.5) * spacing3[0], (static_cast<double>(j) + 0.5) * spacing3[1],
                                          (static_cast<double>(k) + 0.5) * spacing3[2]};
        double hu = kAirHu;
        uint8_t cls = 0;
        if (body.contains(point)) hu = kTissueHu;
        if (spine.contains(point)) hu = kBoneHu;
        for (const Ellipsoid& kidney : kidneys)
          if (kidney.contains(point)) hu = kKidneyHu, cls = 1;
        if (has_tumour && tumour.contains(point) && body.contains(point)) hu = kTumourHu, cls = 2;
        const size_t index = static_cast<size_t>((i * shape[1] + j) * shape[2] + k);
        image[index] = static_cast<float>(hu + options.noise_hu * standard_normal(rng));
        label[index] = cls;
      }
  write_nifti(folder + "/imaging.nii.gz", shape, spacing3, image, NiftiStorage::kInt16);
  write_nifti(folder + "/segmentation.nii.gz", shape, spacing3, label, NiftiStorage::kUint8);
}

}  // namespace

void make_kits19_phantoms(const std::string& out_dir, const PhantomOptions& options) {
  for (int id = 0; id < kCaseIdLimit; ++id) {
    char name[16];
    std::snprintf(name, sizeof(name), "case_%05d", id);
    make_case((std::filesystem::path(out_dir) / name).string(), options, id);
  }
}

}  // namespace trainbench::medical
