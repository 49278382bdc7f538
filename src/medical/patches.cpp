#include "medical/patches.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <tuple>

#include "util/error.h"

namespace trainbench::medical {

namespace {

// Python's random.randrange(n) with the reference's guard: 0 when n is 0.
int64_t randrange(data::Rng& rng, int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(rng.below(static_cast<uint64_t>(n))); }

Box uniform_crop(const Shape3& shape, const Shape3& patch, data::Rng& rng) {
  Box box;
  for (int axis = 0; axis < 3; ++axis) {
    box.low[axis] = randrange(rng, shape[axis] - patch[axis]);
    box.high[axis] = box.low[axis] + patch[axis];
  }
  return box;
}

// The reference's adjust(): grow (or shrink) the component's extent to the patch with a random split of the
// slack, clamp to the volume, then shift to restore the patch size.
std::pair<int64_t, int64_t> adjust(int64_t start, int64_t stop, int64_t patch, int64_t size, data::Rng& rng) {
  int64_t diff = patch - (stop - start);
  const int64_t sign = diff < 0 ? -1 : 1;
  diff = std::abs(diff);
  const int64_t low_adjust = randrange(rng, diff), high_adjust = diff - low_adjust;
  int64_t low = std::max<int64_t>(0, start - sign * low_adjust);
  int64_t high = std::min(size, stop + sign * high_adjust);
  diff = patch - (high - low);
  if (diff > 0 && low == 0)
    high += diff;
  else if (diff > 0)
    low -= diff;
  return {low, high};
}

}  // namespace

double standard_normal(data::Rng& rng) {
  return std::sqrt(-2.0 * std::log(1.0 - rng.uniform())) * std::cos(2.0 * M_PI * rng.uniform());
}

ForegroundBoxes foreground_boxes(const std::vector<uint8_t>& label, const Shape3& shape) {
  ForegroundBoxes result;
  std::array<bool, 256> present{};
  for (const uint8_t value : label) present[value] = true;
  std::vector<uint8_t> visited(label.size());
  const int64_t plane = shape[1] * shape[2];
  for (int cls = 1; cls < 256; ++cls) {
    if (!present[static_cast<size_t>(cls)]) continue;
    std::fill(visited.begin(), visited.end(), 0);
    std::vector<Box> boxes;
    std::deque<int64_t> queue;
    for (int64_t start = 0; start < static_cast<int64_t>(label.size()); ++start) {
      if (label[static_cast<size_t>(start)] != cls || visited[static_cast<size_t>(start)]) continue;
      Box box;
      for (int axis = 0; axis < 3; ++axis) box.low[axis] = shape[axis], box.high[axis] = 0;
      visited[static_cast<size_t>(start)] = 1;
      queue.push_back(start);
      while (!queue.empty()) {
        const int64_t index = queue.front();
        queue.pop_front();
        const std::array<int64_t, 3> at{index / plane, (index / shape[2]) % shape[1], index % shape[2]};
        for (int axis = 0; axis < 3; ++axis) {
          box.low[axis] = std::min(box.low[axis], at[axis]);
          box.high[axis] = std::max(box.high[axis], at[axis] + 1);
        }
        const std::array<int64_t, 3> step{plane, shape[2], 1};
        for (int axis = 0; axis < 3; ++axis)
          for (const int64_t direction : {-1, 1}) {
            const int64_t next = at[axis] + direction;
            if (next < 0 || next >= shape[axis]) continue;
            const int64_t neighbour = index + direction * step[axis];
            if (label[static_cast<size_t>(neighbour)] == cls && !visited[static_cast<size_t>(neighbour)]) {
              visited[static_cast<size_t>(neighbour)] = 1;
              queue.push_back(neighbour);
            }
          }
      }
      boxes.push_back(box);
    }
    std::stable_sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return a.volume() < b.volume(); });
    if (boxes.size() > 2) boxes.erase(boxes.begin(), boxes.end() - 2);
    result.classes.push_back(static_cast<uint8_t>(cls));
    result.largest.push_back(std::move(boxes));
  }
  return result;
}

void sample_training_patch(const float* image, const uint8_t* label, const Shape3& shape, const ForegroundBoxes& boxes,
                           const PatchOptions& options, data::Rng& rng, float* image_out, uint8_t* label_out) {
  const Shape3& patch = options.patch;
  for (int axis = 0; axis < 3; ++axis)
    if (shape[axis] < patch[axis])
      fail("unet3d patch", "a case of shape " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
                               std::to_string(shape[2]) + " is smaller than the patch (prepare pads to the patch)");
  Box crop;
  if (rng.uniform() < options.oversampling && !boxes.classes.empty()) {
    const size_t cls = rng.below(boxes.classes.size());
    const std::vector<Box>& candidates = boxes.largest[cls];
    const Box& component = candidates[rng.below(candidates.size())];
    for (int axis = 0; axis < 3; ++axis)
      std::tie(crop.low[axis], crop.high[axis]) =
          adjust(component.low[axis], component.high[axis], patch[axis], shape[axis], rng);
  } else {
    crop = uniform_crop(shape, patch, rng);
  }
  std::array<bool, 3> flip{};
  for (int axis = 0; axis < 3; ++axis) flip[axis] = rng.uniform() < 1.0 / 3.0;
  for (int64_t i = 0; i < patch[0]; ++i)
    for (int64_t j = 0; j < patch[1]; ++j)
      for (int64_t k = 0; k < patch[2]; ++k) {
        const int64_t si = crop.low[0] + (flip[0] ? patch[0] - 1 - i : i);
        const int64_t sj = crop.low[1] + (flip[1] ? patch[1] - 1 - j : j);
        const int64_t sk = crop.low[2] + (flip[2] ? patch[2] - 1 - k : k);
        const size_t source = static_cast<size_t>((si * shape[1] + sj) * shape[2] + sk);
        const size_t target = static_cast<size_t>((i * patch[1] + j) * patch[2] + k);
        image_out[target] = image[source];
        label_out[target] = label[source];
      }
  const int64_t count = voxel_count(patch);
  if (rng.uniform() < 0.1) {
    const auto factor = static_cast<float>(1.0 + rng.uniform(0.7, 1.3));  // the reference's (1 + factor)
    for (int64_t v = 0; v < count; ++v) image_out[v] *= factor;
  }
  if (rng.uniform() < 0.1) {
    const double sigma = rng.uniform(0.0, 0.1);
    for (int64_t v = 0; v < count; ++v) image_out[v] += static_cast<float>(sigma * standard_normal(rng));
  }
}

std::vector<float> gaussian_importance(const Shape3& roi) {
  std::array<std::vector<double>, 3> axes;
  for (int axis = 0; axis < 3; ++axis) {
    const double std = 0.125 * static_cast<double>(roi[axis]);
    for (int64_t i = 0; i < roi[axis]; ++i) {
      const double n = static_cast<double>(i) - (static_cast<double>(roi[axis]) - 1.0) / 2.0;
      axes[axis].push_back(std::exp(-n * n / (2 * std * std)));
    }
  }
  std::vector<double> weights(static_cast<size_t>(voxel_count(roi)));
  double largest = 0;
  for (int64_t i = 0; i < roi[0]; ++i)
    for (int64_t j = 0; j < roi[1]; ++j)
      for (int64_t k = 0; k < roi[2]; ++k) {
        const double value = std::cbrt(axes[0][i] * axes[1][j] * axes[2][k]);
        weights[static_cast<size_t>((i * roi[1] + j) * roi[2] + k)] = value;
        largest = std::max(largest, value);
      }
  std::vector<float> result(weights.size());
  for (size_t v = 0; v < weights.size(); ++v) result[v] = static_cast<float>(weights[v] / largest);
  return result;
}

int64_t window_stride(int64_t roi, double overlap) { return static_cast<int64_t>(static_cast<double>(roi) * (1 - overlap)); }

WindowPlan plan_sliding_windows(const Shape3& shape, const Shape3& roi, double overlap) {
  WindowPlan plan;
  std::array<int64_t, 3> count{};
  for (int axis = 0; axis < 3; ++axis) {
    plan.stride[axis] = window_stride(roi[axis], overlap);
    if (plan.stride[axis] < 1) fail("unet3d evaluation", "the window stride must be at least one voxel");
    int64_t crop = shape[axis] % plan.stride[axis];
    if (crop >= plan.stride[axis] / 2) crop = 0;
    plan.crop_low[axis] = crop / 2;
    plan.cropped[axis] = shape[axis] - crop;
    int64_t pad = (plan.stride[axis] - plan.cropped[axis] % plan.stride[axis]) % plan.stride[axis];
    if (plan.cropped[axis] + pad < roi[axis]) pad += plan.stride[axis];
    plan.pad_low[axis] = pad / 2;
    plan.padded[axis] = plan.cropped[axis] + pad;
    count[axis] = (plan.padded[axis] - roi[axis]) / plan.stride[axis] + 1;
  }
  for (int64_t i = 0; i < count[0]; ++i)
    for (int64_t j = 0; j < count[1]; ++j)
      for (int64_t k = 0; k < count[2]; ++k)
        plan.origins.push_back({i * plan.stride[0], j * plan.stride[1], k * plan.stride[2]});
  return plan;
}

}  // namespace trainbench::medical
